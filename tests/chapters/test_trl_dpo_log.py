"""dpo_grpo.chapters.trl_dpo_log: every key of a TRL 1.16.0 DPO log line, computed by
the book's formulas and compared with what a real ``trl.DPOTrainer`` logs for the same
batch on a tiny random Qwen2 (no download)."""

import math

import numpy as np
import pytest

from dpo_grpo.chapters import trl_dpo_log as d
from dpo_grpo.chapters import trl_log_line as g


def test_the_pages_pair_batch_metrics_by_hand():
    b = d.pair_batch()
    m = d.dpo_log_metrics(
        b["policy_logits"],
        b["ref_logits"],
        b["tokens"],
        b["mask"],
        beta=0.1,
        num_tokens=b["num_tokens"],
    )
    assert list(m) == [k for k in d.DPO_LOG_MEANINGS if k in m]
    assert m["rewards/margins"] == pytest.approx(
        m["rewards/chosen"] - m["rewards/rejected"]
    )
    assert 0 < m["rewards/accuracies"] < 1 and m["logps/chosen"] < 0
    # at the start the policy is the reference: rewards 0, loss ln 2, no tie counted
    start = d.dpo_log_metrics(
        b["policy_logits"], b["policy_logits"], b["tokens"], b["mask"]
    )
    assert start["loss"] == pytest.approx(math.log(2))
    assert start["rewards/accuracies"] == 0.0 and start["rewards/margins"] == 0.0
    with pytest.raises(ValueError, match="even"):
        d.dpo_log_metrics(
            b["policy_logits"][:5], b["ref_logits"][:5], b["tokens"][:5], b["mask"][:5]
        )


PAIRS = {
    "prompt": ["3+5=", "7+8=", "1+2=", "9+9="],
    "chosen": ["8", "15", "3", "18"],
    "rejected": ["9", "5", "41", "8"],
}


def test_a_real_dpo_step_logs_what_the_books_formulas_compute(tmp_path):
    torch = pytest.importorskip("torch")
    trl = pytest.importorskip("trl")
    import warnings

    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from dpo_grpo.lab import hf

    model, tok = hf.tiny_random_model(0)
    path = tmp_path / "policy"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    ref, _ = hf.tiny_random_model(1)  # a reference other than the policy
    n = len(PAIRS["prompt"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = trl.DPOConfig(
            output_dir=str(tmp_path / "out"),
            report_to="none",
            use_cpu=True,
            bf16=False,
            save_strategy="no",
            logging_steps=1,
            max_steps=1,
            per_device_train_batch_size=n,
            beta=0.1,
            learning_rate=1e-3,
            seed=0,
            disable_tqdm=True,
        )
        trainer = trl.DPOTrainer(
            model=str(path),
            ref_model=ref,
            args=args,
            train_dataset=Dataset.from_dict(PAIRS),
            processing_class=tok,
        )
    # the batch as TRL's collator pads it (all pairs: every metric is a mean over
    # the batch, so the loader's order does not matter); logits before the update
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(n)])
    policy = AutoModelForCausalLM.from_pretrained(path).eval()
    with torch.no_grad():
        z, zr = (
            m(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).logits[:, :-1]
            for m in (policy, ref.eval())
        )
    ours = d.dpo_log_metrics(
        z.double().numpy(),
        zr.double().numpy(),
        batch["input_ids"][:, 1:].numpy(),
        batch["completion_mask"][:, 1:].numpy(),
        beta=0.1,
        num_tokens=float(batch["attention_mask"].sum()),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    line, last = trainer.state.log_history[0], trainer.state.log_history[-1]
    every = {k for k, w in d.DPO_KEY_WHEN.items() if w.startswith("every line")}
    assert set(line) - {"step"} == every, set(line) ^ every
    assert set(last) - {"step"} == {
        k for k, w in g.GRPO_KEY_WHEN.items() if "last line" in w
    }
    assert set(ours) == every - {"grad_norm", "learning_rate", "epoch"}
    for key, value in ours.items():
        assert value == pytest.approx(line[key], rel=1e-5, abs=1e-6), key
    assert 0 < line["rewards/accuracies"] < 1 or line["rewards/margins"] != 0
    assert np.isfinite(line["grad_norm"]) and line["grad_norm"] > 0
