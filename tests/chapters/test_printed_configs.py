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


# --------------------------------------------------------------------------------------
# The numbers beside each GRPO row are computed with the config TRL builds from it
# --------------------------------------------------------------------------------------

#: grpo_loss keywords that describe the run (batch geometry, accumulation), not the loss
#: on the toy batch, which the table runs as one whole micro-batch of its own width
_GEOMETRY = {
    "max_completion_length",
    "num_items_in_batch",
    "gradient_accumulation_steps",
    "steps_per_generation",
    "num_processes",
}


def trl_loss_options(cfg):
    """grpo_loss's keywords as a built GRPOConfig holds them (TRL's trainer reads
    epsilon_high as epsilon when it is None)."""
    import inspect

    from dpo_grpo.trl_exact.grpo import grpo_loss

    names = inspect.signature(grpo_loss).parameters
    out = {k: getattr(cfg, k) for k in names if hasattr(cfg, k) and k not in _GEOMETRY}
    if out["epsilon_high"] is None:
        out["epsilon_high"] = out["epsilon"]
    return out


@pytest.mark.parametrize(
    "variant",
    [var for var in V.GRPO_VARIANTS if var.trainer == "GRPOConfig"],
    ids=lambda var: var.name,
)
@pytest.mark.parametrize("drift", [0.0, 1.0], ids=["on-policy", "stale"])
def test_table_numbers_are_computed_with_the_config_trl_builds(
    variant, drift, tmp_path
):
    import numpy as np

    from dpo_grpo.trl_exact.advantages import reward_advantages
    from dpo_grpo.trl_exact.grpo import grpo_loss

    cfg = build(variant, tmp_path)
    b = V.toy_batch(drift)
    adv = reward_advantages(
        b["rewards"].reshape(-1, 1),
        b["num_generations"],
        scale_rewards=cfg.scale_rewards,
    ).advantages
    opts = trl_loss_options(cfg)
    want = grpo_loss(
        b["new"],
        b["old"],
        b["ref"] if opts["beta"] else None,
        adv,
        b["mask"],
        max_completion_length=b["mask"].shape[1],
        **opts,
    )
    got = V.variant_loss(variant, b)
    np.testing.assert_allclose(got["advantages"], adv, rtol=0, atol=1e-15)
    assert got["loss"] == pytest.approx(want.loss, rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(got["grad"], want.grad, rtol=1e-12, atol=1e-15)


# --------------------------------------------------------------------------------------
# What each row claims to reproduce, field by field, in the config TRL builds
# --------------------------------------------------------------------------------------

#: The fields each paper's claim rests on, as chapter 10 states the paper (values after
#: TRL's __post_init__; epsilon_high as the trainer reads it). TRL 1.16.0 has one KL
#: estimator, k3 (exp(ref - new) - (ref - new) - 1, GRPOTrainer._compute_loss), so
#: "k3" is beta > 0 with use_bias_correction_kl=False (True multiplies k3 by the
#: importance ratio, DeepSeek-V3.2's correction, which changes the KL gradient).
#: loss_type "grpo": per-sequence token mean, then the mean over sequences; "dr_grpo":
#: sum over the batch / (B x max_completion_length); "dapo": token mean over the batch;
#: "luspo": per-sequence sum, then the mean (grpo_trainer.py, _compute_loss).
PAPER_CLAIMS = {
    # DeepSeekMath (shao2024deepseekmath): eq. for GRPO with the k3 KL in the loss,
    # beta 0.04, 64 samples per question, 1024 tokens, batch 1024, one update per
    # exploration stage, group-standardised outcome rewards; no clip radius is stated
    # (one update per stage keeps every ratio at 1: the clip never binds)
    "GRPO": dict(
        loss_type="grpo",
        beta=0.04,
        use_bias_correction_kl=False,
        scale_rewards="group",
        importance_sampling_level="token",
        num_generations=64,
        max_completion_length=1024,
        generation_batch_size=1024,
        num_iterations=1,
        updates_per_rollout=1,
    ),
    # Dr. GRPO (liu2025drgrpo): no std division, constant normaliser, no KL
    "Dr. GRPO": dict(loss_type="dr_grpo", scale_rewards="none", beta=0.0),
    # DAPO (yu2025dapo): clip-higher 0.2/0.28, token-level mean, no KL, overlong
    # filtering, 16384 + 4096 tokens, 512 prompts x 16, 16 updates of 512; the group
    # std stays
    "DAPO": dict(
        loss_type="dapo",
        epsilon=0.2,
        epsilon_high=0.28,
        beta=0.0,
        scale_rewards="group",
        mask_truncated_completions=True,
        num_generations=16,
        max_completion_length=20480,
        generation_batch_size=8192,
        updates_per_rollout=16,
    ),
    # GSPO (zheng2025gspo): sequence ratio, band 3e-4 / 4e-4, mean over sequences, no
    # KL, four minibatches per rollout
    "GSPO": dict(
        importance_sampling_level="sequence",
        loss_type="grpo",
        epsilon=3e-4,
        epsilon_high=4e-4,
        beta=0.0,
        updates_per_rollout=4,
    ),
    "LUSPO": dict(loss_type="luspo", importance_sampling_level="sequence", beta=0.0),
    "CISPO": dict(loss_type="cispo", epsilon_high=5.0, beta=0.0),
    "SAPO": dict(
        loss_type="sapo", sapo_temperature_pos=1.0, sapo_temperature_neg=1.05, beta=0.0
    ),
    "VESPO": dict(
        loss_type="vespo",
        vespo_k_pos=2.0,
        vespo_lambda_pos=3.0,
        vespo_k_neg=3.0,
        vespo_lambda_neg=2.0,
        beta=0.0,
    ),
    # RLOO (ahmadian2024rloo) as TRL runs it: the page's "default beta=0.05", one
    # update per rollout (the paper's on-policy estimator), no batch normalisation
    "RLOO": dict(
        beta=0.05, num_iterations=1, updates_per_rollout=1, normalize_advantages=False
    ),
    # DPO (rafailov2023dpo): -log sigmoid(beta m), beta 0.1
    "DPO": dict(loss_type=["sigmoid"], beta=0.1),
    # SimPO (meng2024simpo), Llama-3-Base: beta 2.0, gamma / beta 0.5, no SFT term
    "SimPO": dict(loss_type="simpo", beta=2.0, simpo_gamma=1.0, cpo_alpha=0.0),
}

#: GRPOConfig options that change the objective or the sampling policy; a row that
#: reproduces a paper leaves every one it does not set at TRL's neutral value
_NEUTRAL_GRPO = dict(
    delta=None,
    top_entropy_quantile=1.0,
    entropy_coef=0.0,
    use_adaptive_entropy=False,
    off_policy_mask_threshold=None,
    sync_ref_model=False,
    temperature=1.0,
    top_p=1.0,
    top_k=0,
    min_p=None,
    repetition_penalty=1.0,
)


def resolved(cfg, key, variant):
    if key == "updates_per_rollout":
        return V.rollout_geometry(variant).updates_per_rollout
    value = getattr(cfg, key)
    if key == "epsilon_high" and value is None:
        return cfg.epsilon  # GRPOTrainer: args.epsilon_high or args.epsilon
    return value


@pytest.mark.parametrize("name", sorted(PAPER_CLAIMS))
def test_each_row_sets_the_fields_its_paper_rests_on(name, tmp_path):
    variant = by_name(name)
    cfg = build(variant, tmp_path)
    wrong = {
        key: (resolved(cfg, key, variant), want)
        for key, want in PAPER_CLAIMS[name].items()
        if resolved(cfg, key, variant) != want
    }
    assert not wrong, (name, wrong)
    if variant.trainer == "GRPOConfig":
        moved = {
            k: getattr(cfg, k)
            for k, neutral in _NEUTRAL_GRPO.items()
            if k not in variant.config and getattr(cfg, k) != neutral
        }
        assert not moved, (name, moved)
    # every field of the claim is written in the printed config, not left to a TRL
    # default that a later release may change
    implicit = set(PAPER_CLAIMS[name]) - set(variant.config) - _DERIVED
    assert not implicit, (name, implicit)


#: claims that follow from printed fields (TRL derives them in __post_init__)
_DERIVED = {"generation_batch_size", "updates_per_rollout", "epsilon_high"}


def test_the_grpo_row_is_the_papers_grpo_of_chapter_5():
    # one home for DeepSeekMath's GRPO: chapter 5's paper column and chapter 10's row
    from dpo_grpo.chapters import parity

    row = by_name("GRPO").config
    for key, value in parity.PAPER_GRPO.items():
        if value is not None and key != "std_ddof":
            assert row.get(key) == value, key


def test_the_trl_defaults_the_page_names(tmp_path):
    # "TRL's defaults differ (beta=0.0, loss_type="dapo", 8 answers per group)";
    # "RLOOConfig (default beta=0.05)"; DPOConfig's beta 0.1, loss sigmoid
    g = trl.GRPOConfig(output_dir=str(tmp_path), **V.CPU_CONFIG)
    assert (g.beta, g.loss_type, g.num_generations) == (0.0, "dapo", 8)
    assert g.use_bias_correction_kl is True
    assert trl.RLOOConfig(output_dir=str(tmp_path), **V.CPU_CONFIG).beta == 0.05
    d = trl.DPOConfig(output_dir=str(tmp_path), **V.CPU_CONFIG)
    assert (d.beta, d.loss_type) == (0.1, ["sigmoid"])


# --------------------------------------------------------------------------------------
# On a CPU: the one-line variant the page prints
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", PRINTED, ids=lambda var: var.name)
def test_every_printed_config_builds_on_a_cpu_with_the_pages_variant(variant, tmp_path):
    import torch

    module, _, name = V.TRL_CONFIG_CLASSES[variant.trainer].rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not torch.cuda.is_available():
            # as printed, a config asks for bf16 on a GPU: what the note is for
            with pytest.raises(ValueError, match="doesn't support bf16/gpu"):
                cls(output_dir=str(tmp_path), **variant.config)
        cfg = cls(output_dir=str(tmp_path), **variant.config, **V.CPU_CONFIG)
    assert cfg.use_cpu and not cfg.bf16 and cfg.device.type == "cpu"
    assert V.config_code(variant, cpu=True) == (
        V.config_code(variant)[:-1]
        + ", "
        + ", ".join(f"{k}={v!r}" for k, v in V.CPU_CONFIG.items())
        + ")"
    )


#: The DPO-family rows that set a field away from their TRL config class's default, and
#: why: the loss needs it (robust, EXO, the SFT mix) or the row is its paper's (SimPO,
#: PAPER_CLAIMS). Every other field a row prints is TRL's default, as chapter 10.5 says.
_AWAY_FROM_DEFAULT = {
    "robust DPO": {"label_smoothing"},
    "EXO": {"label_smoothing"},
    "DPO + SFT (RPO-style)": {"loss_weights"},
    "SimPO": {"beta", "simpo_gamma", "cpo_alpha"},
}


@pytest.mark.parametrize(
    "variant",
    V.DPO_VARIANTS + V.PREFERENCE_TRAINERS,
    ids=lambda v: v.name,
)
def test_dpo_family_rows_print_trls_defaults_unless_the_page_says_why(variant):
    import dataclasses

    pytest.importorskip("trl")
    module, _, name = V.TRL_CONFIG_CLASSES[variant.trainer].rpartition(".")
    fields = dataclasses.fields(getattr(importlib.import_module(module), name))
    default = {
        f.name: f.default_factory()
        if f.default is dataclasses.MISSING
        and f.default_factory is not dataclasses.MISSING
        else f.default
        for f in fields
    }
    away = {
        key
        for key, value in variant.config.items()
        if key != "loss_type" and default[key] != value
    }
    assert away == _AWAY_FROM_DEFAULT.get(variant.name, set()), variant.name
