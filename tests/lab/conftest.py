"""Fixtures of the lab's tests: the CPU preset and a very small run of it."""

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from dpo_grpo.lab import LabConfig  # noqa: E402


@pytest.fixture(scope="session")
def cpu_cfg():
    return LabConfig.preset("cpu", device="cpu")


@pytest.fixture(scope="session")
def tiny_cfg(cpu_cfg):
    """A very small run for determinism and checkpoint tests (a few seconds)."""
    return dataclasses.replace(
        cpu_cfg,
        sft_steps=30,
        sft_batch_size=64,
        grpo_steps=6,
        prompts_per_step=4,
        num_generations=4,
        dpo_steps=6,
        dpo_prompts=64,
        dpo_batch_size=8,
        eval_every=2,
        offline_eval_every=None,
        eval_samples=0,
    )


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    yield
    # run_lab restores it too; this guards the other test modules
    torch.set_num_threads(before)
