"""Tests of dpo_grpo.lab.model: the verifier, the task split, log-probs, masks and the
sampler."""

import pytest

torch = pytest.importorskip("torch")

from dpo_grpo import torch_ops  # noqa: E402
from dpo_grpo.lab.model import (  # noqa: E402
    BOS,
    EOS,
    PAD,
    VOCAB,
    TinyTransformer,
    completion_logps,
    encode_completions,
    encode_prompts,
    generate,
    verify,
)
from dpo_grpo.lab.task import AdditionTask  # noqa: E402


def _bruteforce_logps(model, prompt, completion_ids):
    """log p(token t | BOS prompt completion[:t]) from a full forward of each unpadded
    prefix, one at a time."""
    prefix = [BOS] + VOCAB.encode(prompt)
    out = []
    for tok in completion_ids:
        logits = model(torch.tensor([prefix]))[0, -1]
        out.append(torch.log_softmax(logits.double(), -1)[tok].item())
        prefix.append(tok)
        if tok == EOS:
            break
    return out


# --- the verifier and the task --------------------------------------------------------


@pytest.mark.parametrize(
    "prompt, completion, expected",
    [
        ("3+5+2=", "10", True),
        ("3+5+2=", "010", False),  # leading zero
        ("3+5+2=", "10 ", False),
        ("3+5+2=", "1", False),
        ("3+5+2=", "", False),
        ("3+5+2=", "+10", False),
        ("0+0+0=", "0", True),
        ("9+9+9=", "27", True),
        ("12+34=", "46", True),
        ("12+34=", "47", False),
        ("99+99=", "198", True),
    ],
)
def test_verifier_hand_made_cases(prompt, completion, expected):
    assert verify(prompt, completion) is expected


@pytest.mark.parametrize("prompt", ["3+5+2", "3*5=", "a+b=", "7=", "+3=", "3++4="])
def test_verifier_rejects_malformed_prompts(prompt):
    with pytest.raises(ValueError):
        verify(prompt, "8")


def test_heldout_prompts_are_disjoint_from_training_prompts_in_every_order():
    task = AdditionTask(n_terms=3, n_digits=1, n_heldout=60, seed=1234)
    train = {tuple(sorted(t)) for t in task.train_problems}
    held = {tuple(sorted(t)) for t in task.heldout_problems}
    assert len(held) == 60 and not (train & held)
    assert len(task.train_problems) + len(task.heldout_problems) == 1000
    # seeded, reproducible
    assert AdditionTask(seed=1234).heldout_prompts() == task.heldout_prompts()


# --- log-probs and masks --------------------------------------------------------------


def test_logps_equal_bruteforce_per_prefix_forward():
    torch.manual_seed(0)
    model = TinyTransformer(
        len(VOCAB), d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=16
    ).double()
    # different lengths: left padding is exercised
    prompts = [
        "1+2=",
        "12+34+5=",
        "7+8+9=",
    ]
    completions = ["3", "51", "24"]
    pids, pmask = encode_prompts(prompts)
    cids, cmask = encode_completions(completions, width=4)  # right padding after EOS
    batched = completion_logps(model, pids, pmask, cids, cmask)
    selective = completion_logps(
        model, pids, pmask, cids, cmask, log_softmax_fn=torch_ops.selective_log_softmax
    )
    torch.testing.assert_close(selective[cmask], batched[cmask], rtol=0, atol=1e-12)
    for i, p in enumerate(prompts):
        n = int(cmask[i].sum())
        brute = _bruteforce_logps(model, p, cids[i, :n].tolist())
        assert len(brute) == n
        torch.testing.assert_close(
            batched[i, :n], torch.tensor(brute, dtype=batched.dtype), rtol=0, atol=1e-10
        )


def test_masks_exclude_prompt_and_padding():
    torch.manual_seed(0)
    model = TinyTransformer(
        len(VOCAB), d_model=32, n_layers=1, n_heads=2, d_ff=64, max_seq_len=16
    )
    prompts = ["1+2=", "12+34+5=", "7+8+9="]
    pids, pmask = encode_prompts(prompts)
    assert (pids[~pmask] == PAD).all() and (
        pids[torch.arange(3), pmask.long().argmax(1)] == BOS
    ).all()
    # the mask covers each completion up to and including EOS, nothing else
    cids, cmask = encode_completions(["3", "51", "24"], width=5)
    assert cmask.sum(1).tolist() == [2, 3, 3]
    assert (cids[~cmask] == PAD).all() and (
        cids[torch.arange(3), cmask.sum(1) - 1] == EOS
    ).all()
    base = completion_logps(model, pids, pmask, cids, cmask)
    # whatever sits at masked positions (prompt padding, completion padding) cannot
    # change a valid log-prob
    junk_p = torch.where(pmask, pids, torch.full_like(pids, VOCAB.stoi["9"]))
    junk_c = torch.where(cmask, cids, torch.full_like(cids, VOCAB.stoi["+"]))
    torch.testing.assert_close(
        completion_logps(model, junk_p, pmask, junk_c, cmask)[cmask],
        base[cmask],
        rtol=0,
        atol=1e-6,
    )
    # and the GRPO loss gives exactly zero gradient to masked positions
    new = base.detach().clone().requires_grad_(True)
    out = torch_ops.grpo_loss(
        new, base.detach(), base.detach(), torch.tensor([1.0, -1.0, 0.5]), cmask.float()
    )
    out.loss.backward()
    assert (new.grad[~cmask] == 0).all() and (new.grad[cmask] != 0).any()


def test_rollout_masks_ids_and_old_logps():
    torch.manual_seed(0)
    model = TinyTransformer(
        len(VOCAB), d_model=32, n_layers=1, n_heads=2, d_ff=64, max_seq_len=16
    )
    pids, pmask = encode_prompts(["1+2+3=", "12+3=", "4+5+6="] * 4)
    ro = generate(model, pids, pmask, 5, generator=torch.Generator().manual_seed(1))
    for row, m, done in zip(
        ro.completion_ids.tolist(), ro.completion_mask.tolist(), ro.finished.tolist()
    ):
        n = sum(m)
        assert m == [1] * n + [0] * (len(m) - n)
        assert all(t == PAD for t in row[n:])
        assert (EOS in row[:n]) == done and (not done or row[n - 1] == EOS)
    # the sampler's log-probs are the trainer's log-probs of the same tokens (same
    # weights, same temperature)
    again = completion_logps(model, pids, pmask, ro.completion_ids, ro.completion_mask)
    m = ro.completion_mask
    torch.testing.assert_close(again[m], ro.logps[m], rtol=0, atol=1e-5)
    assert (ro.logps[~m] == 0).all()
