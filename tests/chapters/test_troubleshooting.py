"""dpo_grpo.chapters.troubleshooting (the page "Troubleshooting a run, by symptom"):
each computed answer against TRL 1.16.0's own code (its functions where they can be
called alone, a real trainer where they cannot) and verl's metric names at the pinned
commit."""

import dataclasses
import inspect
import json
from importlib import resources
from types import SimpleNamespace

import numpy as np
import pytest
from testing_support import real_grpo_run

from dpo_grpo.chapters import trl_log_line
from dpo_grpo.chapters import troubleshooting as ts
from dpo_grpo.reference import examples as ex


# --------------------------------------------------------------------------------------
# Learning rate: Adam's step is set by the learning rate; LoRA moves less
# --------------------------------------------------------------------------------------


def test_adam_moves_a_weight_by_at_most_about_the_learning_rate_per_step():
    rows = ts.lora_learning_rate(learning_rates=(1e-6, 1e-4), steps=50)
    for r in rows:
        assert r["full_max_step"] <= 1.01 * r["lr"] * 50
        assert 0 < r["lora"] < r["full"] < 1
    assert rows[1]["lora"] > 10 * rows[0]["lora"]


def test_trls_default_learning_rate_is_one_in_a_million_for_all_three_trainers():
    trl = pytest.importorskip("trl")
    for config in (trl.GRPOConfig, trl.RLOOConfig, trl.DPOConfig):
        default = {f.name: f.default for f in dataclasses.fields(config)}
        assert default["learning_rate"] == 1e-6, config.__name__


# --------------------------------------------------------------------------------------
# RLOO's logged kl is a k1 mean; k3 is never negative
# --------------------------------------------------------------------------------------


def test_rloo_logs_the_token_mean_of_k1_which_can_be_negative():
    q = np.array(ex.KL_EXAMPLE["q"])
    p = 0.9 * q + 0.1 * np.array(ex.KL_EXAMPLE["p"])
    out = ts.rloo_logged_kl(p, q, tokens_per_batch=8, batches=20000)
    assert 0.3 < out["negative_share"] < 0.6
    assert out["k1"].mean() == pytest.approx(out["kl"], rel=0.15)
    assert (out["k3"] >= 0).all()
    with pytest.raises(ValueError, match="same length"):
        ts.rloo_logged_kl([0.5, 0.5], [0.2, 0.3, 0.5])


def test_rloo_trainer_logs_k1_against_the_reference():
    trl = pytest.importorskip("trl")
    source = inspect.getsource(trl.RLOOTrainer)
    assert "per_token_kl = old_per_token_logps - ref_per_token_logps" in source
    assert '["kl"].append((kl_stats[0] / kl_stats[1]' in source


# --------------------------------------------------------------------------------------
# vLLM: sequence weights spread with length; a temperature gap is systematic
# --------------------------------------------------------------------------------------


def test_sequence_weights_spread_as_the_square_root_of_the_length():
    rows = ts.engine_weight_spread(lengths=(100, 400, 1600), per_token_sd=0.02)
    sds = [r["log_weight_sd"] for r in rows]
    assert sds[1] / sds[0] == pytest.approx(2, rel=0.1)
    assert sds[2] / sds[1] == pytest.approx(2, rel=0.1)
    masked = [r["masked"] for r in rows]
    assert masked[0] == 0 < masked[2] and masked == sorted(masked)
    assert rows[2]["min"] == 0.0  # a masked completion is logged as a weight of 0


def test_a_temperature_of_one_matches_and_any_other_is_a_mismatch():
    assert ts.temperature_mismatch(1.0)["mean_token_diff"] == 0.0
    assert ts.temperature_mismatch(1.0)["masked"] == 0.0
    for t in (0.7, 1.2):
        out = ts.temperature_mismatch(t)
        assert out["mean_token_diff"] > 0 and out["masked"] > 0.5


def test_trl_needs_the_samplers_log_probs_after_temperature():
    trl = pytest.importorskip("trl")
    source = inspect.getsource(trl.GRPOTrainer.__init__)
    assert 'logprobs_mode != "processed_logprobs"' in source
    from trl.generation import vllm_generation

    assert 'logprobs_mode="processed_logprobs"' in inspect.getsource(vllm_generation)


# --------------------------------------------------------------------------------------
# Conversational datasets hand the reward functions lists of messages
# --------------------------------------------------------------------------------------


def test_reward_functions_receive_messages_on_a_conversational_dataset():
    trl = pytest.importorskip("trl")
    source = inspect.getsource(trl.GRPOTrainer)
    assert (
        'completions = [[{"role": "assistant", "content": content}] for content in '
        "contents]"
    ) in source


# --------------------------------------------------------------------------------------
# Evaluation groups: the same check as GRPOConfig
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "batch, generations, eval_generations",
    [(4, 8, None), (4, 8, 4), (8, 8, None), (6, 4, None), (6, 4, 3), (5, 4, 5)],
)
def test_eval_groups_fit_accepts_and_refuses_what_grpo_config_does(
    tmp_path, batch, generations, eval_generations
):
    trl = pytest.importorskip("trl")
    options = dict(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        report_to="none",
        per_device_train_batch_size=generations,
        num_generations=generations,
        per_device_eval_batch_size=batch,
        num_generations_eval=eval_generations,
        eval_strategy="steps",
        do_eval=True,
    )
    try:
        trl.GRPOConfig(**options)
        trl_accepts = True
    except ValueError:
        trl_accepts = False
    try:
        ts.eval_groups_fit(batch, generations, num_generations_eval=eval_generations)
        ours = True
    except ValueError:
        ours = False
    assert ours == trl_accepts


# --------------------------------------------------------------------------------------
# Entropy: the adaptive coefficient and the top-entropy mask, as TRL computes them
# --------------------------------------------------------------------------------------


def test_high_entropy_mask_is_trls_get_high_entropy_mask():
    trl = pytest.importorskip("trl")
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    # float32 values, as a model's entropies are (TRL takes the quantile in float32)
    h = rng.gamma(0.5, 1.0, size=(5, 9)).astype(np.float32).astype(float)
    mask = (rng.random((5, 9)) < 0.8).astype(float)
    one_process = SimpleNamespace(
        accelerator=SimpleNamespace(
            pad_across_processes=lambda x, dim, pad_index: x, gather=lambda x: x
        )
    )
    for rho in (1.0, 0.5, 0.2, 0.0):
        theirs = trl.GRPOTrainer.get_high_entropy_mask(
            one_process, torch.tensor(h), torch.tensor(mask), 1 - rho
        ).numpy()
        assert (ts.high_entropy_mask(h, mask, rho) == theirs).all(), rho


@pytest.fixture(scope="module")
def tiny_model_dir(checkpoint):
    pytest.importorskip("trl")
    return checkpoint


@pytest.mark.parametrize("target", [100.0, 0.0])
def test_adaptive_entropy_coef_is_what_a_real_grpo_trainer_logs(
    tiny_model_dir, tmp_path, target
):
    trainer = real_grpo_run(
        *tiny_model_dir,
        tmp_path,
        max_steps=3,
        use_adaptive_entropy=True,
        entropy_coef=0.01,
        entropy_target=target,
    )
    lines = [line for line in trainer.state.log_history if "entropy_coef" in line]
    assert len(lines) == 3
    ours = ts.adaptive_entropy_coef(
        [line["entropy"] for line in lines], entropy_coef=0.01, entropy_target=target
    )
    logged = [line["entropy_coef"] for line in lines]
    assert ours["logged"] == pytest.approx(logged, abs=1e-12)
    # the loss uses the coefficient of the step before, gated on its entropy
    for line, coef in zip(lines, ours["applied"]):
        assert line["loss"] == pytest.approx(
            line["policy_loss"] - coef * line["entropy"], rel=1e-5, abs=1e-7
        )


def test_adaptive_entropy_coef_stays_within_its_bounds():
    out = ts.adaptive_entropy_coef(
        np.full(10, 0.1), entropy_coef=0.0, entropy_coef_delta=0.3, entropy_coef_max=0.5
    )
    assert out["logged"].max() == 0.5 and out["applied"][0] == 0.0


# --------------------------------------------------------------------------------------
# DPO's max_length: what TRL's collator keeps
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prompt, chosen, rejected, shared, max_length",
    [
        (10, 8, 7, 5, None),
        (10, 8, 7, 5, 14),
        (10, 8, 7, 5, 15),
        (10, 8, 7, 5, 16),
        (3, 6, 6, 6, 20),
        (12, 8, 7, 5, 11),
    ],
)
def test_dpo_truncation_is_what_trls_collator_keeps(
    prompt, chosen, rejected, shared, max_length
):
    pytest.importorskip("trl")
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    opening = list(range(100, 100 + shared))
    example = {
        "prompt_ids": list(range(1, prompt + 1)),
        "chosen_ids": opening + list(range(200, 200 + chosen - shared)),
        "rejected_ids": opening + list(range(300, 300 + rejected - shared)),
    }
    batch = DataCollatorForPreference(pad_token_id=0, max_length=max_length)([example])
    ids, completion = batch["input_ids"].numpy(), batch["completion_mask"].numpy()
    kept = [ids[row][completion[row] == 1].tolist() for row in (0, 1)]
    ours = ts.dpo_truncation(prompt, chosen, rejected, shared, max_length)
    assert [ours["chosen"], ours["rejected"]] == [len(k) for k in kept]
    assert ours["difference_kept"] == (kept[0] != kept[1])


def test_dpo_truncation_names_a_bad_argument():
    with pytest.raises(ValueError, match="first_difference"):
        ts.dpo_truncation(10, 5, 6, 7, None)


# --------------------------------------------------------------------------------------
# verl's metric names at the pinned commit, beside TRL's
# --------------------------------------------------------------------------------------


def _verl_fixture(name):
    data = resources.files("dpo_grpo.data") / "verl_fixtures" / name
    return json.loads(data.read_text())


def test_verl_table_uses_only_names_verl_logs_at_the_pinned_commit():
    keys = _verl_fixture("verl_metric_keys.json")
    config = _verl_fixture("verl_ppo_trainer_keys.json")
    assert keys["verl_commit"] == config["verl_commit"]
    verl_names = {row[0] for row in ts.VERL_METRICS}
    assert verl_names <= set(keys["keys"]), verl_names - set(keys["keys"])
    trl_names = {row[1] for row in ts.VERL_METRICS} - {""}
    assert trl_names <= set(trl_log_line.GRPO_KEY_WHEN), trl_names
