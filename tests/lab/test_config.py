"""Tests of dpo_grpo.lab.config: the checks of LabConfig and the runtime preset."""

import dataclasses
from pathlib import Path

import nbformat
import pytest

torch = pytest.importorskip("torch")

from dpo_grpo import lab, torch_ops  # noqa: E402


def test_the_lab_page_runs_the_gpu_preset_where_cuda_is_usable():
    from unittest import mock

    with mock.patch("torch.cuda.is_available", return_value=True):
        assert lab.runtime_preset() == "gpu"
        # the page's device: its runs go to the GPU
        assert torch_ops.default_device().type == "cuda"
    with mock.patch("torch.cuda.is_available", return_value=False):
        assert (
            lab.runtime_preset() == "cpu" and torch_ops.default_device().type == "cpu"
        )
    notebook = Path(__file__).resolve().parents[2] / "book" / "lab_tiny_grpo.ipynb"
    code = "".join(c.source for c in nbformat.read(notebook, as_version=4).cells)
    code = "".join(code.split())  # the formatter may wrap the calls
    assert "CONFIG=lab.runtime_preset()" in code
    assert "LabConfig.preset(CONFIG,device=str(device))" in code


# --- configuration --------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("num_generations", 1),
        ("epsilon", 1.5),
        ("epsilon", 0.0),
        ("beta", -0.1),
        ("loss_type", "ppo"),
        ("importance_sampling_level", "word"),
        ("scale_rewards", "std"),
        ("num_iterations", 0),
        ("grpo_lr", 0.0),
        ("temperature", 0.0),
        ("max_completion_length", 2),
        ("context_length", 8),
        ("n_heads", 3),
        ("reward", "vibes"),
        ("dpo_beta", 0.0),
        ("dpo_loss_type", "ipo"),
        ("dpo_label_smoothing", -0.1),
        ("delta", 1.0),
        ("n_heldout", 500),
        ("sft_steps", -1),
        ("eval_every", 0),
        ("cpu_threads", 0),
        ("prompts_per_step", 2.5),
        ("use_bias_correction_kl", "yes"),
        ("device", 3),
        ("ref_mixup_alpha", 1.5),
        ("offline_eval_every", 0),
        ("eval_samples", -1),
    ],
)
def test_invalid_config_raises_value_error_naming_the_field(field, value, cpu_cfg):
    with pytest.raises(ValueError, match=rf"LabConfig\.{field}\b"):
        dataclasses.replace(cpu_cfg, **{field: value})


@pytest.mark.parametrize(
    "field, value",
    [
        ("n_terms", 5),
        ("sft_carry_noise", 1.5),
        ("sft_target_pass_rate", 1.5),
        ("ref_sync_steps", 0),
        ("epsilon_high", -0.1),
    ],
)
def test_range_limits_name_the_field(cpu_cfg, field, value):
    with pytest.raises(ValueError, match=rf"LabConfig\.{field}\b"):
        dataclasses.replace(cpu_cfg, **{field: value})


def test_one_base_holds_the_fields_the_lab_and_the_hf_run_share():
    pytest.importorskip("transformers")
    from dpo_grpo.lab import hf

    base = {f.name for f in dataclasses.fields(lab.GRPOTaskConfig)}
    assert {"n_terms", "grpo_lr", "num_generations", "epsilon", "beta"} <= base
    for cls in (lab.LabConfig, hf.HFLabConfig):
        assert issubclass(cls, lab.GRPOTaskConfig)
        assert base <= {f.name for f in dataclasses.fields(cls)}
    # the base's checks, with the subclass's name in the message
    with pytest.raises(ValueError, match=r"HFLabConfig\.n_terms\b"):
        hf.HFLabConfig(n_terms=5)
    with pytest.raises(ValueError, match=r"HFLabConfig\.loss_type\b"):
        hf.HFLabConfig(loss_type="ppo")


@pytest.mark.parametrize(
    "loss_type, smoothing, refused",
    [
        ("robust", 0.5, True),  # TRL: [0, 0.5) for robust
        ("robust", 0.2, False),
        ("exo_pair", 0.0, True),  # TRL refuses exo_pair without smoothing
        ("exo_pair", 0.1, False),
        ("aot", 0.2, False),  # TRL reads it for aot and aot_unpaired too
        ("aot_unpaired", 0.2, False),
        ("sigmoid", 0.1, False),  # TRL accepts it (and ignores it)
    ],
)
def test_label_smoothing_is_refused_where_trl_refuses_it(
    loss_type, smoothing, refused, cpu_cfg
):
    """``dpo_label_smoothing`` follows TRL 1.16.0's DPOTrainer: it refuses what TRL
    refuses and takes what TRL takes."""
    change = {"dpo_loss_type": loss_type, "dpo_label_smoothing": smoothing}
    if refused:
        with pytest.raises(ValueError, match=r"LabConfig\.dpo_label_smoothing\b"):
            dataclasses.replace(cpu_cfg, **change)
    else:
        assert dataclasses.replace(cpu_cfg, **change).dpo_label_smoothing == smoothing
