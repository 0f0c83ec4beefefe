"""Every config chapter 10 prints (the GRPO variants, the DPO loss types,
KTO/SimPO/ORPO) is built as the real TRL 1.16.0 config class on one CPU process,
and the papers' batch geometry is what TRL derives from it."""

import importlib
import warnings

import pytest

from dpo_grpo.chapters import variants as V

trl = pytest.importorskip("trl")

PRINTED = V.GRPO_VARIANTS + V.DPO_VARIANTS + V.PREFERENCE_TRAINERS


def build(variant, tmp_path):
    module, _, name = V.TRL_CONFIG_CLASSES[variant.trainer].rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(
            output_dir=str(tmp_path),
            use_cpu=True,
            bf16=False,
            report_to="none",
            **variant.config,
        )


@pytest.mark.parametrize("variant", PRINTED, ids=lambda var: var.name)
def test_every_printed_config_builds_under_trl(variant, tmp_path):
    cfg = build(variant, tmp_path)
    assert cfg.world_size == 1
    for key, value in variant.config.items():
        got = getattr(cfg, key)
        if key == "loss_type" and isinstance(value, str):
            got = got[0] if isinstance(got, list) and len(got) == 1 else got
        assert got == value, (variant.name, key)
    if variant.trainer in ("GRPOConfig", "RLOOConfig"):
        geo = V.rollout_geometry(variant)
        assert geo.completions_per_rollout == cfg.generation_batch_size
        assert geo.updates_per_rollout == (
            cfg.steps_per_generation
            * cfg.num_iterations
            / cfg.gradient_accumulation_steps
        )
        assert geo.completions_per_update == (
            cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps
        )


def by_name(name):
    return next(var for var in PRINTED if var.name == name)


def test_grpo_row_is_deepseekmath_geometry(tmp_path):
    # 64 samples per question, batch 1024, one update per exploration stage, beta 0.04
    cfg = build(by_name("GRPO"), tmp_path)
    assert cfg.num_generations == 64 and cfg.beta == 0.04
    assert cfg.generation_batch_size == 1024
    assert cfg.steps_per_generation == cfg.gradient_accumulation_steps
    assert cfg.num_iterations == 1
    assert V.rollout_geometry(by_name("GRPO")).updates_per_rollout == 1


def test_dapo_row_is_dapo_geometry(tmp_path):
    # 512 prompts x 16 answers per rollout, mini-batches of 512 answers: 16 updates
    cfg = build(by_name("DAPO"), tmp_path)
    assert cfg.num_generations == 16
    assert cfg.generation_batch_size == 512 * 16
    assert cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps == 512
    assert cfg.steps_per_generation // cfg.gradient_accumulation_steps == 16
    assert cfg.steps_per_generation % cfg.gradient_accumulation_steps == 0
    geo = V.rollout_geometry(by_name("DAPO"))
    assert geo.prompts_per_rollout == 512 and geo.updates_per_rollout == 16


def test_simpo_row_uses_the_papers_beta_and_margin(tmp_path):
    # TRL's simpo loss is -log sigmoid(beta * (avg-logp margin) - simpo_gamma): the
    # target margin in length-averaged log-prob is simpo_gamma / beta; the SimPO
    # paper uses beta 2.0-2.5
    cfg = build(by_name("SimPO"), tmp_path)
    assert 2.0 <= cfg.beta <= 2.5
    assert V.simpo_target_margin(by_name("SimPO")) == cfg.simpo_gamma / cfg.beta
    assert V.simpo_target_margin(by_name("SimPO")) < 1.0


def test_geometry_refuses_what_trl_refuses(tmp_path):
    bad = V.Variant("x", "", "", "GRPOConfig", dict(num_generations=64))
    with pytest.raises(ValueError, match="divisible by num_generations"):
        V.rollout_geometry(bad)
    with pytest.raises(ValueError, match="divisible by num_generations"):
        build(bad, tmp_path)
