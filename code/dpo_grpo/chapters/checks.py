"""The hands-on verification suite (chapter 9) and the counter-examples of chapter 8, as functions.

Each ``check_*`` function either recomputes one claim of the book independently of the code it checks (its own
loop, its own closed form, or central finite differences) or compares the package's output with the numbers the
article reports (:data:`ARTICLE_REPORTED`: the bandit table; the swapped DPO pair, also checked against its closed
form). It returns a :class:`CheckResult` holding the measured value (usually a maximum absolute error), the
threshold it must stay below, and the intermediate numbers in ``details``.
:func:`run_all_checks` runs all of them and returns ``{name: CheckResult}``; ``python -m dpo_grpo.chapters.checks`` prints a
report (``--json`` prints the results as JSON, ``--fast`` skips the 50 bandit runs).

Scope: finite action sets and synthetic losses only. Nothing here trains a language model or a video model; the
checks establish that the formulas and their implementation agree, not how training behaves at scale.
Errors are measured in float64 and depend on the machine and the NumPy build; finite-difference errors must stay
below :data:`FD_TOL`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from .. import _validation as v
from ..reference import examples as ex
from ..reference.softmax import log_softmax, softmax
from ..reference.advantages import group_advantages
from ..trl_exact.advantages import reward_advantages
from ..reference.bandit import DEFAULT_REWARDS, bandit_seed_table, bandit_trajectory
from ..reference.baselines import enumerate_group_gradients
from ..reference.dpo import max_objective_identity_error
from ..trl_exact.dpo import dpo_loss
from .gradcheck import finite_difference, max_abs_error
from ..trl_exact.grpo import clip_region, grpo_loss
from ..reference.kl import exact_kl, k3, k3_surrogate_grad_logits, kl_grad_logits

#: central finite differences with h = 1e-6 must agree with an analytic gradient to this absolute error
FD_TOL = 1e-8
#: identities evaluated in float64 (a few roundings of O(1) numbers) must hold to this absolute error
EXACT_TOL = 1e-12

#: What the article reports (its Windows / Python 3.11.9 / NumPy 2.4.3 machine). Our runs are compared with these:
#: the bandit table and the two-sample advantages must match to six decimals; errors are machine-dependent and are
#: only required to stay below the thresholds.
ARTICLE_REPORTED = {
    "bandit": {  # final P(best action) over seeds 0..9: mean, min, max
        "G=32 (original)": (0.990830, 0.987677, 0.992312),
        "G=2": (0.950928, 0.938407, 0.962952),
        "all rewards 1": (0.250000, 0.250000, 0.250000),
        "best reward 0.31": (0.987225, 0.983949, 0.989418),
        "beta=0.5": (0.877653, 0.864133, 0.901262),
    },
    "two_sample_advantages": (0.999800, 0.980392, 0.047619),
    "dpo_swap_logits": (-0.10, -0.05),
    "dpo_swap_loss": 0.731428,
    "dpo_fd_max_error": 4.31e-11,
    "surrogate_fd_max_error": 8.34e-12,
    "kl_corrected_gradient_error": 2.23e-10,
    "objective_identity_max_error": 4.45e-16,
    "invalid_inputs_rejected": 6,
}

#: A full 4-action softmax in which one sampled token sits in each of the four off-centre regions of the clip:
#: both platforms (A > 0, rho > 1 + eps; A < 0, rho < 1 - eps) and both wrong-direction cases (A < 0, rho > 1 + eps;
#: A > 0, rho < 1 - eps). The article's example (:func:`dpo_grpo.reference.examples.surrogate_gradient_example`) has both
#: platforms but only the first wrong-direction case, so the suite runs both.
FOUR_REGION_EXAMPLE = {
    "actions": np.array([0, 1, 2, 3]),
    "old_probs": np.array([0.1, 0.1, 0.4, 0.4]),
    "ref_probs": np.full(4, 0.25),
    "new_probs": np.array([0.2, 0.25, 0.3, 0.25]),  # ratios 2.0, 2.5, 0.75, 0.625
    "advantages": np.array([1.0, -0.7, -0.9, 0.6]),
    "beta": 0.04,
}


@dataclass(frozen=True)
class CheckResult:
    """One verified claim: ``passed`` iff ``value`` satisfies the check's criterion (usually ``value < threshold``)."""

    name: str
    passed: bool
    value: float  #: the measured quantity, usually a max absolute error
    #: what ``value`` is compared with (None when the criterion is not a threshold)
    threshold: float | None
    description: str
    details: dict = field(default_factory=dict)

    def __bool__(self):
        return bool(self.passed)

    def line(self) -> str:
        """One report line: PASS/FAIL, name, measured value and threshold."""
        thr = "" if self.threshold is None else f" (threshold {self.threshold:.0e})"
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name:<28} {self.value:.3e}{thr}  {self.description}"


def _result(name, value, threshold, description, details, passed=None):
    value = float(value)
    ok = (value < threshold) if passed is None else bool(passed)
    return CheckResult(name, bool(ok), value, threshold, description, details)


# --- DPO -------------------------------------------------------------------------------------------------------------


def check_objective_identity(n_policies=200, seed=17) -> CheckResult:
    """``J(p) = p.r - beta KL(p||q)`` equals ``beta log Z - beta KL(p||pi*)`` for ``n_policies`` Dirichlet(1) policies.

    Computed here with its own formulas (``Z = sum q exp(r/beta)``), then compared with the package's
    :func:`~dpo_grpo.trl_exact.dpo.max_objective_identity_error`. Value: the largest gap.
    """
    n = v.integer(n_policies, "n_policies", minimum=1)
    seed = v.integer(seed, "seed", minimum=0)
    q, r, beta = (
        ex.OBJECTIVE_IDENTITY["ref_policy"],
        ex.OBJECTIVE_IDENTITY["rewards"],
        ex.OBJECTIVE_IDENTITY["beta"],
    )
    z = np.sum(q * np.exp(r / beta))
    optimum = q * np.exp(r / beta) / z
    policies = np.random.default_rng(seed).dirichlet(np.ones(q.size), size=n)
    objective = policies @ r - beta * np.sum(policies * np.log(policies / q), axis=1)
    identity = beta * np.log(z) - beta * np.sum(
        policies * np.log(policies / optimum), axis=1
    )
    errors = np.abs(objective - identity)
    package = max_objective_identity_error(q, r, beta, n_policies=n, seed=seed)
    best = float(objective.max())
    details = dict(
        n_policies=n,
        optimum=optimum,
        beta_log_z=float(beta * np.log(z)),
        best_sampled_objective=best,
        package_max_error=package,
        article=ARTICLE_REPORTED["objective_identity_max_error"],
    )
    ok = errors.max() < EXACT_TOL and package < EXACT_TOL and best <= beta * np.log(z)
    return _result(
        "objective_identity",
        errors.max(),
        EXACT_TOL,
        f"J(p) = beta log Z - beta KL(p||pi*) over {n} random policies",
        details,
        ok,
    )


def check_dpo_gradient(h=1e-6) -> CheckResult:
    """The analytic DPO gradient (d loss / d policy log-probs) against central differences on the article's pairs.

    Runs the ``sigmoid`` loss (the value) and also ``hinge`` and ``robust`` (label smoothing 0.1) in ``details``.
    """
    h = v.scalar(h, "h", positive=True)
    p = ex.DPO_PAIRS
    x = np.column_stack([p["policy_chosen"], p["policy_rejected"]])  # (P, 2)
    errors = {}
    for loss_type, kw in (
        ("sigmoid", {}),
        ("hinge", {}),
        ("robust", {"label_smoothing": 0.1}),
    ):
        out = dpo_loss(**p, beta=0.1, loss_type=loss_type, **kw)

        def f(a, loss_type=loss_type, kw=kw):
            return dpo_loss(
                a[:, 0],
                a[:, 1],
                p["ref_chosen"],
                p["ref_rejected"],
                beta=0.1,
                loss_type=loss_type,
                **kw,
            ).loss

        analytic = np.column_stack([out.grad_policy_chosen, out.grad_policy_rejected])
        errors[loss_type] = max_abs_error(analytic, finite_difference(f, x, h=h))
    details = dict(errors=errors, article=ARTICLE_REPORTED["dpo_fd_max_error"])
    return _result(
        "dpo_gradient",
        errors["sigmoid"],
        FD_TOL,
        "DPO analytic gradient vs finite differences",
        details,
        max(errors.values()) < FD_TOL,
    )


def check_dpo_swap() -> CheckResult:
    """Swap the two *policy* log-probs of each pair, keep the reference: logits ``-beta (policy gap + ref gap)``.

    Checks the package against that closed form and ``-log sigmoid`` computed with ``log1p``; ``details`` also holds a
    pair whose swapped logit stays *positive* (the reference prefers the rejected answer strongly), which is why
    "swap implies negative logit" has to be checked rather than assumed. Value: the swapped loss.
    """
    p, beta = ex.DPO_PAIRS, 0.1
    out = dpo_loss(
        p["policy_rejected"],
        p["policy_chosen"],
        p["ref_chosen"],
        p["ref_rejected"],
        beta=beta,
    )
    policy_gap = p["policy_chosen"] - p["policy_rejected"]
    ref_gap = p["ref_chosen"] - p["ref_rejected"]
    logits = -beta * (policy_gap + ref_gap)
    loss = float(np.mean(np.log1p(np.exp(-logits))))
    both = dpo_loss(
        p["policy_rejected"],
        p["policy_chosen"],
        p["ref_rejected"],
        p["ref_chosen"],
        beta=beta,
    )
    original = dpo_loss(**p, beta=beta)
    # a pair where the reference prefers the rejected answer by 1.0 nat and the policy the chosen by 0.3
    stays = dpo_loss([-2.0], [-2.3], [-3.0], [-2.0], beta=beta)
    stays_swapped = dpo_loss([-2.3], [-2.0], [-3.0], [-2.0], beta=beta)
    err = max(max_abs_error(out.logits, logits), abs(out.loss - loss))
    details = dict(
        logits=out.logits,
        loss=out.loss,
        original_logits=original.logits,
        original_loss=original.loss,
        swap_reference_too_logits=both.logits,
        counter_pair_logit=float(stays.logits[0]),
        counter_pair_swapped_logit=float(stays_swapped.logits[0]),
        closed_form_error=err,
        article_logits=ARTICLE_REPORTED["dpo_swap_logits"],
        article_loss=ARTICLE_REPORTED["dpo_swap_loss"],
    )
    ok = (
        err < EXACT_TOL
        and np.allclose(out.logits, ARTICLE_REPORTED["dpo_swap_logits"], atol=1e-12)
        and round(out.loss, 6) == ARTICLE_REPORTED["dpo_swap_loss"]
        and stays_swapped.logits[0] > 0
    )
    return _result(
        "dpo_swap",
        out.loss,
        None,
        "swapped policy log-probs: logits and loss",
        details,
        ok,
    )


def check_chosen_probability_counterexample() -> CheckResult:
    """Chosen probability falls (0.4 -> 0.3) while the DPO loss falls: the loss sees the ratio, not the level.

    Value: the loss decrease (positive means the loss fell).
    """
    c = ex.DPO_COUNTEREXAMPLE
    q = np.log(c["ref"])

    def loss(probs):
        lp = np.log(probs)
        return dpo_loss(lp[:1], lp[1:2], q[:1], q[1:2], beta=c["beta"]).loss

    before, after = loss(c["before"]), loss(c["after"])
    details = dict(
        loss_before=before,
        loss_after=after,
        chosen_before=float(c["before"][0]),
        chosen_after=float(c["after"][0]),
        odds_before=float(c["before"][0] / c["before"][1]),
        odds_after=float(c["after"][0] / c["after"][1]),
    )
    ok = after < before and c["after"][0] < c["before"][0]
    return _result(
        "dpo_chosen_probability_drop",
        before - after,
        None,
        "chosen probability falls, DPO loss falls",
        details,
        ok,
    )


# --- Group baselines -------------------------------------------------------------------------------------------------


def check_group_enumeration(eps=1e-4) -> CheckResult:
    """All ``3**3 = 27`` ordered groups, enumerated here with a plain loop and compared with the package.

    Checks: centred advantages give ``(1 - 1/G)`` x the true gradient, leave-one-out gives it exactly, and the
    standardised gradient is *not* a multiple of it (its component ratios differ by more than 0.01).
    Value: the largest of the identity errors and the loop-vs-package errors.
    """
    eps = v.scalar(eps, "eps", positive=True)
    p, r, g = (
        ex.ENUMERATION["probs"],
        ex.ENUMERATION["rewards"],
        ex.ENUMERATION["group_size"],
    )
    exact = p * (r - p @ r)
    centred, loo, standardised = np.zeros(3), np.zeros(3), np.zeros(3)
    count = 0
    for group in itertools.product(range(p.size), repeat=g):
        a = np.array(group)
        weight = np.prod(p[a])
        rr = r[a]
        score = np.eye(p.size)[a] - p
        centred += weight * ((rr - rr.mean())[:, None] * score).mean(axis=0)
        loo += weight * ((rr - (rr.sum() - rr) / (g - 1))[:, None] * score).mean(axis=0)
        std_adv = (rr - rr.mean()) / (rr.std() + eps)
        standardised += weight * (std_adv[:, None] * score).mean(axis=0)
        count += 1
    pkg = enumerate_group_gradients(p, r, g, eps=eps)
    errors = {
        "centred_vs_(1-1/G)_exact": max_abs_error(centred, (1 - 1 / g) * exact),
        "loo_vs_exact": max_abs_error(loo, exact),
        "loop_vs_package_centred": max_abs_error(centred, pkg.centered),
        "loop_vs_package_loo": max_abs_error(loo, pkg.leave_one_out),
        "loop_vs_package_standardised": max_abs_error(standardised, pkg.standardised),
    }
    ratios = standardised / exact
    details = dict(
        n_groups=count,
        exact=exact,
        centred=centred,
        leave_one_out=loo,
        standardised=standardised,
        standardised_ratios=ratios,
        errors=errors,
    )
    worst = max(errors.values())
    ok = worst < EXACT_TOL and count == p.size**g and np.ptp(ratios) > 0.01
    return _result(
        "group_enumeration",
        worst,
        EXACT_TOL,
        f"{count} groups: centred, leave-one-out, standardised",
        details,
        ok,
    )


def two_sample_gap_table(gaps=ex.TWO_SAMPLE_GAPS, eps=1e-4) -> list:
    """Rows ``{gap, advantage, formula, error, advantage_ddof1}`` for the groups ``[0, d]``.

    Population std of ``[0, d]`` is ``d/2``, so the positive advantage is ``(d/2)/(d/2 + eps) = d/(d + 2 eps)``;
    with the sample std (``ddof=1``, TRL) it is ``(d/2)/(d/sqrt 2 + eps)``.
    """
    eps = v.scalar(eps, "eps", positive=True)
    rows = []
    for d in v.sequence(gaps, "gaps"):
        d = v.scalar(d, "gaps", positive=True)
        adv = float(group_advantages([[0.0, d]], eps=eps)[0, 1])
        formula = d / (d + 2 * eps)
        rows.append(
            dict(
                gap=d,
                advantage=adv,
                formula=formula,
                error=abs(adv - formula),
                advantage_ddof1=float(
                    group_advantages([[0.0, d]], eps=eps, ddof=1)[0, 1]
                ),
            )
        )
    return rows


def check_two_sample_gaps() -> CheckResult:
    """:func:`two_sample_gap_table` for the article's gaps: the formula holds and the values match the article."""
    rows = two_sample_gap_table()
    err = max(row["error"] for row in rows)
    rounded = tuple(round(row["advantage"], 6) for row in rows)
    ok = err < EXACT_TOL and rounded == ARTICLE_REPORTED["two_sample_advantages"]
    return _result(
        "two_sample_gaps",
        err,
        EXACT_TOL,
        "[0, d]: advantage = d / (d + 2 eps)",
        dict(rows=rows),
        ok,
    )


# --- KL ------------------------------------------------------------------------------------------------------------


def _k3_sum(z, q, weights, ratio_to=None):
    """``sum_a weights_a * w_a * k3_a`` at logits z; ``w = softmax(z)/ratio_to`` (undetached) if given, else 1."""
    p = softmax(z)
    k = np.expm1(np.log(q / p)) - np.log(q / p)
    w = 1.0 if ratio_to is None else p / ratio_to
    return float(np.sum(weights * w * k))


def check_kl(h=1e-6) -> CheckResult:
    """Value and gradient of the k3 estimator on the article's three-action example (section 3.5).

    Values: E_p[k3] = KL(p||q); E_old[k3] != KL; E_old[(p/old) k3] = KL. Gradients (finite differences of the sums
    with the samples' weights held fixed): the undetached ratio-weighted sum has the true KL gradient; a detached
    ratio misses a term; the bare sum at samples from p has gradient ``p - q``, which is not the KL gradient.
    Value: the corrected-gradient error (finite differences vs the analytic KL gradient).
    """
    p, q, old = ex.KL_EXAMPLE["p"], ex.KL_EXAMPLE["q"], ex.KL_EXAMPLE["old"]
    z = np.log(p)
    kl = exact_kl(p, q)
    k = k3(np.log(q) - np.log(p))
    true_grad = kl_grad_logits(z, q)
    true_grad_fd = finite_difference(lambda x: exact_kl(softmax(x), q), z, h=h)
    weighted_grad = finite_difference(
        lambda x: _k3_sum(x, q, old, ratio_to=old), z, h=h
    )
    # detached ratio: w = p/old evaluated at the current point and held fixed
    w_fixed = p / old
    detached_grad = finite_difference(lambda x: _k3_sum(x, q, old * w_fixed), z, h=h)
    self_grad = finite_difference(lambda x: _k3_sum(x, q, p), z, h=h)
    old_bare_grad = finite_difference(lambda x: _k3_sum(x, q, old), z, h=h)
    values = dict(
        exact_kl=kl,
        reverse_kl=exact_kl(q, p),
        current_sample_expectation=float(p @ k),
        old_sample_expectation=float(old @ k),
        weighted_old_expectation=float(old @ (p / old * k)),
    )
    errors = {
        "E_p[k3] - KL": abs(values["current_sample_expectation"] - kl),
        "E_old[(p/old) k3] - KL": abs(values["weighted_old_expectation"] - kl),
        "corrected gradient (fd) - true gradient": max_abs_error(
            weighted_grad, true_grad
        ),
        "true gradient: analytic - fd": max_abs_error(true_grad, true_grad_fd),
        "self-sampled bare gradient (fd) - (p - q)": max_abs_error(self_grad, p - q),
        "package undetached surrogate grad - fd": max_abs_error(
            k3_surrogate_grad_logits(z, q, old, ratio_weighted=True), weighted_grad
        ),
        "package detached surrogate grad - fd": max_abs_error(
            k3_surrogate_grad_logits(z, q, old, ratio_weighted=True, detach_ratio=True),
            detached_grad,
        ),
        "package bare surrogate grad - fd": max_abs_error(
            k3_surrogate_grad_logits(z, q), self_grad
        ),
    }
    gaps = {
        "detached - true gradient": max_abs_error(detached_grad, true_grad),
        "bare (p - q) - true gradient": max_abs_error(self_grad, true_grad),
        "old-sampled bare - true gradient": max_abs_error(old_bare_grad, true_grad),
    }
    details = dict(
        values=values,
        errors=errors,
        must_differ=gaps,
        true_gradient=true_grad,
        bare_gradient=self_grad,
        detached_gradient=detached_grad,
        article=ARTICLE_REPORTED["kl_corrected_gradient_error"],
    )
    ok = (
        max(errors.values()) < FD_TOL
        and min(gaps.values()) > 0.05
        and abs(values["old_sample_expectation"] - kl) > 0.1
    )
    return _result(
        "kl_value_and_gradient",
        errors["corrected gradient (fd) - true gradient"],
        FD_TOL,
        "k3: ratio-weighted value and gradient are exact, bare/detached are not",
        details,
        ok,
    )


# --- GRPO surrogate ----------------------------------------------------------------------------------------------


def surrogate_gradient_error(example, epsilon=0.2, h=1e-6) -> dict:
    """Full-softmax check of the GRPO token loss for one sampled token per action (``example`` as in
    :func:`dpo_grpo.reference.examples.surrogate_gradient_example`).

    ``loss(z) = grpo_loss(log softmax(z)[actions], old, ref, A, beta)``; its gradient w.r.t. the logits is compared by
    central differences with (1) the package's ``grad`` chained through the softmax Jacobian ``e_a - p`` and (2) an
    independent closed form: per token ``c = -1[active] rho A + beta (1 - pi_ref/pi)``, gradient ``mean_i c_i (e_{a_i}
    - p)``, ``active`` = not on a clip platform. Returns errors, ratios and clip regions.
    """
    keys = ("actions", "old_probs", "ref_probs", "new_probs", "advantages", "beta")
    if not isinstance(example, dict):
        raise TypeError(
            f"example must be a dict like surrogate_gradient_example()'s, got {type(example).__name__}"
        )
    if any(k not in example for k in keys):
        raise ValueError(
            f"example must have the keys {keys}, missing {[k for k in keys if k not in example]}"
        )
    acts = np.asarray(example["actions"])
    old, ref, new = (
        np.asarray(example[k], dtype=float)
        for k in ("old_probs", "ref_probs", "new_probs")
    )
    adv, beta = np.asarray(example["advantages"], dtype=float), float(example["beta"])
    n = acts.size
    ones = np.ones((n, 1))

    def call(z):
        lp = log_softmax(z)
        return grpo_loss(
            lp[acts, None],
            np.log(old)[acts, None],
            np.log(ref)[acts, None],
            adv,
            ones,
            epsilon=epsilon,
            beta=beta,
        )

    z = np.log(new)
    fd = finite_difference(lambda x: call(x).loss, z, h=h)
    jac = np.eye(new.size)[acts] - new  # d log pi(a_i) / d z, rows i
    package = call(z).grad[:, 0] @ jac
    ratio = new[acts] / old[acts]
    regions = clip_region(ratio, adv, epsilon=epsilon)
    active = regions != "platform"
    coeff = -active.astype(float) * ratio * adv + beta * (1 - ref[acts] / new[acts])
    closed = (coeff[:, None] * jac).mean(axis=0)
    return dict(
        package_error=max_abs_error(package, fd),
        closed_form_error=max_abs_error(closed, fd),
        ratio=ratio,
        regions=regions.tolist(),
        gradient=fd,
    )


def check_surrogate_gradient() -> CheckResult:
    """The full four-action surrogate gradient on the article's example and on :data:`FOUR_REGION_EXAMPLE`.

    Passes when every error is below :data:`FD_TOL` and, together, the examples put a token on both clip platforms
    and in both wrong-direction regions (high side: A < 0, rho > 1 + eps; low side: A > 0, rho < 1 - eps).
    Value: the largest error.
    """
    runs = {
        "article": surrogate_gradient_error(ex.surrogate_gradient_example()),
        "four_regions": surrogate_gradient_error(FOUR_REGION_EXAMPLE),
    }
    covered = set()
    for name, run in runs.items():
        e = (
            ex.surrogate_gradient_example()
            if name == "article"
            else FOUR_REGION_EXAMPLE
        )
        for region, a, rho in zip(run["regions"], e["advantages"], run["ratio"]):
            side = "high" if rho > 1 else "low"
            covered.add(f"{region}/{side}" if region != "inside" else "inside")
    need = {
        "platform/high",
        "platform/low",
        "wrong_direction/high",
        "wrong_direction/low",
    }
    worst = max(max(r["package_error"], r["closed_form_error"]) for r in runs.values())
    details = dict(
        runs=runs,
        covered=sorted(covered),
        article=ARTICLE_REPORTED["surrogate_fd_max_error"],
    )
    return _result(
        "surrogate_gradient",
        worst,
        FD_TOL,
        "full softmax surrogate gradient: both platforms, both wrong directions",
        details,
        worst < FD_TOL and need <= covered,
    )


# --- Masks -----------------------------------------------------------------------------------------------------------


def invalid_input_cases() -> list:
    """``[(description, zero-argument callable)]``: inputs every function must reject with ``ValueError``.

    The first six are the article's; the rest are further boundaries of :func:`~dpo_grpo.trl_exact.grpo.grpo_loss`.
    """
    old = np.log(np.full((2, 3), 0.2))
    adv = np.array([1.0, -1.0])
    mask = np.array([[1, 0, 0], [1, 1, 1]])
    nan_valid = old.copy()
    nan_valid[0, 0] = np.nan
    return [
        ("group of one answer (G = 1)", lambda: group_advantages([[1.0]])),
        ("NaN reward", lambda: group_advantages([[1.0, np.nan]])),
        ("std guard eps = 0", lambda: group_advantages([[1.0, 2.0]], eps=0)),
        ("DPO beta = 0", lambda: dpo_loss([1.0], [2.0], [3.0], [4.0], beta=0)),
        (
            "a sequence with no valid token",
            lambda: grpo_loss(old, old, old, adv, np.zeros_like(mask)),
        ),
        (
            "mask entries other than 0/1",
            lambda: grpo_loss(old, old, old, adv, np.full_like(mask, 2)),
        ),
        (
            "NaN log-prob at a valid position",
            lambda: grpo_loss(nan_valid, old, old, adv, mask),
        ),
        (
            "exp overflow at a valid position",
            lambda: grpo_loss(old + 800.0, old, old, adv, mask),
        ),
        ("one advantage too few", lambda: grpo_loss(old, old, old, adv[:1], mask)),
    ]


def check_masks() -> CheckResult:
    """Padding cannot pollute the loss, and invalid inputs are rejected.

    (1) The article's case: advantages +1/-1, equal ratios, NaN in padding: the ``grpo`` loss is exactly 0.
    (2) A ragged batch with NaN, +inf and -inf written into the padding of the three log-prob arrays gives the same
    loss and gradient as the clean batch and as each sequence evaluated alone on its valid tokens.
    (3) Every case of :func:`invalid_input_cases` raises ``ValueError``; ``details['messages']`` holds the messages.
    Value: the largest loss difference of (1) and (2).
    """
    mask = np.array([[1, 0, 0], [1, 1, 1]])
    old = np.log(np.full((2, 3), 0.2))
    new = old + 0.1
    new[mask == 0] = np.nan
    equal_loss = grpo_loss(new, old, old, [1.0, -1.0], mask, beta=0).loss

    rng = np.random.default_rng(0)
    b, t = 4, 5
    lengths = np.array([5, 2, 4, 1])
    ragged = (np.arange(t)[None, :] < lengths[:, None]).astype(float)
    o = np.log(rng.uniform(0.05, 0.9, (b, t)))
    nw = o + rng.normal(0, 0.3, (b, t))
    rf = o + rng.normal(0, 0.2, (b, t))
    a = rng.normal(0, 1, b)
    clean = grpo_loss(nw, o, rf, a, ragged)
    dirty = [x.copy() for x in (nw, o, rf)]
    for x, junk in zip(dirty, (np.nan, np.inf, -np.inf)):
        x[ragged == 0] = junk
    polluted = grpo_loss(*dirty, a, ragged)
    alone = np.mean(
        [
            grpo_loss(
                nw[i : i + 1, :n],
                o[i : i + 1, :n],
                rf[i : i + 1, :n],
                a[i : i + 1],
                np.ones((1, n)),
            ).loss
            for i, n in enumerate(lengths)
        ]
    )
    loss_err = max(
        abs(equal_loss), abs(polluted.loss - clean.loss), abs(polluted.loss - alone)
    )
    grad_ok = bool(
        np.array_equal(polluted.grad, clean.grad)
        and np.all(polluted.grad[ragged == 0] == 0)
        and np.isfinite(polluted.grad).all()
    )

    messages, rejected = {}, 0
    cases = invalid_input_cases()
    for desc, fn in cases:
        try:
            fn()
        except ValueError as exc:
            messages[desc] = str(exc)
            rejected += 1
        else:
            messages[desc] = "NOT REJECTED"
    details = dict(
        equal_sequence_loss=equal_loss,
        ragged_clean_loss=clean.loss,
        ragged_polluted_loss=polluted.loss,
        ragged_alone_loss=float(alone),
        gradient_unchanged=grad_ok,
        rejected=rejected,
        n_cases=len(cases),
        messages=messages,
        article_rejected=ARTICLE_REPORTED["invalid_inputs_rejected"],
    )
    ok = loss_err < EXACT_TOL and grad_ok and rejected == len(cases)
    return _result(
        "masks",
        loss_err,
        EXACT_TOL,
        f"padding NaN/inf ignored; {rejected}/{len(cases)} invalid inputs rejected",
        details,
        ok,
    )


# --- Bandit ----------------------------------------------------------------------------------------------------------


def check_bandit_table(seeds=range(10)) -> CheckResult:
    """The five configurations x seeds table of final P(best action) (80 steps, two inner updates, lr 0.18).

    Passes when mean/min/max match the article to six decimals (for seeds 0..9) and the all-equal row is exactly
    0.25 for every seed. Value: the largest absolute difference from the article's six-decimal numbers.
    """
    seeds = v.sequence(seeds, "seeds")
    table = bandit_seed_table(ex.BANDIT_CONFIGS, seeds=seeds)
    diffs = [
        abs(table[name][key] - ref)
        for name, refs in ARTICLE_REPORTED["bandit"].items()
        for key, ref in zip(("mean", "min", "max"), refs)
    ]
    matches = all(
        tuple(round(table[n][k], 6) for k in ("mean", "min", "max")) == refs
        for n, refs in ARTICLE_REPORTED["bandit"].items()
    )
    ok = (seeds != list(range(10)) or matches) and table["all rewards 1"]["values"] == [
        0.25
    ] * len(seeds)
    return _result(
        "bandit_table",
        max(diffs),
        5e-7,
        f"5 configurations x {len(seeds)} seeds",
        dict(table=table),
        ok,
    )


def bandit_clip_activity(
    steps=80, group_size=32, seed=7, beta=0.02, lr=0.18, epsilon=0.2, inner_steps=2
) -> dict:
    """Replay the bandit of :func:`~dpo_grpo.reference.bandit.bandit_trajectory` and record every ratio its updates see.

    Same protocol and random stream as the package's run (``trajectory`` is compared with it in ``max_error``), but
    each inner update goes through the public :func:`~dpo_grpo.trl_exact.grpo.grpo_loss` and logs the sampled tokens' ratios
    ``pi / pi_old`` and their clip regions. Returns ``ratio_min``, ``ratio_max``, ``n_token_updates`` (steps x
    inner_steps x group_size), ``n_platform`` (token updates on a clip platform, i.e. with zero surrogate gradient),
    ``n_outside`` (ratios outside ``[1 - epsilon, 1 + epsilon]``), ``trajectory`` and ``max_error``.
    """
    steps = v.integer(steps, "steps", minimum=1)
    g = v.integer(group_size, "group_size", minimum=2)
    inner = v.integer(inner_steps, "inner_steps", minimum=1)
    eps_clip = v.scalar(epsilon, "epsilon", open_unit=True)
    lr = v.scalar(lr, "lr", positive=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    r = np.asarray(DEFAULT_REWARDS, dtype=float)
    z = np.zeros(r.size)
    ref_logp = log_softmax(z)
    ones = np.ones((g, 1))
    ratios, n_platform, history = [], 0, [softmax(z)]
    for _ in range(steps):
        old = softmax(z)
        acts = rng.choice(r.size, size=g, p=old)
        adv = group_advantages(r[acts][None, :])[0]
        for _ in range(inner):
            lp = log_softmax(z)
            out = grpo_loss(
                lp[acts, None],
                np.log(old)[acts, None],
                ref_logp[acts, None],
                adv,
                ones,
                epsilon=eps_clip,
                beta=beta,
            )
            rho = out.ratio[:, 0]
            ratios.append(rho)
            n_platform += int(
                np.sum(clip_region(rho, adv, epsilon=eps_clip) == "platform")
            )
            z = z - lr * (out.grad[:, 0] @ (np.eye(r.size)[acts] - np.exp(lp)))
        history.append(softmax(z))
    ratios = np.concatenate(ratios)
    trajectory = np.array(history)
    package = bandit_trajectory(
        steps=steps,
        group_size=g,
        seed=seed,
        beta=beta,
        lr=lr,
        epsilon=eps_clip,
        inner_steps=inner,
    )
    return dict(
        ratio_min=float(ratios.min()),
        ratio_max=float(ratios.max()),
        n_token_updates=int(ratios.size),
        n_platform=n_platform,
        n_outside=int(np.sum(np.abs(ratios - 1.0) > eps_clip)),
        trajectory=trajectory,
        max_error=max_abs_error(trajectory, package),
    )


def kl_pull_back(
    start_logits=(2.0, 0.0, 0.0, 0.0),
    steps=40,
    group_size=32,
    beta=0.5,
    lr=0.18,
    seed=0,
) -> np.ndarray:
    """All-equal rewards (zero advantages) from a policy that is *not* the uniform reference: only the sampled k3
    term acts, and it pulls the policy back. Returns the probabilities after each step, shape ``(steps + 1, A)``.
    """
    z = v.as_float_array(start_logits, "start_logits", ndim=1).copy()
    steps = v.integer(steps, "steps", minimum=1)
    g = v.integer(group_size, "group_size", minimum=2)
    lr = v.scalar(lr, "lr", positive=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    ref_logp = log_softmax(np.zeros(z.size))
    history = [softmax(z)]
    for _ in range(steps):
        lp = log_softmax(z)
        acts = rng.choice(z.size, size=g, p=np.exp(lp))
        out = grpo_loss(
            lp[acts, None],
            lp[acts, None],
            ref_logp[acts, None],
            np.zeros(g),
            np.ones((g, 1)),
            beta=beta,
        )
        z = z - lr * (out.grad[:, 0] @ (np.eye(z.size)[acts] - np.exp(lp)))
        history.append(softmax(z))
    return np.array(history)


# --- Chapter 8: counter-examples to common misconceptions --------------------------------------------------------


def sampled_group_gradient(logits, reward_table, group_size, seed, beta=0.0):
    """One on-policy GRPO gradient w.r.t. the logits of a one-step softmax policy, from one sampled group.

    Returns ``(gradient (A,), actions (G,))``. Different seeds give different gradients: the update is a random
    variable of the sampled group (unlike DPO's, which is a function of a fixed data set).
    """
    z = v.as_float_array(logits, "logits", ndim=1)
    r = v.as_float_array(reward_table, "reward_table", ndim=1)
    v.same_shape(logits=z, reward_table=r)
    g = v.integer(group_size, "group_size", minimum=2)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    lp = log_softmax(z)
    acts = rng.choice(z.size, size=g, p=np.exp(lp))
    adv = group_advantages(r[acts][None, :])[0]
    out = grpo_loss(
        lp[acts, None], lp[acts, None], lp[acts, None], adv, np.ones((g, 1)), beta=beta
    )
    return out.grad[:, 0] @ (np.eye(z.size)[acts] - np.exp(lp)), acts


def group_mean_spread(
    logits,
    reward_table,
    group_sizes=(2, 4, 16, 64),
    temperatures=(0.5, 1.0, 2.0),
    n_groups=4000,
    seed=0,
) -> list:
    """The group mean as a Monte-Carlo baseline: its mean and spread over ``n_groups`` groups per (G, T).

    Sampling at temperature T draws from ``softmax(logits / T)``, whose value is ``V_T = softmax(logits/T) . r``.
    Rows: ``{G, T, V_T, mean, std, min, max}``; the spread shrinks like ``1/sqrt(G)``, the centre moves with T.
    """
    z = v.as_float_array(logits, "logits", ndim=1)
    r = v.as_float_array(reward_table, "reward_table", ndim=1)
    v.same_shape(logits=z, reward_table=r)
    n = v.integer(n_groups, "n_groups", minimum=2)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    rows = []
    group_sizes = v.sequence(group_sizes, "group_sizes")
    for t in v.sequence(temperatures, "temperatures"):
        t = v.scalar(t, "temperatures", positive=True)
        p = softmax(z / t)
        for g in group_sizes:
            g = v.integer(g, "group_sizes", minimum=1)
            means = r[rng.choice(z.size, size=(n, g), p=p)].mean(axis=1)
            rows.append(
                dict(
                    G=g,
                    T=t,
                    V_T=float(p @ r),
                    mean=float(means.mean()),
                    std=float(means.std()),
                    min=float(means.min()),
                    max=float(means.max()),
                )
            )
    return rows


def scale_effects(rewards=(0.2, 0.8, 1.4, 0.6), eps=1e-4) -> dict:
    """How reward transformations change group advantages (hence on-policy gradients, which are linear in them).

    Keys: ``shift`` (max change under r + 100: rounding only), ``scale`` (``{a: max change under a*r}``: exact only
    as ``eps/a -> 0``), ``rank_error`` (two answers swapped by a faulty scorer), ``ties`` (two answers tied),
    ``outlier`` (one reward replaced by an outlier: the others' advantages are squeezed), ``negative`` (``-r``
    reverses every advantage).
    """
    r = v.as_float_array(rewards, "rewards", ndim=1)
    base = group_advantages(r[None, :], eps=eps)[0]
    scale = {}
    for a in (10.0, 1.0e-2, 1.0e-3, 1.0e-4):
        scale[a] = float(
            np.max(np.abs(group_advantages(a * r[None, :], eps=eps)[0] - base))
        )
    swapped = r.copy()
    i, j = int(np.argmax(r)), int(np.argsort(r)[-2])
    swapped[[i, j]] = swapped[[j, i]]
    tied = r.copy()
    tied[j] = tied[i]
    outlier = r.copy()
    outlier[int(np.argmin(r))] = -10.0
    return dict(
        base=base,
        shift=float(
            np.max(np.abs(group_advantages(r[None, :] + 100.0, eps=eps)[0] - base))
        ),
        scale=scale,
        rank_error=group_advantages(swapped[None, :], eps=eps)[0],
        ties=group_advantages(tied[None, :], eps=eps)[0],
        outlier=group_advantages(outlier[None, :], eps=eps)[0],
        negative=group_advantages(-r[None, :], eps=eps)[0],
        swapped_pair=(i, j),
    )


def clip_kl_toy(
    shared=True, rare_scale=30.0, rare_prob=1e-4, lr=0.005, max_epochs=2000, epsilon=0.2
) -> dict:
    """A softmax over 4 tokens where the clip sees only the sampled tokens while the whole distribution moves.

    Tokens 0 and 1 (probabilities 0.4 and 0.4 of the head, then 0.2 for token 2) are sampled twice each, with rewards
    1 and 0 (advantages about +1, -1); token 3 is rare (``rare_prob``) and never sampled. Logits are ``E h + b``:
    with ``shared=True`` the trainable state ``h`` is 2-D and shared by all tokens (token 3's embedding is
    ``rare_scale * (1, -1)``, aligned with the direction that raises token 0 over token 1); with ``shared=False``
    every token has its own logit (``E = I``). Gradient steps of size ``lr`` on the clipped surrogate (``beta = 0``)
    run until a sampled token first reaches a clip platform. Returns per-epoch arrays ``ratios`` (epochs, 2),
    ``kl`` (exact KL(pi || pi_old) over all tokens), ``sampled_k3`` (the k3 estimate on the sampled tokens, what a
    trainer logs), ``probs`` (epochs, 4), and ``first_clip`` (the epoch index, or None).
    """
    head = np.array([0.4, 0.4, 0.2]) * (
        1 - v.scalar(rare_prob, "rare_prob", open_unit=True)
    )
    p_old = np.append(head, rare_prob)
    shared = v.boolean(shared, "shared")
    rare_scale = v.scalar(rare_scale, "rare_scale")
    if shared:
        emb = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [rare_scale, -rare_scale]])
    else:
        emb = np.eye(4)
    lr = v.scalar(lr, "lr", positive=True)
    max_epochs = v.integer(max_epochs, "max_epochs", minimum=1)
    bias = np.log(p_old)
    state = np.zeros(emb.shape[1])
    acts = np.array([0, 0, 1, 1])
    adv = group_advantages([[1.0, 1.0, 0.0, 0.0]])[0]
    old_lp = np.log(p_old)[acts, None]
    ones = np.ones((4, 1))
    ratios, kls, k3s, probs = [], [], [], []
    first_clip = None
    for epoch in range(max_epochs):
        p = softmax(emb @ state + bias)
        lp = np.log(p)
        out = grpo_loss(
            lp[acts, None], old_lp, None, adv, ones, epsilon=epsilon, beta=0.0
        )
        state = state - lr * (out.grad[:, 0] @ (emb[acts] - p @ emb))
        p = softmax(emb @ state + bias)
        rho = p[[0, 1]] / p_old[[0, 1]]
        ratios.append(rho)
        kls.append(exact_kl(p, p_old))
        k3s.append(float(np.mean(k3(np.log(p_old[acts]) - np.log(p[acts])))))
        probs.append(p)
        if (clip_region(rho, adv[[0, 2]], epsilon=epsilon) == "platform").any():
            first_clip = epoch
            break
    return dict(
        ratios=np.array(ratios),
        kl=np.array(kls),
        sampled_k3=np.array(k3s),
        probs=np.array(probs),
        p_old=p_old,
        first_clip=first_clip,
    )


def check_clip_does_not_bound_kl() -> CheckResult:
    """With shared parameters, KL(pi || pi_old) reaches > 0.3 before any sampled ratio leaves the clip interval,
    ten times what the same update gives with per-token logits. Value: the shared model's KL at the first clip."""
    shared, separate = clip_kl_toy(shared=True), clip_kl_toy(shared=False)
    kl_s, kl_i = float(shared["kl"][-1]), float(separate["kl"][-1])
    inside_before = bool(
        np.all((shared["ratios"][:-1] >= 0.8) & (shared["ratios"][:-1] <= 1.2))
    )
    ok = (
        shared["first_clip"] is not None
        and kl_s > 0.3
        and kl_s > 10 * kl_i
        and inside_before
    )
    details = dict(
        shared_kl=kl_s,
        per_token_kl=kl_i,
        shared_epochs=shared["first_clip"],
        rare_before=float(shared["p_old"][3]),
        rare_after=float(shared["probs"][-1, 3]),
        shared_sampled_k3=float(shared["sampled_k3"][-1]),
    )
    return _result(
        "clip_does_not_bound_kl",
        kl_s,
        None,
        "KL at the first clip: shared vs per-token logits",
        details,
        ok,
    )


def trl_step_log(
    steps=25,
    group_size=16,
    beta=0.04,
    num_iterations=1,
    lr=0.1,
    seed=0,
    loss_type="grpo",
    reward_table=DEFAULT_REWARDS,
):
    """What a GRPO trainer logs on the four-action bandit: per optimisation step ``loss``, ``kl``, ``clip_ratio`` and
    the gradient norm, with ``num_iterations`` updates per rollout (TRL's name) and a reference = initial policy.

    Returns a list of dicts ``{step, iteration, loss, kl, clip_ratio, grad_norm}``, one per optimisation step.
    """
    steps = v.integer(steps, "steps", minimum=1)
    g = v.integer(group_size, "group_size", minimum=2)
    iters = v.integer(num_iterations, "num_iterations", minimum=1)
    lr = v.scalar(lr, "lr", positive=True)
    rng = np.random.default_rng(v.integer(seed, "seed", minimum=0))
    r = v.as_float_array(reward_table, "reward_table", ndim=1)
    z = np.zeros(r.size)
    ref_logp = log_softmax(z)
    ones = np.ones((g, 1))
    log = []
    for step in range(steps):
        old_lp = log_softmax(z)
        acts = rng.choice(r.size, size=g, p=np.exp(old_lp))
        adv = group_advantages(r[acts][None, :])[0]
        for it in range(iters):
            lp = log_softmax(z)
            out = grpo_loss(
                lp[acts, None],
                old_lp[acts, None],
                ref_logp[acts, None],
                adv,
                ones,
                beta=beta,
                loss_type=loss_type,
            )
            grad = out.grad[:, 0] @ (np.eye(r.size)[acts] - np.exp(lp))
            log.append(
                dict(
                    step=step,
                    iteration=it,
                    loss=out.loss,
                    kl=out.metrics.get("kl", 0.0),
                    clip_ratio=out.metrics["clip_ratio/region_mean"],
                    grad_norm=float(np.linalg.norm(grad)),
                )
            )
            z = z - lr * grad
    return log


def length_weights(
    lengths=(2, 8), advantages=(1.0, 1.0), max_completion_length=None
) -> dict:
    """Gradient weight per token, ``|d loss / d log pi(y_t)|``, and per answer for each TRL loss type, on-policy.

    ``{loss_type: {"per_token": [..], "per_answer": [..]}}`` for answers of the given ``lengths`` (one row each).
    ``grpo`` gives each answer the same total weight (short answers' tokens weigh more); ``bnpo``/``dapo`` give each
    token the same weight (long answers weigh more); ``dr_grpo`` divides by the constant ``B * max_len``.
    """
    lengths = [
        v.integer(n, "lengths", minimum=1) for n in v.sequence(lengths, "lengths")
    ]
    if not lengths:
        raise ValueError("lengths must not be empty")
    adv = v.as_float_array(advantages, "advantages", ndim=1)
    if adv.size != len(lengths):
        raise ValueError(
            f"advantages must have one entry per length ({len(lengths)}), got {adv.size}"
        )
    width = max(lengths)
    mask = (np.arange(width)[None, :] < np.array(lengths)[:, None]).astype(float)
    lp = np.log(np.full(mask.shape, 0.5))
    out = {}
    for lt in ("grpo", "bnpo", "dr_grpo", "dapo"):
        res = grpo_loss(
            lp,
            lp,
            None,
            adv,
            mask,
            beta=0.0,
            loss_type=lt,
            max_completion_length=max_completion_length,
        )
        g = np.abs(res.grad)
        out[lt] = dict(
            per_token=[float(g[i, 0]) for i in range(len(lengths))],
            per_answer=[float(g[i].sum()) for i in range(len(lengths))],
            loss=res.loss,
        )
    return out


def prompt_weight_by_pass_count(group_size=8) -> list:
    """Total advantage mass ``sum_i |A_i|`` of a group with ``k`` correct answers out of ``G`` (0/1 rewards), under
    TRL's ``scale_rewards="group"`` and ``"none"``. On-policy this is the prompt's weight in the gradient.

    Rows ``{k, pass_rate, group, none, ratio}``: dividing by the std up-weights very easy and very hard prompts.
    """
    g = v.integer(group_size, "group_size", minimum=2)
    rows = []
    for k in range(g + 1):
        rewards = np.array([1.0] * k + [0.0] * (g - k))[:, None]
        grp = float(
            np.abs(
                reward_advantages(rewards, g, scale_rewards="group").advantages
            ).sum()
        )
        none = float(
            np.abs(reward_advantages(rewards, g, scale_rewards="none").advantages).sum()
        )
        rows.append(
            dict(
                k=k,
                pass_rate=k / g,
                group=grp,
                none=none,
                ratio=grp / none if none else float("nan"),
            )
        )
    return rows


# --- The suite -------------------------------------------------------------------------------------------------------


def run_all_checks(*, bandit=True) -> dict:
    """Run every check; return ``{name: CheckResult}`` in report order. ``bandit=False`` skips the 50 bandit runs
    (about 5 s); the returned dict then has no ``bandit_table`` entry."""
    checks = [
        check_objective_identity,
        check_dpo_gradient,
        check_dpo_swap,
        check_chosen_probability_counterexample,
        check_group_enumeration,
        check_two_sample_gaps,
        check_kl,
        check_surrogate_gradient,
        check_masks,
        check_clip_does_not_bound_kl,
    ]
    if bandit:
        checks.append(check_bandit_table)
    results = {}
    for fn in checks:
        res = fn()
        results[res.name] = res
    return results


def report(results) -> str:
    """A plain-text report of :func:`run_all_checks`'s results, one line per check plus a summary line."""
    if not isinstance(results, dict) or not all(
        isinstance(r, CheckResult) for r in results.values()
    ):
        raise TypeError("results must be the dict returned by run_all_checks()")
    lines = [r.line() for r in results.values()]
    n_pass = sum(r.passed for r in results.values())
    lines.append(
        f"{n_pass}/{len(results)} checks passed (finite actions and synthetic losses; "
        f"NumPy {np.__version__})"
    )
    return "\n".join(lines)


def _jsonable(x):
    if isinstance(x, CheckResult):
        return {
            k: _jsonable(getattr(x, k))
            for k in ("name", "passed", "value", "threshold", "description", "details")
        }
    if isinstance(x, dict):
        return {str(k): _jsonable(val) for k, val in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(val) for val in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


def main(argv=None) -> int:
    """Command line: ``python -m dpo_grpo.chapters.checks [--json] [--fast]``; exit status 0 iff every check passes."""
    import argparse
    import json

    parser = argparse.ArgumentParser(
        prog="python -m dpo_grpo.chapters.checks", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--json", action="store_true", help="print the full results as JSON"
    )
    parser.add_argument(
        "--fast", action="store_true", help="skip the bandit table (50 training runs)"
    )
    args = parser.parse_args(argv)
    results = run_all_checks(bandit=not args.fast)
    print(json.dumps(_jsonable(results), indent=2) if args.json else report(results))
    return 0 if all(r.passed for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
