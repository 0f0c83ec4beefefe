"""Exercises of chapter 2 (minimal understanding): the five takeaways and the choice
between DPO and GRPO."""

import numpy as np

from ..reference import examples as ex
from ..reference.advantages import group_advantages
from ..trl_exact.dpo import dpo_loss
from .core import choice, code, numeric

_TAKEAWAYS = {
    "a": (
        "1. DPO optimises the chosen/rejected margin relative to the reference; the "
        "chosen probability may fall."
    ),
    "b": "2. GRPO uses the group mean as its baseline and trains no value model.",
    "c": "3. GRPO keeps PPO's probability ratio and clip.",
    "d": "4. The reference is not a critic.",
    "e": "5. Group-relative scores are relative, not absolute.",
}


def _counterexample_losses():
    c = ex.DPO_COUNTEREXAMPLE
    lp = {k: np.log(c[k]) for k in ("ref", "before", "after")}
    return tuple(
        dpo_loss(
            lp[k][:1], lp[k][1:2], lp["ref"][:1], lp["ref"][1:2], beta=c["beta"]
        ).loss
        for k in ("before", "after")
    )


_LOSS_BEFORE, _LOSS_AFTER = _counterexample_losses()

choice(
    "02.1",
    f"A cell prints: 'P(chosen) {ex.DPO_COUNTEREXAMPLE['before'][0]:.2f} -> "
    f"{ex.DPO_COUNTEREXAMPLE['after'][0]:.2f}, DPO loss {_LOSS_BEFORE:.4f} -> "
    f"{_LOSS_AFTER:.4f}'. Which takeaway does it illustrate?",
    _TAKEAWAYS,
    "a",
    explanations={
        "b": (
            "No group of sampled answers appears in this output; look at which "
            "probability moved."
        ),
        "c": "No ratio to an old policy and no clip interval appear in this output.",
        "d": (
            "The output is about a preference pair's loss, not about what the "
            "reference does in GRPO."
        ),
        "e": (
            "This output comes from a preference pair, not from a group of scored "
            "answers."
        ),
    },
    level=1,
)


_SCALE = 1e-3  # 02.2: rewards multiplied by a small positive factor, eps fixed at 1e-4

numeric(
    "02.2",
    "Multiply the rewards [0.2, 0.8, 1.4, 0.6] by 0.001 and standardise them "
    "(population std, eps = 1e-4). What is the advantage of the third answer?",
    lambda: group_advantages(ex.REWARD_GROUPS[:1] * _SCALE, eps=1e-4)[0, 2],
    mistakes={
        "scale cancels": (
            lambda: group_advantages(ex.REWARD_GROUPS[:1], eps=1e-4)[0, 2],
            "This is the advantage before scaling: the scale cancels only when eps is "
            "negligible next to the group's standard deviation.",
        ),
        "ddof 1": (
            lambda: group_advantages(ex.REWARD_GROUPS[:1] * _SCALE, eps=1e-4, ddof=1)[
                0, 2
            ],
            "You used the sample standard deviation (ddof=1); the exercise uses the "
            "population one.",
        ),
    },
    level=1,
)


def _gives_signal(rewards):
    r = np.asarray(rewards, dtype=float)
    return r.max(axis=1) > r.min(axis=1)


_SIGNAL_CASES = [
    (np.array([[-2.0, -2.0, -2.0], [5.0, 5.0, 5.0]]),),
    (np.array([[0.0, 1e-5], [3.0, 3.0]]),),
    (np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0]]),),
    (np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0]]),),
    (ex.REWARD_GROUPS,),
    (
        np.full((2, 3), 0.1),
    ),  # all equal, yet (r - mean) / (std + eps) is -1.4e-13, not 0, in floating point
]


def _draw_rewards_with_ties(rng):
    """Reward groups drawn at grading time: some rows all equal, the others spread."""
    r = rng.normal(0.0, 1.0, (int(rng.integers(2, 6)), int(rng.integers(2, 6))))
    equal = rng.random(r.shape[0]) < 0.5
    r[equal] = r[equal, :1]
    return (r,)


code(
    "02.3",
    "Write gives_signal(rewards) for rewards of shape (prompts, G): a boolean array "
    "of shape (prompts,), True where the group's rewards are not all equal (so its "
    "advantages carry a direction).",
    _gives_signal,
    cases=_SIGNAL_CASES,
    mistakes={
        "advantages exactly zero": (
            lambda r: np.any(group_advantages(r) != 0, axis=1),
            "You tested the computed advantages for exact zeros; for an all-equal "
            "group such as [0.1, 0.1, 0.1] they are about 1e-13 (rounding in the "
            "mean). Compare the rewards themselves.",
        ),
        "any correct": (
            lambda r: (np.asarray(r) > 0).any(axis=1),
            "You tested whether some answer scored above zero; a group of equal "
            "scores has no direction whatever their level.",
        ),
        "nonzero mean": (
            lambda r: np.asarray(r).mean(axis=1) != 0,
            "The level of a group's rewards does not matter; what matters is whether "
            "they differ.",
        ),
        "std above eps": (
            lambda r: np.asarray(r).std(axis=1) > 1e-4,
            "A standard deviation below eps shrinks the advantages but does not make "
            "them zero.",
        ),
    },
    draw=_draw_rewards_with_ties,
    level=2,
)


choice(
    "02.4",
    "All G answers of a prompt get the same reward. beta = 0.04 and the current "
    "policy has already moved away from the reference. What is the gradient of the "
    "GRPO loss with respect to the policy's log-probs?",
    {
        "a": (
            "Exactly zero: all advantages are zero, so nothing is learned from this "
            "group."
        ),
        "b": (
            "Non-zero in general: the reward term vanishes, but the KL penalty still "
            "pulls the policy back towards the reference."
        ),
        "c": (
            "Non-zero, because the clip keeps the old advantages of the previous step."
        ),
        "d": "Undefined, because the standard deviation is zero.",
    },
    "b",
    explanations={
        "a": (
            "The advantages vanish, but is the advantage term the only term of the "
            "loss?"
        ),
        "c": (
            "Advantages are recomputed from each group's rewards; the clip does not "
            "remember them."
        ),
        "d": (
            "The eps in the denominator keeps the advantages defined (they are 0 / "
            "eps = 0)."
        ),
    },
    level=2,
)


choice(
    "02.5",
    "You hold 200k human preference pairs about tone and politeness, have no "
    "automatic way to score a new answer, and have memory for one trainable 7B model "
    "plus one frozen copy. Which method fits first?",
    {
        "a": (
            "DPO: the data are offline comparisons, and it needs no reward model, no "
            "sampling and no critic."
        ),
        "b": "GRPO: it drops the critic, so it fits in memory.",
        "c": "PPO-RLHF: it is the only method that can use preference pairs.",
    },
    "a",
    explanations={
        "b": (
            "Ask first where the data come from: what would score GRPO's freshly "
            "sampled answers?"
        ),
        "c": (
            "PPO-RLHF needs a trained critic and a reward model on top of the policy; "
            "check the memory budget."
        ),
    },
    level=2,
)


#: 02.6: the two-sample suppression
_D6, _EPS6 = 0.002, 1e-4

numeric(
    "02.6",
    "Derive the standardised advantage (population std, eps guard) of the better "
    "answer of a group of two with rewards [0, d]. Evaluate it at d = 0.002, eps = "
    "1e-4.",
    lambda: float(group_advantages(np.array([[0.0, _D6]]), eps=_EPS6)[0, 1]),
    mistakes={
        "no eps": (
            1.0,
            "Without the guard the answer is exactly 1: keep eps in the denominator.",
        ),
        "eps once": (
            lambda: _D6 / (_D6 + _EPS6),
            "Check the population std of the two rewards [0, d]: it is not d.",
        ),
        "sample std": (
            lambda: float(
                group_advantages(np.array([[0.0, _D6]]), eps=_EPS6, ddof=1)[0, 1]
            ),
            "That uses the sample std (ddof=1); the exercise uses the population std.",
        ),
    },
    level=3,
)


#: 02.7: how far the chosen answer may fall (section 2.1's "after" policy, a new update)
EX7 = {"chosen": 0.3, "rejected": 0.15, "rejected_new": 0.06}


def _chosen_floor(chosen, rejected, rejected_new):
    # the loss is monotone in the margin; the reference terms cancel from its change
    return chosen * rejected_new / rejected


numeric(
    "02.7",
    "A policy gives the chosen answer 0.3 and the rejected answer 0.15 (reference "
    "[0.2, 0.3, 0.5], beta = 0.1). An update lowers the rejected answer to 0.06. "
    "Derive the smallest probability the chosen answer may end at without the DPO "
    "loss of the pair rising.",
    lambda: _chosen_floor(**EX7),
    mistakes={
        "must not fall": (
            EX7["chosen"],
            "The loss depends only on the margin, a difference of two log-ratios: the "
            "chosen answer may fall, as long as the rejected one falls by a larger "
            "factor.",
        ),
        "difference of probabilities": (
            EX7["chosen"] - (EX7["rejected"] - EX7["rejected_new"]),
            "The margin compares log-probabilities, so equal changes of the margin "
            "are equal *ratios*, not equal differences of probabilities.",
        ),
        "reference": (
            lambda: _chosen_floor(0.2, 0.3, EX7["rejected_new"]),
            "The reference log-probs are the same before and after the update: they "
            "cancel from the change of the margin. Start from the policy's own "
            "probabilities.",
        ),
    },
    level=3,
)
