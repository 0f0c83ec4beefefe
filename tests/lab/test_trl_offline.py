"""Tests of dpo_grpo.lab.trl_offline: TRL 1.16.0's DPOTrainer (DPO + NLL) and
SFTTrainer (RFT) run a few CPU steps on the tiny random Qwen2 model (built here, no
download), and the loss each logs at every step equals this package's recomputation
on the same tokens."""

import math

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from dpo_grpo.lab import LabConfig, hf, trl_offline, trl_scale

PAIRS = {
    "prompts": ["3+5=", "7+8=", "1+2=", "9+9="],
    "chosen": ["8", "15", "3", "18"],
    "rejected": ["9", "5", "4", "8"],
}
# the whole set in each batch; a weight of 0.5 so that a dropped weight shows
CFG = LabConfig.preset(
    "cpu",
    dpo_steps=3,
    dpo_batch_size=4,
    dpo_lr=1e-2,
    warmup_steps=0,
    dpo_sft_weight=0.5,
)
RUN = {"use_cpu": True, "bf16": False, "disable_tqdm": True, "seed": 0}


def _close(rows, rel=1e-5):
    for i, row in enumerate(rows):
        for name, (theirs, ours) in row.items():
            assert math.isclose(theirs, ours, rel_tol=rel, abs_tol=1e-6), (
                i,
                name,
                theirs,
                ours,
            )


def test_dpo_nll_trainer_loss_equals_the_packages_recomputation(checkpoint, tmp_path):
    from transformers import AutoModelForCausalLM

    path, tok = checkpoint
    check = trl_offline.OfflineLossCheck(
        CFG, "dpo+nll", AutoModelForCausalLM.from_pretrained(path)
    )
    args = trl.DPOConfig(**trl_scale.dpo_args(CFG, tmp_path, "dpo+nll", **RUN))
    assert args.loss_type == ["sigmoid", "sft"] and args.loss_weights == [1.0, 0.5]
    trainer = trl.DPOTrainer(
        model=str(path),
        args=args,
        train_dataset=trl_scale.preference_dataset(
            hf.HFLabConfig.preset("tiny-random"), PAIRS
        ),
        processing_class=tok,
    )
    check.trainer = trainer
    trainer.add_callback(check.callback())
    trainer.train()
    rows = check.compare(trainer.state.log_history)
    assert len(rows) == 3 and all(set(r) == {"loss", "rewards/margins"} for r in rows)
    _close(rows)
    # after the first update the DPO term has left log 2: the preference part is
    # compared, not only the NLL
    assert rows[0]["rewards/margins"] == (0.0, 0.0)
    later = check.steps[-1]
    assert later["rewards/margins"] > 1e-3 and later["dpo"] < math.log(2) - 1e-4
    assert later["loss"] == pytest.approx(later["dpo"] + 0.5 * later["nll"])


def test_rft_through_sft_trainer_equals_the_packages_nll(checkpoint, tmp_path):
    path, tok = checkpoint
    hcfg = hf.HFLabConfig.preset("tiny-random")
    check = trl_offline.OfflineLossCheck(CFG, "rft")
    args = trl.SFTConfig(**trl_offline.rft_args(CFG, tmp_path, **RUN))
    trainer = trl.SFTTrainer(
        model=str(path),
        args=args,
        train_dataset=trl_offline.rft_dataset(hcfg, PAIRS),
        processing_class=tok,
    )
    check.trainer = trainer
    trainer.add_callback(check.callback())
    trainer.train()
    rows = check.compare(trainer.state.log_history)
    assert len(rows) == 3 and all(set(r) == {"loss"} for r in rows)
    _close(rows)
    assert rows[-1]["loss"][0] < rows[0]["loss"][0]  # it learns
    # the tokens without loss are the lab's chat prompt, exactly
    row = trainer.train_dataset[0]
    start = next(i for i, x in enumerate(row["labels"]) if x != -100)
    ours, _ = hf.encode_chat_prompts(tok, PAIRS["prompts"][:1], hcfg)
    assert row["input_ids"][:start] == ours[0].tolist()
    assert tok.decode(row["input_ids"][start:]).startswith(PAIRS["chosen"][0])


def test_offline_check_rejects_bad_input(checkpoint, tmp_path):
    path, tok = checkpoint
    with pytest.raises(ValueError, match="algorithm"):
        trl_offline.OfflineLossCheck(CFG, "ppo")
    with pytest.raises(TypeError, match="ref_model"):
        trl_offline.OfflineLossCheck(CFG, "dpo")
    with pytest.raises(TypeError, match="cfg"):
        trl_offline.rft_args("cfg", tmp_path)
    with pytest.raises(ValueError, match="pairs"):
        trl_offline.rft_dataset(CFG, {"prompts": ["1+2="], "chosen": []})
    check = trl_offline.OfflineLossCheck(CFG, "rft")
    args = trl.SFTConfig(
        **trl_offline.rft_args(CFG, tmp_path, per_device_train_batch_size=2, **RUN)
    )
    check.trainer = trl.SFTTrainer(
        model=str(path),
        args=args,
        train_dataset=trl_offline.rft_dataset(CFG, PAIRS),
        processing_class=tok,
    )
    with pytest.raises(ValueError, match="per_device_train_batch_size"):
        check.loss()
