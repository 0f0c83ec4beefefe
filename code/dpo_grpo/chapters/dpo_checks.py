"""Chapter 9's checks of the DPO claims: the closed-form optimum, the gradient, the
swapped pair, and a chosen probability that falls while the loss falls. Each returns a
:class:`~.check_result.CheckResult`.
"""

from __future__ import annotations

import numpy as np

from .. import _validation as v
from ..i18n import N_, tr
from ..reference import examples as ex
from ..reference.dpo import max_objective_identity_error
from ..trl_exact.dpo import dpo_loss
from .check_result import ARTICLE_REPORTED, EXACT_TOL, FD_TOL, CheckResult, check_result
from .gradcheck import finite_difference, max_abs_error


def check_objective_identity(n_policies=200, seed=17) -> CheckResult:
    """``J(p) = p.r - beta KL(p||q)`` equals ``beta log Z - beta KL(p||pi*)`` for
    ``n_policies`` Dirichlet(1) policies.

    Computed here with its own formulas (``Z = sum q exp(r/beta)``), then compared with
    the package's :func:`~dpo_grpo.reference.dpo.max_objective_identity_error`. Value:
    the largest gap.
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
    return check_result(
        "objective_identity",
        errors.max(),
        EXACT_TOL,
        tr("J(p) = beta log Z - beta KL(p||pi*) over {n} random policies", n=n),
        details,
        ok,
    )


def check_dpo_gradient(h=1e-6) -> CheckResult:
    """The analytic DPO gradient (d loss / d policy log-probs) against central
    differences on the article's pairs.

    Runs the ``sigmoid`` loss (the value) and also ``hinge`` and ``robust`` (label
    smoothing 0.1) in ``details``.
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
    return check_result(
        "dpo_gradient",
        errors["sigmoid"],
        FD_TOL,
        N_("DPO analytic gradient vs finite differences"),
        details,
        max(errors.values()) < FD_TOL,
    )


def check_dpo_swap() -> CheckResult:
    """Swap the two *policy* log-probs of each pair, keep the reference: logits ``-beta
    (policy gap + ref gap)``.

    Checks the package against that closed form and ``-log sigmoid`` computed with
    ``log1p``; ``details`` also holds a pair whose swapped logit stays *positive* (the
    reference prefers the rejected answer strongly), which is why "swap implies negative
    logit" has to be checked rather than assumed. Value: the swapped loss.
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
    # a pair where the reference prefers the rejected answer by 1.0 nat and the policy
    # the chosen by 0.3
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
    return check_result(
        "dpo_swap",
        out.loss,
        None,
        N_("swapped policy log-probs: logits and loss"),
        details,
        ok,
    )


def check_chosen_probability_counterexample() -> CheckResult:
    """Chosen probability falls (0.4 -> 0.3) while the DPO loss falls: the loss sees the
    ratio, not the level.

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
    return check_result(
        "dpo_chosen_probability_drop",
        before - after,
        None,
        N_("chosen probability falls, DPO loss falls"),
        details,
        ok,
    )
