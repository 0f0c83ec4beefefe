"""Exercises of chapter 3 (the derivations)."""

import numpy as np

from ..reference import examples as ex
from ..reference.advantages import group_advantages
from ..reference.baselines import enumerate_group_gradients, true_gradient
from ..reference.dpo import log_sigmoid
from ..trl_exact.dpo import dpo_loss
from ..reference.grpo import clipped_objective
from .core import choice, code, numeric

#: 03.1: new sequence log-probs for one pair (the reference is the first pair of section
#: 3.7).
EX1 = {
    "policy_chosen": np.array([-1.9]),
    "policy_rejected": np.array([-3.1]),
    "ref_chosen": np.array([-2.0]),
    "ref_rejected": np.array([-2.4]),
}
EX1_BETA = 0.1

numeric(
    "03.1",
    "A pair has policy log-probs -1.9 (chosen) and -3.1 (rejected), reference "
    "log-probs -2.0 and -2.4. Compute the DPO loss at beta = 0.1.",
    lambda: dpo_loss(**EX1, beta=EX1_BETA).loss,
    mistakes={
        "no reference gap": (
            lambda: float(
                -log_sigmoid(
                    EX1_BETA * (EX1["policy_chosen"] - EX1["policy_rejected"])
                )[0]
            ),
            "You used only the policy's gap. DPO's logit subtracts the reference's "
            "chosen-minus-rejected gap too.",
        ),
        "no beta": (
            lambda: float(
                -log_sigmoid(
                    (EX1["policy_chosen"] - EX1["policy_rejected"])
                    - (EX1["ref_chosen"] - EX1["ref_rejected"])
                )[0]
            ),
            "The difference of differences must be multiplied by beta before the "
            "sigmoid.",
        ),
        "sign": (
            lambda: (
                dpo_loss(
                    EX1["policy_rejected"],
                    EX1["policy_chosen"],
                    EX1["ref_rejected"],
                    EX1["ref_chosen"],
                    beta=EX1_BETA,
                ).loss
            ),
            "Check the order: chosen minus rejected, for the policy and for the "
            "reference.",
        ),
        "log sigmoid": (
            lambda: float(log_sigmoid(dpo_loss(**EX1, beta=EX1_BETA).logits)[0]),
            "The loss is minus log sigmoid; it is positive.",
        ),
    },
    level=1,
)


def _k3(logp_policy, logp_ref):
    delta = np.asarray(logp_ref, dtype=float) - np.asarray(logp_policy, dtype=float)
    return np.exp(delta) - delta - 1


_LOGP_CASES = [
    (np.log(ex.KL_EXAMPLE["p"]), np.log(ex.KL_EXAMPLE["q"])),
    (np.array([-0.1, -2.0, -5.0]), np.array([-0.1, -1.0, -7.0])),
    (np.array([[-1.0, -0.5], [-3.0, -0.2]]), np.array([[-1.2, -0.4], [-2.0, -0.9]])),
]


def _draw_logps(rng):
    """Two log-prob arrays of one drawn shape, drawn at grading time."""
    shape = tuple(int(n) for n in rng.integers(1, 5, int(rng.integers(1, 3))))
    return (-rng.exponential(1.0, shape), -rng.exponential(1.0, shape))


code(
    "03.2",
    "Implement k3(logp_policy, logp_ref): DeepSeekMath's per-token KL estimator from "
    "the sampled tokens' log-probs, elementwise for arrays of any shape.",
    _k3,
    cases=_LOGP_CASES,
    rtol=1e-9,
    atol=1e-12,
    mistakes={
        "delta sign": (
            lambda lp, lr: _k3(lr, lp),
            "Check the sign of Delta: it is log pi_ref minus log pi_theta.",
        ),
        "k1": (
            lambda lp, lr: np.asarray(lp, dtype=float) - np.asarray(lr, dtype=float),
            "This is the plain log-ratio k1, which can be negative; k3 adds "
            "exp(Delta) - 1.",
        ),
    },
    draw=_draw_logps,
    level=2,
)

numeric(
    "03.3",
    "Answers with probabilities [0.2, 0.3, 0.5] and rewards [-1.0, 0.2, 2.0]; groups "
    "of G = 4. Give the exact expected policy gradient (w.r.t. the logits) of the "
    "mean-centred advantage r_i - mean(r).",
    lambda: (
        enumerate_group_gradients(
            ex.ENUMERATION["probs"], ex.ENUMERATION["rewards"], 4
        ).centered
    ),
    mistakes={
        "no shrinkage": (
            lambda: (
                enumerate_group_gradients(
                    ex.ENUMERATION["probs"], ex.ENUMERATION["rewards"], 4
                ).exact
            ),
            "The group mean contains r_i itself, so the centred estimator is not the "
            "true gradient.",
        ),
        "G = 3": (
            lambda: enumerate_group_gradients(**ex.ENUMERATION).centered,
            "This is the answer for groups of three; the exercise uses G = 4.",
        ),
        "1/G": (
            lambda: (
                enumerate_group_gradients(
                    ex.ENUMERATION["probs"], ex.ENUMERATION["rewards"], 4
                ).exact
                / 4
            ),
            "E[mean(r) g_i] is (1/G) of the true gradient; what is left after "
            "subtracting it?",
        ),
    },
    level=2,
)

choice(
    "03.4",
    "Within one GRPO update, which statement about pi_old and pi_ref is right?",
    {
        "a": (
            "They are the same model: pi_ref is just another name for the rollout "
            "snapshot."
        ),
        "b": (
            "pi_old is the snapshot that sampled this rollout and enters the ratio; "
            "pi_ref is the behavioural anchor of the KL term. They can be equal at "
            "the very start but do different jobs."
        ),
        "c": (
            "pi_ref is refreshed after every rollout and pi_old is frozen for the "
            "whole run."
        ),
        "d": "pi_old is only needed when beta > 0.",
    },
    "b",
    explanations={
        "a": (
            "At the first step their values may coincide, but one builds the ratio "
            "and the other anchors the KL."
        ),
        "c": (
            "It is the other way round: the rollout snapshot changes every rollout; "
            "the reference is frozen within a stage (and, in DeepSeekMath's iterative "
            "RL, updated only in an outer loop)."
        ),
        "d": (
            "beta weighs the KL term, which uses the reference; the ratio needs the "
            "rollout snapshot whatever beta is."
        ),
    },
    level=1,
)

#: 03.5: new ratios for the four answers of the first reward group (clip radius 0.2).
EX5_RATIOS = np.array([1.35, 0.70, 1.10, 0.75])


def _ex5_adv(ddof=0):
    return group_advantages(ex.REWARD_GROUPS[:1], ddof=ddof)[0]


numeric(
    "03.5",
    "The first group's rewards [0.2, 0.8, 1.4, 0.6] (population std, eps = 1e-4) and "
    "token ratios [1.35, 0.70, 1.10, 0.75], clip radius 0.2: give the four per-token "
    "clipped objectives min(rho A, clip(rho) A).",
    lambda: clipped_objective(EX5_RATIOS, _ex5_adv(), epsilon=0.2),
    mistakes={
        "clip only": (
            lambda: np.clip(EX5_RATIOS, 0.8, 1.2) * _ex5_adv(),
            "You clipped every ratio. The min keeps the unclipped term whenever it is "
            "the smaller one.",
        ),
        "no clip": (
            lambda: EX5_RATIOS * _ex5_adv(),
            "You ignored the clip: one of the four answers sits on a platform.",
        ),
        "ddof 1": (
            lambda: clipped_objective(EX5_RATIOS, _ex5_adv(ddof=1), epsilon=0.2),
            "These advantages use the sample std (ddof=1); the exercise uses the "
            "population std.",
        ),
    },
    level=2,
)


choice(
    "03.6",
    "All four answers of a group score 1.0, beta = 0 and there is no entropy bonus, "
    "so the loss gradient of this step is exactly zero. The optimiser is Adam, and "
    "earlier steps had non-zero gradients. Do the parameters move in this step?",
    {
        "a": "No: the gradient is zero, so the update is zero.",
        "b": (
            "Yes: Adam's first moment remembers the earlier gradients, so the step is "
            "non-zero even with a zero gradient."
        ),
        "c": (
            "No: Adam divides by the second moment, which a zero gradient sets to zero."
        ),
        "d": "Yes: the k3 KL term still pulls the policy towards the reference.",
    },
    "b",
    explanations={
        "a": (
            "That holds for plain SGD. Look at what Adam keeps from one step to the "
            "next."
        ),
        "c": (
            "The second moment decays by beta2 per step; one zero gradient does not "
            "reset it (and eps keeps the division defined)."
        ),
        "d": "With beta = 0 there is no KL term in the loss.",
    },
    level=2,
)

#: 03.7: an affine map of the first reward group, r' = a r + b with a small positive a.
EX7_SCALE, EX7_SHIFT = 0.001, 5.0

numeric(
    "03.7",
    "Map the first group's rewards [0.2, 0.8, 1.4, 0.6] to r' = 0.001 r + 5 and "
    "standardise with the population std and eps = 1e-4. Give the four new advantages.",
    lambda: group_advantages(EX7_SCALE * ex.REWARD_GROUPS[:1] + EX7_SHIFT)[0],
    mistakes={
        "invariant": (
            lambda: group_advantages(ex.REWARD_GROUPS[:1])[0],
            "Standardisation cancels an affine map exactly only when eps = 0; here "
            "eps is fixed while the std shrinks with the scale.",
        ),
        "ddof 1": (
            lambda: group_advantages(
                EX7_SCALE * ex.REWARD_GROUPS[:1] + EX7_SHIFT, ddof=1
            )[0],
            "These use the sample std (ddof=1); the exercise uses the population std.",
        ),
    },
    level=1,
)


# --- derivations (level 3) ------------------------------------------------------------

from ..reference.kl import forward_kl_grad_logits, kl_grad_logits  # noqa: E402
from ..reference.dpo import sigmoid  # noqa: E402


def _dpo_chosen_grad():
    return float(dpo_loss(**EX1, beta=EX1_BETA).grad_policy_chosen[0])


def _implicit_rewards():
    r_w = EX1_BETA * float(EX1["policy_chosen"][0] - EX1["ref_chosen"][0])
    r_l = EX1_BETA * float(EX1["policy_rejected"][0] - EX1["ref_rejected"][0])
    return r_w, r_l


numeric(
    "03.8",
    "Derive d L_DPO / d log pi_theta(y_w) for one pair, in terms of the implicit "
    "rewards r_w = beta log(pi_theta(y_w)/pi_ref(y_w)) and r_l. Evaluate it for the "
    "pair of exercise 03.1 at beta = 0.1.",
    _dpo_chosen_grad,
    mistakes={
        "no beta": (
            lambda: -float(sigmoid(_implicit_rewards()[1] - _implicit_rewards()[0])),
            "The chain rule through the logit beta u brings out a factor beta in "
            "front of the sigmoid.",
        ),
        "sigma of the wrong difference": (
            lambda: (
                -EX1_BETA
                * float(sigmoid(_implicit_rewards()[0] - _implicit_rewards()[1]))
            ),
            "d/dz of -log sigma(z) is -sigma(-z): the weight is sigma(r_l - r_w), "
            "large when the pair is ranked wrongly, not sigma(r_w - r_l).",
        ),
        "sign": (
            lambda: -_dpo_chosen_grad(),
            "The loss falls when the chosen log-prob rises, so its derivative is "
            "negative.",
        ),
    },
    level=3,
)

#: 03.9: a softmax policy whose groups are too large to enumerate (3**16 ordered groups)
EX9 = {
    "probs": np.array([0.1, 0.6, 0.3]),
    "rewards": np.array([1.0, 0.0, 2.0]),
    "group_size": 16,
}


def _grad_j9():
    return true_gradient(EX9["probs"], EX9["rewards"])


def _shrink9(g):
    return 1 - 1 / g


numeric(
    "03.9",
    "A softmax policy over three answers has probabilities [0.1, 0.6, 0.3] and "
    "rewards [1, 0, 2]; groups hold G = 16 i.i.d. answers (too many to enumerate). "
    "Derive the expected centred estimator E[(r_i - mean(r_1..r_G)) grad_z log "
    "pi(y_i)] with respect to the logits z, as a vector of three numbers.",
    lambda: _shrink9(EX9["group_size"]) * _grad_j9(),
    mistakes={
        "no shrinkage": (
            _grad_j9,
            "That is grad J itself: the group mean contains r_i, so it is not "
            "independent of the score of answer i. Expand the mean.",
        ),
        "1/G": (
            lambda: _grad_j9() / EX9["group_size"],
            "That is E[mean(r) * score_i], the part the group mean removes; the "
            "centred estimator keeps the rest.",
        ),
        "score e_a": (
            lambda: _shrink9(EX9["group_size"]) * EX9["probs"] * EX9["rewards"],
            "The score of a softmax is d log p_a / dz = e_a - p, not e_a: the "
            "components of the answer sum to zero.",
        ),
        "G = 3": (
            lambda: _shrink9(3) * _grad_j9(),
            "That is the factor of section 3.4's example (G = 3); here G = 16.",
        ),
        "sqrt": (
            lambda: _shrink9(EX9["group_size"]) ** 0.5 * _grad_j9(),
            "sqrt((G-1)/G) relates the two standard deviations; the mean-centring "
            "factor has no square root.",
        ),
    },
    level=3,
)

#: 03.10: the forward-KL gradient
EX10 = {"p": np.array([0.6, 0.3, 0.1]), "q": np.array([0.2, 0.3, 0.5])}

numeric(
    "03.10",
    "Derive the gradient of KL(q || softmax(z)) with respect to the logits z (q "
    "fixed), and evaluate it at softmax(z) = p = [0.6, 0.3, 0.1], q = [0.2, 0.3, "
    "0.5]. This is what the bare k3 loss follows on-policy.",
    lambda: forward_kl_grad_logits(np.log(EX10["p"]), EX10["q"]),
    mistakes={
        "q - p": (
            lambda: EX10["q"] - EX10["p"],
            "Check the sign: KL(q || p) = const - sum_a q_a log p_a, and d(-log "
            "p_a)/dz = p - e_a.",
        ),
        "other direction": (
            lambda: kl_grad_logits(np.log(EX10["p"]), EX10["q"]),
            "That is the gradient of KL(p || q), the other direction (what k2 "
            "follows).",
        ),
        "log ratio": (
            lambda: np.log(EX10["p"] / EX10["q"]),
            "log(p/q) is the integrand of KL(p || q), not a gradient with respect to "
            "the logits.",
        ),
    },
    level=3,
)

choice(
    "03.11",
    "PPO/GRPO's per-token objective min(rho A, clip(rho, 1 - eps, 1 + eps) A) with "
    "eps = 0.2: derive where its derivative with respect to rho is zero.",
    {
        "a": "Whenever rho lies outside [0.8, 1.2].",
        "b": (
            "Where A > 0 and rho > 1.2, or A < 0 and rho < 0.8: the ratio has already "
            "moved far enough in the advantage's direction."
        ),
        "c": "Where A > 0 and rho < 0.8, or A < 0 and rho > 1.2.",
        "d": "Nowhere: the minimum always keeps the unclipped term.",
    },
    "b",
    explanations={
        "a": (
            "The most common misreading (np.clip without the min). For A < 0 and rho "
            "> 1.2 compare the two terms: which is smaller?"
        ),
        "c": (
            "These are the wrong-direction regions: there the unclipped term is the "
            "minimum and keeps its gradient A."
        ),
        "d": (
            "Where the clipped term is the smaller one, the objective is constant in "
            "rho."
        ),
    },
    level=3,
)
