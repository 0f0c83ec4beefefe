"""Exercises of chapter 4 (the minimal implementation)."""

import numpy as np

from ..reference import examples as ex
from ..reference.advantages import group_advantages
from ..trl_exact.dpo import dpo_loss
from .core import choice, code, numeric

_P = ex.DPO_PAIRS


def _swapped():
    return dpo_loss(
        _P["policy_rejected"],
        _P["policy_chosen"],
        _P["ref_chosen"],
        _P["ref_rejected"],
        beta=0.1,
    )


numeric(
    "04.1",
    "Swap the two policy log-probs of each pair (reference unchanged): the new DPO "
    "loss at beta = 0.1.",
    lambda: _swapped().loss,
    mistakes={
        "swapped reference too": (
            lambda: (
                dpo_loss(
                    _P["policy_rejected"],
                    _P["policy_chosen"],
                    _P["ref_rejected"],
                    _P["ref_chosen"],
                ).loss
            ),
            "You swapped the reference log-probs as well; the exercise keeps the "
            "reference unchanged.",
        ),
        "unchanged": (lambda: dpo_loss(**_P).loss, "This is the loss before the swap."),
    },
    level=1,
)

numeric(
    "04.2",
    "The first reward group's advantages [0.2, 0.8, 1.4, 0.6] with the sample "
    "standard deviation (ddof=1).",
    lambda: group_advantages(ex.REWARD_GROUPS[:1], ddof=1)[0],
    mistakes={
        "ddof 0": (
            lambda: group_advantages(ex.REWARD_GROUPS[:1], ddof=0)[0],
            "These use the population std (ddof=0); the exercise asks for the sample "
            "std.",
        ),
    },
    level=1,
)


def _leave_one_out(rewards):
    r = np.asarray(rewards, dtype=float)
    return r - (r.sum(axis=1, keepdims=True) - r) / (r.shape[1] - 1)


def _draw_groups(rng):
    """Rewards of shape (prompts, G >= 2) drawn at grading time."""
    return (rng.normal(0.0, 1.0, (int(rng.integers(1, 5)), int(rng.integers(2, 7)))),)


code(
    "04.3",
    "Implement leave_one_out(rewards) for rewards of shape (prompts, G): r_i minus "
    "the mean of the other G-1.",
    _leave_one_out,
    cases=[
        (ex.REWARD_GROUPS,),
        (np.array([[0.0, 1.0]]),),
        (np.array([[1.0, 1.0, 1.0], [0.0, 3.0, 6.0]]),),
    ],
    mistakes={
        "centred": (
            lambda r: np.asarray(r) - np.asarray(r).mean(axis=1, keepdims=True),
            "You subtracted the mean of the whole group, which includes r_i itself.",
        ),
    },
    draw=_draw_groups,
    level=2,
)

choice(
    "04.4",
    "Answer 0 of the clip example has advantage < 0 and ratio 1.284 > 1 + epsilon. "
    "What does the objective do?",
    {
        "a": "It clips the ratio to 1.2, so this token gets no gradient.",
        "b": "It keeps the unclipped term, so the token keeps being pushed down.",
        "c": "It ignores the token because the ratio is outside the interval.",
    },
    "b",
    explanations={
        "a": (
            "Clipping only removes the gradient when the ratio has moved in the "
            "direction the advantage wants."
        ),
        "c": "No token is dropped: min() selects which of the two terms is used.",
    },
    level=2,
)


def _token_grad(*, kl=True, clipped=False, weighted=True):
    """d loss / d log pi_theta at answer 0's first token of section 4.4's example
    (epsilon 0.2, beta 0.04)."""
    inputs = ex.grpo_token_example()
    rho = float(np.exp(inputs["new_logps"][0, 0] - inputs["old_logps"][0, 0]))
    a = float(inputs["advantages"][0])
    delta = float(inputs["ref_logps"][0, 0] - inputs["new_logps"][0, 0])
    # answer 0 is outside the interval on the harmful side: not clipped
    d_surrogate = 0.0 if clipped else rho * a
    d_k3 = (1.0 - np.exp(delta)) if kl else 0.0
    weight = (
        1.0 / (inputs["mask"].shape[0] * inputs["mask"][0].sum()) if weighted else 1.0
    )
    return weight * (-d_surrogate + 0.04 * d_k3)


numeric(
    "04.5",
    "Derive d loss / d log pi_theta for one token of GRPO's loss (loss_type='grpo') "
    "and evaluate it at answer 0's first token of section 4.4 (epsilon 0.2, beta "
    "0.04).",
    _token_grad,
    mistakes={
        "no KL": (
            lambda: _token_grad(kl=False),
            "You dropped the KL term: d k3 / d log pi = 1 - exp(Delta).",
        ),
        "treated as clipped": (
            lambda: _token_grad(clipped=True),
            "Answer 0 is on the wrong side (A < 0, ratio > 1 + epsilon): min() keeps "
            "the unclipped term, whose derivative is rho * A.",
        ),
        "no weight": (
            lambda: _token_grad(weighted=False),
            "The loss averages over the answer's tokens and the answers: multiply by "
            "1 / (B |y_i|).",
        ),
    },
    level=3,
)


#: 04.6: one column of the Jacobian of group_advantages (the first reward group, the
#: third answer)
EX6 = {"rewards": ex.REWARD_GROUPS[0], "k": 2, "eps": 1e-4}


def _advantage_column(*, std_moves=True, mean_moves=True):
    """d A_i / d r_k for population-std advantages: (delta_ik - 1/G)/(s + eps) - d_i d_k
    / (G s (s + eps)^2)."""
    r, k, eps = EX6["rewards"], EX6["k"], EX6["eps"]
    g, d, s = r.size, r - r.mean(), r.std()
    centre = np.eye(g)[k] - (1.0 / g if mean_moves else 0.0)
    spread = d * d[k] / (g * s * (s + eps) ** 2) if std_moves else 0.0
    return centre / (s + eps) - spread


numeric(
    "04.6",
    "Derive d A_i / d r_k for group_advantages (population std s, guard eps) and "
    "evaluate the column k = 2 (the third answer) for the first reward group [0.2, "
    "0.8, 1.4, 0.6], eps = 1e-4: four numbers.",
    _advantage_column,
    mistakes={
        "std held fixed": (
            lambda: _advantage_column(std_moves=False),
            "The standard deviation depends on r_k too: d s / d r_k = (r_k - mean(r)) "
            "/ (G s).",
        ),
        "mean held fixed": (
            lambda: _advantage_column(mean_moves=False),
            "The mean depends on r_k too: d (r_i - mean(r)) / d r_k = delta_ik - 1/G.",
        ),
        "neither": (
            lambda: _advantage_column(std_moves=False, mean_moves=False),
            "Both the mean and the standard deviation depend on r_k: only with both "
            "do the four numbers sum to zero.",
        ),
    },
    level=3,
)
