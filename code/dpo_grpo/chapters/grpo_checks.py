"""Chapter 9's checks of the GRPO claims: the enumerated group baselines, the two-sample
advantages, the k3 KL estimator, the surrogate gradient over the full softmax, the
masks, the bandit table and the clip that does not bound the KL. Each ``check_*``
returns a :class:`~.check_result.CheckResult`.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import _validation as v
from ..i18n import N_, tr
from ..reference import examples as ex
from ..reference.advantages import group_advantages
from ..reference.bandit import bandit_seed_table
from ..reference.baselines import enumerate_group_gradients
from ..reference.kl import exact_kl, k3, k3_surrogate_grad_logits, kl_grad_logits
from ..reference.softmax import log_softmax, softmax
from ..trl_exact.dpo import dpo_loss
from ..reference.grpo import clip_region
from ..trl_exact.grpo import grpo_loss
from .check_result import ARTICLE_REPORTED, EXACT_TOL, FD_TOL, CheckResult, check_result
from .gradcheck import finite_difference, max_abs_error
from .misconceptions import clip_kl_toy

#: A full 4-action softmax in which one sampled token sits in each of the four
#: off-centre regions of the clip: both platforms (A > 0, rho > 1 + eps; A < 0, rho < 1
#: - eps) and both wrong-direction cases (A < 0, rho > 1 + eps; A > 0, rho < 1 - eps).
#: The article's example
#: (:func:`dpo_grpo.reference.examples.surrogate_gradient_example`) has both platforms
#: but only the first wrong-direction case, so the suite runs both.
FOUR_REGION_EXAMPLE = {
    "actions": np.array([0, 1, 2, 3]),
    "old_probs": np.array([0.1, 0.1, 0.4, 0.4]),
    "ref_probs": np.full(4, 0.25),
    "new_probs": np.array([0.2, 0.25, 0.3, 0.25]),  # ratios 2.0, 2.5, 0.75, 0.625
    "advantages": np.array([1.0, -0.7, -0.9, 0.6]),
    "beta": 0.04,
}


# --- Group baselines ------------------------------------------------------------------


def check_group_enumeration(eps=1e-4) -> CheckResult:
    """All ``3**3 = 27`` ordered groups, enumerated here with a plain loop and compared
    with the package.

    Checks: centred advantages give ``(1 - 1/G)`` x the true gradient, leave-one-out
    gives it exactly, and the standardised gradient is *not* a multiple of it (its
    component ratios differ by more than 0.01). Value: the largest of the identity
    errors and the loop-vs-package errors.
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
    return check_result(
        "group_enumeration",
        worst,
        EXACT_TOL,
        tr("{count} groups: centred, leave-one-out, standardised", count=count),
        details,
        ok,
    )


def two_sample_gap_table(gaps=ex.TWO_SAMPLE_GAPS, eps=1e-4) -> list:
    """Rows ``{gap, advantage, formula, error, advantage_ddof1}`` for the groups ``[0,
    d]``.

    Population std of ``[0, d]`` is ``d/2``, so the positive advantage is ``(d/2)/(d/2 +
    eps) = d/(d + 2 eps)``; with the sample std (``ddof=1``, TRL) it is ``(d/2)/(d/sqrt
    2 + eps)``.
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
    """:func:`two_sample_gap_table` for the article's gaps: the formula holds and the
    values match the article."""
    rows = two_sample_gap_table()
    err = max(row["error"] for row in rows)
    rounded = tuple(round(row["advantage"], 6) for row in rows)
    ok = err < EXACT_TOL and rounded == ARTICLE_REPORTED["two_sample_advantages"]
    return check_result(
        "two_sample_gaps",
        err,
        EXACT_TOL,
        N_("[0, d]: advantage = d / (d + 2 eps)"),
        dict(rows=rows),
        ok,
    )


# --- KL -------------------------------------------------------------------------------


def _k3_sum(z, q, weights, ratio_to=None):
    """``sum_a weights_a * w_a * k3_a`` at logits z; ``w = softmax(z)/ratio_to``
    (undetached) if given, else 1."""
    p = softmax(z)
    k = np.expm1(np.log(q / p)) - np.log(q / p)
    w = 1.0 if ratio_to is None else p / ratio_to
    return float(np.sum(weights * w * k))


def check_kl(h=1e-6) -> CheckResult:
    """Value and gradient of the k3 estimator on the article's three-action example
    (section 3.5).

    Values: E_p[k3] = KL(p||q); E_old[k3] != KL; E_old[(p/old) k3] = KL. Gradients
    (finite differences of the sums with the samples' weights held fixed): the
    undetached ratio-weighted sum has the true KL gradient; a detached ratio misses a
    term; the bare sum at samples from p has gradient ``p - q``, which is not the KL
    gradient. Value: the corrected-gradient error (finite differences vs the analytic KL
    gradient).
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
    # the gaps' names are printed (chapter 9): shown through tr
    gaps = {
        N_("detached - true gradient"): max_abs_error(detached_grad, true_grad),
        N_("bare (p - q) - true gradient"): max_abs_error(self_grad, true_grad),
        N_("old-sampled bare - true gradient"): max_abs_error(old_bare_grad, true_grad),
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
    return check_result(
        "kl_value_and_gradient",
        errors["corrected gradient (fd) - true gradient"],
        FD_TOL,
        N_("k3: ratio-weighted value and gradient are exact, bare/detached are not"),
        details,
        ok,
    )


# --- GRPO surrogate -------------------------------------------------------------------


def surrogate_gradient_error(example, epsilon=0.2, h=1e-6) -> dict:
    """Full-softmax check of the GRPO token loss for one sampled token per action
    (``example`` as in :func:`dpo_grpo.reference.examples.surrogate_gradient_example`).

    ``loss(z) = grpo_loss(log softmax(z)[actions], old, ref, A, beta)``; its gradient
    w.r.t. the logits is compared by central differences with (1) the package's ``grad``
    chained through the softmax Jacobian ``e_a - p`` and (2) an independent closed form:
    per token ``c = -1[active] rho A + beta (1 - pi_ref/pi)``, gradient ``mean_i c_i
    (e_{a_i}
    - p)``, ``active`` = not on a clip platform. Returns errors, ratios and clip
      regions.
    """
    keys = ("actions", "old_probs", "ref_probs", "new_probs", "advantages", "beta")
    if not isinstance(example, dict):
        raise TypeError(
            "example must be a dict like surrogate_gradient_example()'s, "
            f"got {type(example).__name__}"
        )
    if any(k not in example for k in keys):
        raise ValueError(
            f"example must have the keys {keys}, "
            f"missing {[k for k in keys if k not in example]}"
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
    """The full four-action surrogate gradient on the article's example and on
    :data:`FOUR_REGION_EXAMPLE`.

    Passes when every error is below :data:`FD_TOL` and, together, the examples put a
    token on both clip platforms and in both wrong-direction regions (high side: A < 0,
    rho > 1 + eps; low side: A > 0, rho < 1 - eps). Value: the largest error.
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
    return check_result(
        "surrogate_gradient",
        worst,
        FD_TOL,
        N_("full softmax surrogate gradient: both platforms, both wrong directions"),
        details,
        worst < FD_TOL and need <= covered,
    )


# --- Masks ----------------------------------------------------------------------------


def invalid_input_cases() -> list:
    """``[(description, zero-argument callable)]``: inputs every function must reject
    with ``ValueError``.

    The first six are the article's; the rest are further boundaries of
    :func:`~dpo_grpo.trl_exact.grpo.grpo_loss`.
    """
    old = np.log(np.full((2, 3), 0.2))
    adv = np.array([1.0, -1.0])
    mask = np.array([[1, 0, 0], [1, 1, 1]])
    nan_valid = old.copy()
    nan_valid[0, 0] = np.nan
    return [
        (N_("group of one answer (G = 1)"), lambda: group_advantages([[1.0]])),
        (N_("NaN reward"), lambda: group_advantages([[1.0, np.nan]])),
        (N_("std guard eps = 0"), lambda: group_advantages([[1.0, 2.0]], eps=0)),
        (N_("DPO beta = 0"), lambda: dpo_loss([1.0], [2.0], [3.0], [4.0], beta=0)),
        (
            N_("a sequence with no valid token"),
            lambda: grpo_loss(old, old, old, adv, np.zeros_like(mask)),
        ),
        (
            N_("mask entries other than 0/1"),
            lambda: grpo_loss(old, old, old, adv, np.full_like(mask, 2)),
        ),
        (
            N_("NaN log-prob at a valid position"),
            lambda: grpo_loss(nan_valid, old, old, adv, mask),
        ),
        (
            N_("exp overflow at a valid position"),
            lambda: grpo_loss(old + 800.0, old, old, adv, mask),
        ),
        (N_("one advantage too few"), lambda: grpo_loss(old, old, old, adv[:1], mask)),
    ]


def check_masks() -> CheckResult:
    """Padding cannot pollute the loss, and invalid inputs are rejected.

    (1) The article's case: advantages +1/-1, equal ratios, NaN in padding: the ``grpo``
    loss is 0 to float64 rounding. (2) A ragged batch with NaN, +inf and -inf written
    into the padding of the three log-prob arrays gives the same loss and gradient as
    the clean batch and as each sequence evaluated alone on its valid tokens. (3) Every
    case of :func:`invalid_input_cases` raises ``ValueError``; ``details['messages']``
    holds the messages. Value: the largest loss difference of (1) and (2).
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
    return check_result(
        "masks",
        loss_err,
        EXACT_TOL,
        tr(
            "padding NaN/inf ignored; {rejected}/{n} invalid inputs rejected",
            rejected=rejected,
            n=len(cases),
        ),
        details,
        ok,
    )


# --- Bandit ---------------------------------------------------------------------------


def check_bandit_table(seeds=range(10)) -> CheckResult:
    """The five configurations x seeds table of final P(best action) (80 steps, two
    inner updates, lr 0.18).

    Passes when mean/min/max match the article to six decimals (for seeds 0..9) and the
    all-equal row is exactly 0.25 for every seed. Value: the largest absolute difference
    from the article's six-decimal numbers.
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
    return check_result(
        "bandit_table",
        max(diffs),
        5e-7,
        tr("5 configurations x {n} seeds", n=len(seeds)),
        dict(table=table),
        ok,
    )


def check_clip_does_not_bound_kl() -> CheckResult:
    """With shared parameters, KL(pi || pi_old) reaches > 0.3 before any sampled ratio
    leaves the clip interval, ten times what the same update gives with per-token
    logits. Value: the shared model's KL at the first clip."""
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
    return check_result(
        "clip_does_not_bound_kl",
        kl_s,
        None,
        N_("KL at the first clip: shared vs per-token logits"),
        details,
        ok,
    )
