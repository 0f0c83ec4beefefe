"""dpo_grpo.chapters.trl_log_line: one GRPO step's log line (the page "Reading a TRL
run"), every metric against a second computation."""

import re
from pathlib import Path

import numpy as np
import pytest
from testing_support import real_grpo_run

from dpo_grpo.chapters import trl_log_line as q


def test_log_line_every_metric_has_a_meaning_and_agrees_with_its_second_computation():
    out = q.log_line()
    m = out["metrics"]
    assert list(m) == list(q.LOG_LINE_MEANINGS)
    for key, value in out["checks"].items():
        assert m[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    inp = out["inputs"]
    assert m["completions/mean_length"] == inp["mask"].sum() / len(inp["lengths"])
    assert 0 < m["completions/clipped_ratio"] < 1 and 0 < m["frac_reward_zero_std"] < 1
    assert m["clip_ratio/low_mean"] > 0 and m["clip_ratio/high_mean"] > 0
    assert m["clip_ratio/region_mean"] == pytest.approx(
        m["clip_ratio/low_mean"] + m["clip_ratio/high_mean"]
    )
    assert "kl" not in q.log_line(beta=0.0)["metrics"]


def test_log_line_loss_meaning_is_the_logging_window_not_the_last_micro_batch():
    # transformers 5.24: logs["loss"] = sum of micro-batch losses / optimiser steps
    assert "last micro-batch" not in q.LOG_LINE_MEANINGS["loss"]
    assert "since the last log" in q.LOG_LINE_MEANINGS["loss"]


def test_vllm_log_line_on_policy_loss_is_not_zero():
    plain = q.log_line(update_scale=0.0, beta=0.0, loss_type="grpo")
    vllm = q.log_line(update_scale=0.0, beta=0.0, loss_type="grpo", use_vllm=True)
    # ratio 1 everywhere: nothing clipped, and without vLLM the loss cancels
    assert vllm["metrics"]["clip_ratio/region_mean"] == 0.0
    assert abs(plain["metrics"]["loss"]) < 1e-12
    assert abs(vllm["metrics"]["loss"]) > 1e-5
    # by hand: -(1/B) sum_i IS_i A_i at ratio 1 for loss_type 'grpo'
    w = vllm["inputs"]["importance_sampling_ratio"][:, 0]
    a = vllm["inputs"]["advantages"]
    assert vllm["metrics"]["loss"] == pytest.approx(-(w * a).mean(), abs=1e-12)
    # TRL's sampling/* metrics appear only with vLLM
    assert "sampling/importance_sampling_ratio/mean" in vllm["metrics"]
    assert not any(k.startswith("sampling/") for k in plain["metrics"])
    d = np.abs(vllm["inputs"]["old_logps"] - vllm["inputs"]["sampler_logps"])
    m = vllm["inputs"]["mask"] > 0
    assert vllm["metrics"]["sampling/sampling_logp_difference/max"] == d[m].max()
    # a sampler that agrees with the trainer changes nothing
    same = q.log_line(update_scale=0.0, beta=0.04, use_vllm=True, sampler_noise=0.0)
    ref = q.log_line(update_scale=0.0, beta=0.04)
    assert same["metrics"]["loss"] == pytest.approx(ref["metrics"]["loss"], abs=1e-15)
    assert same["metrics"]["grad_norm"] == pytest.approx(ref["metrics"]["grad_norm"])


# --------------------------------------------------------------------------------------
# The page's step through TRL 1.16.0's own GRPOTrainer._compute_loss
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model_dir(checkpoint):
    """The tiny random Qwen2 on disk (tests/conftest.py), for the tests that need
    TRL."""
    pytest.importorskip("trl")
    return checkpoint


def _zero_reward(prompts, completions, **kwargs):
    return [0.0] * len(completions)


def trl_logged(step, path, tok, tmp_path, **options):
    """TRL's loss and logged metrics for ``step`` (a :func:`log_line` result): a real
    ``GRPOTrainer`` built from a ``GRPOConfig`` with the step's options (TRL's defaults
    for the rest), whose ``_get_per_token_logps_and_entropies`` returns the step's new
    log-probs and entropies instead of running the model (the fixtures' method,
    scripts/make_trl_fixtures.py), computed in float64 from the step's logits as a
    leaf: ``logged["grad_norm"]`` is the norm of the gradient TRL's loss sends to
    those logits (the step's parameters)."""
    import warnings

    import torch
    import trl
    from datasets import Dataset

    c, inp = step["config"], step["inputs"]
    n, width = inp["new_logps"].shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = trl.GRPOConfig(
            output_dir=str(tmp_path),
            report_to="none",
            use_cpu=True,
            bf16=False,
            save_strategy="no",
            logging_strategy="no",
            per_device_train_batch_size=n,
            num_generations=c["num_generations"],
            max_completion_length=c["max_completion_length"],
            num_iterations=c["num_iterations"],
            beta=c["beta"],
            epsilon=c["epsilon"],
            **options,
        )
        trainer = trl.GRPOTrainer(
            model=str(path),
            reward_funcs=[_zero_reward],
            args=args,
            train_dataset=Dataset.from_dict({"prompt": ["1+1="] * n}),
            processing_class=tok,
        )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    logits = torch.tensor(inp["new_logits"], dtype=torch.float64, requires_grad=True)
    full = torch.log_softmax(logits, dim=-1)
    tokens = torch.tensor(inp["tokens"])[..., None]
    new = full.gather(-1, tokens)[..., 0]
    entropies = -(full.exp() * full).sum(-1)

    def fake(model, input_ids, attention_mask, logits_to_keep, *a, **kw):
        assert logits_to_keep == width and input_ids.shape[0] == n
        return new, entropies, None

    trainer._get_per_token_logps_and_entropies = fake
    mask = torch.tensor(inp["mask"], dtype=torch.long)
    inputs = {
        "prompt_ids": torch.full((n, 2), 5, dtype=torch.long),
        "prompt_mask": torch.ones(n, 2, dtype=torch.long),
        "completion_ids": torch.where(mask.bool(), 7, 0),
        "completion_mask": mask,
        "advantages": torch.tensor(inp["advantages"], dtype=torch.float64),
        "num_items_in_batch": torch.tensor(int(inp["mask"].sum())),
        "old_per_token_logps": torch.tensor(inp["old_logps"], dtype=torch.float64),
        "ref_per_token_logps": torch.tensor(inp["ref_logps"], dtype=torch.float64),
    }
    loss = trainer._compute_loss(trainer.model, inputs)
    logged = {k: v[-1] for k, v in trainer._metrics["train"].items()}
    loss.backward()
    logged["grad_norm"] = float(logits.grad.norm())
    return float(loss.detach()), logged, trainer


@pytest.mark.parametrize("bias_correction", [None, True, False], ids=str)
def test_the_pages_step_is_what_trl_computes_and_logs(
    bias_correction, tiny_model_dir, tmp_path
):
    # None: TRL's default (use_bias_correction_kl=True), as the page's step runs
    import trl

    path, tok = tiny_model_dir
    options = (
        {} if bias_correction is None else {"use_bias_correction_kl": bias_correction}
    )
    step = q.log_line(**options)
    loss, logged, trainer = trl_logged(step, path, tok, tmp_path, **options)
    assert trainer.args.use_bias_correction_kl is (bias_correction is not False)
    assert trainer.loss_type == step["config"]["loss_type"] == "dapo"
    # one optimiser step without accumulation: the Trainer logs this loss as is
    # (GRPOTrainer scales for accumulation itself, so training_step does not divide)
    assert trl.GRPOTrainer.loss_is_scaled_for_ga is True
    m = step["metrics"]
    assert m["loss"] == pytest.approx(loss, rel=1e-12, abs=1e-15)
    keys = ("kl", "entropy", "clip_ratio/low_mean", "clip_ratio/high_mean", "grad_norm")
    for key in keys:
        assert m[key] == pytest.approx(logged[key], rel=1e-6, abs=1e-12), key
    # the page's formula for the logged kl, by hand, under this setting
    assert step["checks"]["kl"] == pytest.approx(logged["kl"], rel=1e-6)


def test_the_entropy_bonus_is_what_trl_computes_and_logs(tiny_model_dir, tmp_path):
    # loss = policy_loss - entropy_coef * entropy; TRL logs policy_loss and
    # entropy_coef only when the bonus is on
    path, tok = tiny_model_dir
    step = q.log_line(entropy_coef=0.01)
    m = step["metrics"]
    assert m["loss"] == pytest.approx(m["policy_loss"] - 0.01 * m["entropy"])
    assert m["policy_loss"] == q.log_line()["metrics"]["loss"]
    loss, logged, _ = trl_logged(step, path, tok, tmp_path, entropy_coef=0.01)
    assert m["loss"] == pytest.approx(loss, rel=1e-12, abs=1e-15)
    for key in ("policy_loss", "entropy_coef", "entropy", "kl", "grad_norm"):
        assert m[key] == pytest.approx(logged[key], rel=1e-6, abs=1e-12), key
    assert "policy_loss" not in q.log_line()["metrics"]
    # the option is checked like the others
    with pytest.raises(TypeError):
        q.log_line(entropy_coef="0.01")


# --------------------------------------------------------------------------------------
# Every key a GRPOTrainer logs: the page's table against TRL's source and a real run
# --------------------------------------------------------------------------------------


#: The keys of ``q.GRPO_KEY_WHEN`` that transformers 5.24's ``Trainer`` adds (every
#: other key is one TRL appends to ``self._metrics``); a DPOTrainer's lines have them.
TRAINER_KEYS = frozenset(
    {
        "loss",
        "grad_norm",
        "learning_rate",
        "epoch",
        "num_input_tokens_seen",
        "train_tokens_per_second",
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "total_flos",
        "train_loss",
    }
)


def metric_keys_in_source(module) -> set:
    """The keys a TRL trainer module's source appends to ``self._metrics[...]``
    (``trl.trainer.grpo_trainer``, ``dpo_trainer``): literals; f-strings with ``<f>``
    for the reward function's name; ``<name>`` for a variable (a reward function's
    ``log_metric``). A TRL upgrade that adds a key shows here."""
    text = Path(module.__file__).read_text()
    keys = set()
    pattern = r'_metrics\[(?:mode|"train"|"eval")\]\[(f?"[^"]*"|\w+)\]'
    for key in re.findall(pattern, text):
        if key.startswith('f"'):
            keys.add(re.sub(r"\{[^}]*\}", "<f>", key[2:-1]))
        elif key.startswith('"'):
            keys.add(key[1:-1])
        else:
            keys.add(f"<{key}>")
    return keys


def test_the_pages_table_lists_every_key_trls_source_logs():
    from trl.trainer import grpo_trainer

    keys = [row[0] for row in q.grpo_key_rows(q.log_line()["metrics"])]
    table = {q.key_pattern(k) for k in keys}
    assert len(keys) == len(set(keys)) and table == set(q.GRPO_KEY_WHEN)
    source = metric_keys_in_source(grpo_trainer)
    assert {"policy_loss", "entropy_coef", "aux_loss", "tools/call_frequency"} <= source
    # exactly: TRL's keys plus the Trainer's, nothing the source does not log
    assert set(table) - TRAINER_KEYS == source, set(table) ^ (source | TRAINER_KEYS)
    meanings = {**q.LOG_LINE_MEANINGS, **q.MORE_MEANINGS}
    assert set(meanings) >= set(table) - {"rewards/<f>/mean", "rewards/<f>/std"}


def test_the_dpo_table_lists_every_key_trls_source_logs():
    from trl.trainer import dpo_trainer

    from dpo_grpo.chapters import trl_dpo_log as d

    source = metric_keys_in_source(dpo_trainer)
    assert set(d.DPO_LOG_MEANINGS) == set(d.DPO_KEY_WHEN)
    assert set(d.DPO_LOG_MEANINGS) - TRAINER_KEYS == source, set(d.DPO_LOG_MEANINGS) ^ (
        source | TRAINER_KEYS
    )
    # train()'s last line has the Trainer's keys, explained in the GRPO table
    assert TRAINER_KEYS <= set(q.GRPO_KEY_WHEN)


def test_a_real_grpo_step_logs_exactly_the_tables_every_line_keys(
    tiny_model_dir, tmp_path
):
    line, last = real_grpo_run(*tiny_model_dir, tmp_path, beta=0.04).state.log_history
    logged = {q.key_pattern(k) for k in line} - {"step"}
    when = q.GRPO_KEY_WHEN
    every = {k for k, w in when.items() if w.startswith("every line")}
    # beta > 0 adds kl; nothing else is logged on a default line
    assert logged == every | {"kl"}, logged ^ (every | {"kl"})
    assert set(last) - {"step"} == {k for k, w in when.items() if "last line" in w}
    # the page's step has the same keys, less the Trainer's and the timing
    assert set(q.log_line()["metrics"]) == set(line) - {
        "step",
        "learning_rate",
        "epoch",
        "step_time",
    }


def test_options_add_the_keys_the_table_names(tiny_model_dir, tmp_path):
    # the entropy bonus and the Trainer's token counter, in a real step
    line, last = real_grpo_run(
        *tiny_model_dir,
        tmp_path,
        entropy_coef=0.01,
        include_num_input_tokens_seen="all",
    ).state.log_history
    when = q.GRPO_KEY_WHEN
    every = {k for k, w in when.items() if w.startswith("every line")}
    tokens = {k for k, w in when.items() if "include_num_input_tokens_seen" in w}
    added = {q.key_pattern(k) for k in line} - {"step"} - every
    assert added == {"policy_loss", "entropy_coef"} | tokens, added
    assert line["loss"] == pytest.approx(
        line["policy_loss"] - 0.01 * line["entropy"], rel=1e-5
    )
    # the table's meanings: for GRPO the counter is num_tokens, total_flos is 0
    assert line["num_input_tokens_seen"] == line["num_tokens"]
    assert last["total_flos"] == 0.0 and "num_input_tokens_seen" in last
