"""Exercises of chapter 9 (hands-on checks)."""

import numpy as np

from ..reference import examples as ex
from ..reference.advantages import group_advantages
from ..reference.bandit import bandit_trajectory
from ..reference.dpo import sigmoid
from .core import choice, code, numeric


def _final_best(**kwargs):
    return float(bandit_trajectory(steps=80, **kwargs)[-1][2])


numeric(
    "09.1",
    "Reproduce one cell of the bandit table: the final probability of the best action "
    "after 80 steps for G = 2 and seed 0 (other settings as in the book: beta = 0.02, "
    "lr = 0.18, two updates per rollout).",
    lambda: _final_best(group_size=2, seed=0),
    mistakes={
        "seed 7": (
            lambda: _final_best(group_size=2, seed=7),
            "That is seed 7 (the package's default seed); the table's seeds run 0 to "
            "9.",
        ),
        "G=32": (
            lambda: _final_best(group_size=32, seed=0),
            "That is the G = 32 configuration.",
        ),
        "mean": (
            lambda: float(
                np.mean([_final_best(group_size=2, seed=s) for s in range(10)])
            ),
            "That is the mean over ten seeds; the exercise asks for seed 0 alone.",
        ),
    },
)

numeric(
    "09.2",
    "The positive advantage of the two-sample group [0, d] for d = 0.1, with the "
    "population std and eps = 1e-4.",
    lambda: float(group_advantages([[0.0, 0.1]])[0, 1]),
    # tighter than the default: eps moves the answer by a unit of its fourth figure,
    # so the mistakes that drop or misplace it lie 8 and 16 tolerances away
    rtol=2e-4,
    atol=1e-9,
    mistakes={
        "ddof 1": (
            lambda: float(group_advantages([[0.0, 0.1]], ddof=1)[0, 1]),
            "You used the sample std (ddof=1); the exercise uses the population std.",
        ),
        "no eps": (
            1.0,
            "With eps = 0 the advantage would be exactly 1; the guard eps changes it "
            "slightly.",
        ),
        "eps once": (
            lambda: 0.1 / (0.1 + 1e-4),
            "The std of [0, d] is d/2, so eps enters relative to d/2.",
        ),
    },
)


def _dpo_grad_chosen(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta):
    pc, pr, rc, rr = (
        np.asarray(a, dtype=float)
        for a in (policy_chosen, policy_rejected, ref_chosen, ref_rejected)
    )
    z = beta * ((pc - pr) - (rc - rr))
    return -beta * sigmoid(-z) / z.size


_P = ex.DPO_PAIRS


def _draw_pairs(rng):
    """Log-probs of P preference pairs and a beta drawn at grading time."""
    p = int(rng.integers(1, 6))
    return tuple(-rng.exponential(2.0, p) for _ in range(4)) + (
        float(rng.uniform(0.05, 1.0)),
    )


code(
    "09.3",
    "Implement dpo_grad_chosen(policy_chosen, policy_rejected, ref_chosen, "
    "ref_rejected, beta): the analytic gradient of the mean sigmoid DPO loss with "
    "respect to each policy_chosen log-prob, shape (P,).",
    _dpo_grad_chosen,
    cases=[
        (
            _P["policy_chosen"],
            _P["policy_rejected"],
            _P["ref_chosen"],
            _P["ref_rejected"],
            0.1,
        ),
        (
            np.array([-1.0, -3.0, -0.5]),
            np.array([-2.0, -1.0, -0.5]),
            np.array([-1.5, -2.0, -1.0]),
            np.array([-1.5, -2.5, -0.2]),
            0.5,
        ),
        (np.array([-10.0]), np.array([-1.0]), np.array([-1.0]), np.array([-1.0]), 2.0),
    ],
    mistakes={
        "sum not mean": (
            lambda pc, pr, rc, rr, b: (
                _dpo_grad_chosen(pc, pr, rc, rr, b) * np.asarray(pc).size
            ),
            "The loss is the mean over pairs: divide each pair's gradient by the "
            "number of pairs.",
        ),
        "sign": (
            lambda pc, pr, rc, rr, b: -_dpo_grad_chosen(pc, pr, rc, rr, b),
            "Check the sign: raising the chosen log-prob lowers the loss.",
        ),
        "sigmoid(z)": (
            lambda pc, pr, rc, rr, b: (
                -b
                * sigmoid(b * ((np.asarray(pc) - pr) - (np.asarray(rc) - rr)))
                / np.asarray(pc).size
            ),
            "d/dz of -log sigmoid(z) is -sigmoid(-z), not -sigmoid(z).",
        ),
        "forgot reference": (
            lambda pc, pr, rc, rr, b: (
                -b * sigmoid(-b * (np.asarray(pc) - pr)) / np.asarray(pc).size
            ),
            "The logit subtracts the reference gap as well.",
        ),
    },
    draw=_draw_pairs,
)

choice(
    "09.4",
    "All checks of the suite pass on your machine. What have you established?",
    {
        "a": (
            "That GRPO training of a language model converges faster with larger "
            "groups."
        ),
        "b": (
            "That the package's formulas and gradients agree with independent "
            "computations on finite action sets and synthetic losses."
        ),
        "c": "That the package reproduces TRL's throughput on a GPU.",
    },
    "b",
    explanations={
        "a": (
            "The bandit table is an observation for one four-action bandit, budget "
            "and protocol; nothing here trains a language model."
        ),
        "c": "No check measures speed, and none runs TRL or a GPU.",
    },
)
