"""Exercises of chapter 3: Derivations I, DPO (03_derivations), 03.1-03.5; Derivations
II and III, GRPO (03c_kl_term), 03.6-03.14. Within each page the levels ascend."""

import numpy as np

from ..reference import examples as ex
from ..reference.advantages import group_advantages
from ..reference.baselines import enumerate_group_gradients, true_gradient
from ..reference.dpo import implicit_reward, log_sigmoid, optimal_policy, sigmoid
from ..reference.grpo import clipped_objective
from ..reference.kl import forward_kl_grad_logits, kl_grad_logits
from ..trl_exact.dpo import dpo_loss
from .core import choice, code, numeric

# --- Derivations I: DPO (03_derivations) ----------------------------------------------

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

#: 03.2: a prompt with three answers: reference probabilities, rewards, beta
EX2 = {
    "ref_policy": np.array([0.5, 0.3, 0.2]),
    "rewards": np.array([0.0, 1.0, 2.0]),
    "beta": 0.5,
}


def _tilted(exponent):
    """pi_ref(y) exp(exponent_y), normalised (the closed form with another exponent)."""
    w = EX2["ref_policy"] * np.exp(exponent)
    return w / w.sum()


numeric(
    "03.2",
    "A prompt has three answers with reference probabilities [0.5, 0.3, 0.2] and "
    "rewards [0, 1, 2]. At beta = 0.5, give the policy that maximises the "
    "KL-regularised objective E[r] - beta KL(pi || pi_ref), as three probabilities.",
    lambda: optimal_policy(**EX2)[0],
    mistakes={
        "no normaliser": (
            lambda: EX2["ref_policy"] * np.exp(EX2["rewards"] / EX2["beta"]),
            "These weights pi_ref(y) exp(r(y) / beta) do not sum to 1: divide by their "
            "sum, Z(x).",
        ),
        "r times beta": (
            lambda: _tilted(EX2["rewards"] * EX2["beta"]),
            "The reward is divided by beta, not multiplied: the smaller beta, the "
            "further the reward moves the policy away from the reference.",
        ),
        "no reference": (
            lambda: optimal_policy(np.ones(3) / 3, EX2["rewards"], EX2["beta"])[0],
            "The optimum multiplies the reference: each answer's weight is pi_ref(y) "
            "exp(r(y) / beta), not exp(r(y) / beta) alone.",
        ),
        "minus": (
            lambda: _tilted(-EX2["rewards"] / EX2["beta"]),
            "The exponent is +r / beta: an answer with a higher reward gains "
            "probability.",
        ),
    },
    level=1,
)

choice(
    "03.3",
    "A batch of DPO pairs shares the model's parameters, and the optimiser is Adam. "
    "You raise beta from 0.1 to 1. What changes?",
    {
        "a": (
            "Every step gets about ten times larger, since beta multiplies the "
            "gradient -beta sigma(-beta u)."
        ),
        "b": (
            "Nothing: Adam normalises the scale of the gradient away, so beta has no "
            "effect."
        ),
        "c": (
            "The steps stay about as large, but the pairs' weights sigma(-beta u) are "
            "shared differently: well separated pairs stop counting, the pairs near "
            "the boundary decide the shared parameters, and a well separated pair's "
            "margin can even shrink."
        ),
        "d": (
            "The KL penalty in the loss gets ten times stronger, so every step stays "
            "closer to the reference."
        ),
    },
    "c",
    explanations={
        "a": (
            "That holds for plain SGD, whose step is proportional to the gradient. "
            "Adam divides by the root of the running mean of squared gradients, so a "
            "factor common to the whole loss cancels."
        ),
        "b": (
            "Adam removes a factor common to the whole loss, but beta also sits inside "
            "the sigmoid: it changes how the weight is shared among the pairs."
        ),
        "d": (
            "The DPO loss has no separate KL term: beta scales the logit beta u. It "
            "decides where the push on a pair stops and which pairs still count."
        ),
    },
    level=1,
)

#: 03.4: which reward lifts the least likely answer to probability 1/2 under pi*
EX4 = {"ref_policy": np.array([0.6, 0.3, 0.1]), "beta": 0.5, "target": 0.5}


def _lifting_reward(beta=EX4["beta"]):
    """The reward of answer 3 (the others 0) at which pi*(answer 3) = target: the
    implicit reward of that pi* relative to answer 1 (beta log Z cancels)."""
    q, t = EX4["ref_policy"], EX4["target"]
    pi_star = np.append(q[:2] / q[:2].sum() * (1 - t), t)
    r_hat = implicit_reward(np.log(pi_star), np.log(q), beta)
    return float(r_hat[2] - r_hat[0])


numeric(
    "03.4",
    "Reference probabilities [0.6, 0.3, 0.1] for three answers; the first two get "
    "reward 0 and beta = 0.5. Which reward must the third answer get for the "
    "optimal policy pi* of the KL-regularised objective to give it probability 1/2?",
    _lifting_reward,
    mistakes={
        "rough scale": (
            lambda: EX4["beta"] * float(np.log(1 / EX4["ref_policy"][2])),
            "beta log(1 / pi_ref(y)) is only the rough scale of the reward that "
            "lifts an answer; solve pi*(y) = 1/2 exactly, with the other answers' "
            "mass in Z.",
        ),
        "no normaliser": (
            lambda: EX4["beta"] * float(np.log(EX4["target"] / EX4["ref_policy"][2])),
            "You set pi_ref(y) exp(r / beta) = 1/2 and left out Z(x), which grows "
            "with the reward too.",
        ),
        "no beta": (
            lambda: _lifting_reward(beta=1.0),
            "You left out beta: the closed form has exp(r / beta), so the reward is "
            "beta times the log you found.",
        ),
        "divided by beta": (
            lambda: _lifting_reward(beta=1.0) / EX4["beta"],
            "The reward enters as r / beta, so solving for r multiplies the log by "
            "beta, not divides.",
        ),
    },
    level=2,
)


def _dpo_chosen_grad():
    return float(dpo_loss(**EX1, beta=EX1_BETA).grad_policy_chosen[0])


def _implicit_rewards():
    r_w = EX1_BETA * float(EX1["policy_chosen"][0] - EX1["ref_chosen"][0])
    r_l = EX1_BETA * float(EX1["policy_rejected"][0] - EX1["ref_rejected"][0])
    return r_w, r_l


numeric(
    "03.5",
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


# --- Derivations II and III: GRPO (their exercises: 03c_kl_term) ----------------------

choice(
    "03.6",
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

#: 03.7: the scale a of the rewards at which the guard eps shrinks every advantage by
#: 1%: std / (std + eps / a) = 0.99 (section 3.4's formula; a shift cancels exactly).
EX7_EPS, EX7_SHRINK = 1e-4, 0.99


def _one_percent_scale(ddof=0, shrink=EX7_SHRINK):
    std = ex.REWARD_GROUPS[:1].std(ddof=ddof)
    return EX7_EPS * shrink / ((1 - shrink) * std)


numeric(
    "03.7",
    "For the first group's rewards [0.2, 0.8, 1.4, 0.6] (population std, eps = 1e-4), "
    "find the positive scale a of the rewards at which every standardised advantage "
    "is 1% smaller than with eps = 0.",
    _one_percent_scale,
    mistakes={
        "eps over a is 1% of std": (
            lambda: EX7_EPS / (0.01 * ex.REWARD_GROUPS[:1].std()),
            "You set eps / a to 1% of the std. The advantages are std / (std + eps / "
            "a) times their eps = 0 values, so eps / a must be std / 99.",
        ),
        "ddof 1": (
            lambda: _one_percent_scale(ddof=1),
            "You used the sample standard deviation (ddof=1); the exercise uses the "
            "population one.",
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
    "03.8",
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
    "03.9",
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

#: 03.10: new ratios for the four answers of the first reward group (clip radius 0.2).
EX10_RATIOS = np.array([1.35, 0.70, 1.10, 0.75])


def _ex10_adv(ddof=0):
    return group_advantages(ex.REWARD_GROUPS[:1], ddof=ddof)[0]


numeric(
    "03.10",
    "The first group's rewards [0.2, 0.8, 1.4, 0.6] (population std, eps = 1e-4) and "
    "token ratios [1.35, 0.70, 1.10, 0.75], clip radius 0.2: give the four per-token "
    "clipped objectives min(rho A, clip(rho) A).",
    lambda: clipped_objective(EX10_RATIOS, _ex10_adv(), epsilon=0.2),
    mistakes={
        "clip only": (
            lambda: np.clip(EX10_RATIOS, 0.8, 1.2) * _ex10_adv(),
            "You clipped every ratio. The min keeps the unclipped term whenever it is "
            "the smaller one.",
        ),
        "no clip": (
            lambda: EX10_RATIOS * _ex10_adv(),
            "You ignored the clip: one of the four answers sits on a platform.",
        ),
        "ddof 1": (
            lambda: clipped_objective(EX10_RATIOS, _ex10_adv(ddof=1), epsilon=0.2),
            "These advantages use the sample std (ddof=1); the exercise uses the "
            "population std.",
        ),
    },
    level=2,
)


choice(
    "03.11",
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

#: 03.12: a softmax policy whose groups are too large to enumerate (3**16 ordered
#: groups)
EX12 = {
    "probs": np.array([0.1, 0.6, 0.3]),
    "rewards": np.array([1.0, 0.0, 2.0]),
    "group_size": 16,
}


def _grad_j12():
    return true_gradient(EX12["probs"], EX12["rewards"])


def _shrink12(g):
    return 1 - 1 / g


numeric(
    "03.12",
    "A softmax policy over three answers has probabilities [0.1, 0.6, 0.3] and "
    "rewards [1, 0, 2]; groups hold G = 16 i.i.d. answers (too many to enumerate). "
    "Derive the expected centred estimator E[(r_i - mean(r_1..r_G)) grad_z log "
    "pi(y_i)] with respect to the logits z, as a vector of three numbers.",
    lambda: _shrink12(EX12["group_size"]) * _grad_j12(),
    mistakes={
        "no shrinkage": (
            _grad_j12,
            "That is grad J itself: the group mean contains r_i, so it is not "
            "independent of the score of answer i. Expand the mean.",
        ),
        "1/G": (
            lambda: _grad_j12() / EX12["group_size"],
            "That is E[mean(r) * score_i], the part the group mean removes; the "
            "centred estimator keeps the rest.",
        ),
        "score e_a": (
            lambda: _shrink12(EX12["group_size"]) * EX12["probs"] * EX12["rewards"],
            "The score of a softmax is d log p_a / dz = e_a - p, not e_a: the "
            "components of the answer sum to zero.",
        ),
        "G = 3": (
            lambda: _shrink12(3) * _grad_j12(),
            "That is the factor of section 3.4's example (G = 3); here G = 16.",
        ),
        "sqrt": (
            lambda: _shrink12(EX12["group_size"]) ** 0.5 * _grad_j12(),
            "sqrt((G-1)/G) relates the two standard deviations; the mean-centring "
            "factor has no square root.",
        ),
    },
    level=3,
)

#: 03.13: the forward-KL gradient
EX13 = {"p": np.array([0.6, 0.3, 0.1]), "q": np.array([0.2, 0.3, 0.5])}

numeric(
    "03.13",
    "Derive the gradient of KL(q || softmax(z)) with respect to the logits z (q "
    "fixed), and evaluate it where softmax(z) = p = [0.6, 0.3, 0.1], with q = [0.2, "
    "0.3, 0.5].",
    lambda: forward_kl_grad_logits(np.log(EX13["p"]), EX13["q"]),
    mistakes={
        "q - p": (
            lambda: EX13["q"] - EX13["p"],
            "Check the sign: KL(q || p) = const - sum_a q_a log p_a, and d(-log "
            "p_a)/dz = p - e_a.",
        ),
        "other direction": (
            lambda: kl_grad_logits(np.log(EX13["p"]), EX13["q"]),
            "That is the gradient of KL(p || q), the other direction (what k2 "
            "follows).",
        ),
        "log ratio": (
            lambda: np.log(EX13["p"] / EX13["q"]),
            "log(p/q) is the integrand of KL(p || q), not a gradient with respect to "
            "the logits.",
        ),
    },
    level=3,
)

choice(
    "03.14",
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
