"""The chain of methods read from a sweep's results (:mod:`dpo_grpo.lab.sweep`):
offline RFT -> online RFT -> RLOO -> GRPO -> PPO, each step one ingredient.

:func:`verdict_family` puts every verdict the lab page states (each method's gain over
its SFT start, each difference of :data:`dpo_grpo.lab.sweep.PAIRS`, on sampled pass@1
and on greedy) into one family and calls a direction only where the t-test's p-value
survives Holm's correction over the whole family (:func:`dpo_grpo.stats.holm`); each
row keeps the sign test's ahead, behind and tied seeds apart. :func:`budget_to_reach`
says how much of a budget axis (completions sampled, or completion-token passes
forward + backward) each seed of a method needed to reach a target pass rate.
:func:`class_breakdown` splits the held-out pass rate into the prompts whose answer
needs a carry and those that need none, and counts the seeds where a method lowered
its no-carry pass rate below the SFT start (forgetting).
"""

from __future__ import annotations

import numpy as np

from .. import _validation as v
from ..stats import holm, sign_test

#: the chain, one ingredient a step: what each adds to the one before
CHAIN = ("rft", "online_rft", "rloo", "grpo", "ppo")
#: the budget axes :func:`budget_to_reach` reads: a run record's eval curves summed
AXES = {
    "completions": ("eval_completions_sampled",),
    "token_passes": ("eval_forward_tokens", "eval_backward_tokens"),
}
LEVEL = 0.05


def _t_p(d) -> float:
    """Two-sided p-value of the one-sample t-test of mean ``d`` = 0 (1 when every
    difference is 0, NaN bounds avoided)."""
    from scipy import stats

    d = np.asarray(d, dtype=float)
    if len(d) < 2 or np.all(d == d[0]):
        return 1.0 if np.all(d == 0) else 0.0
    return float(stats.ttest_1samp(d, 0.0).pvalue)


def verdict_family(results, metrics=("final_sampled", "final_greedy")) -> list:
    """One row per verdict the page states, for each of ``metrics``: the gain of every
    method over its SFT start (``b`` None) and every pair of
    :data:`~dpo_grpo.lab.sweep.PAIRS` present. Each row: ``a``, ``b``, ``metric``,
    the t-interval (:func:`~dpo_grpo.lab.sweep.paired`), ``ahead``/``behind``/``ties``
    and ``sign_p`` (:func:`~dpo_grpo.stats.sign_test`), ``t_p`` and ``holm_p`` (Holm
    over every row), and ``direction``: ``"ahead"``/``"behind"`` when ``holm_p <
    0.05``, else ``"not separated"``."""
    from .sweep import PAIRS, gain, paired

    rows = []
    for metric in metrics:
        for m in results["runs"]:
            rows.append(
                {"a": m, "b": None, "metric": metric, **gain(results, m, metric)}
            )
        for a, b in PAIRS:
            if a in results["runs"] and b in results["runs"]:
                rows.append(
                    {"a": a, "b": b, "metric": metric, **paired(results, a, b, metric)}
                )
    adjusted = holm([_t_p(r["differences"]) for r in rows]) if rows else []
    for r, p in zip(rows, adjusted):
        r["t_p"] = _t_p(r["differences"])
        r["holm_p"] = p
        r.update(sign_test(r["differences"]))
        r["unadjusted"] = r["direction"]
        if p >= LEVEL:
            r["direction"] = "not separated"
        else:
            r["direction"] = "ahead" if r["mean"] > 0 else "behind"
    return rows


def find(rows, a, b, metric) -> dict:
    """The row of :func:`verdict_family` for ``a`` against ``b`` (None: its start)."""
    for r in rows:
        if (r["a"], r["b"], r["metric"]) == (a, b, metric):
            return r
    raise ValueError(f"no verdict for {a!r} - {b!r} on {metric!r}")


def _curve(rec, kind: str) -> list:
    return rec[
        "heldout_pass_rate_sampled" if kind == "sampled" else "heldout_pass_rate"
    ]


def budget_to_reach(
    results, method: str, target: float, *, axis="completions", kind="sampled"
) -> dict:
    """Per seed of ``method``, the budget spent (``axis``: ``"completions"`` sampled
    or ``"token_passes"``, forward + backward completion tokens) at its first
    evaluation whose ``kind`` (``"sampled"`` pass@1 or ``"greedy"``) held-out pass rate
    is at least ``target``; None where no evaluation reaches it. Returns ``per_seed``,
    ``reached`` (count), ``n`` and the t-interval of the reached budgets
    (:func:`~dpo_grpo.lab.sweep.t_interval`; NaN bounds below two)."""
    from .sweep import t_interval

    v.choice(axis, "axis", tuple(AXES))
    v.choice(kind, "kind", ("sampled", "greedy"))
    v.scalar(target, "target", nonnegative=True, maximum=1)
    if method not in results["runs"]:
        raise ValueError(
            f"method must be one of {list(results['runs'])}, got {method!r}"
        )
    per_seed = []
    for rec in results["runs"][method]:
        if AXES[axis][0] not in rec:
            raise ValueError(f"the results hold no {axis} curve (format 3 has one)")
        spent = np.sum([rec[k] for k in AXES[axis]], axis=0)
        hit = [i for i, x in enumerate(_curve(rec, kind)) if x >= target]
        per_seed.append(float(spent[hit[0]]) if hit else None)
    reached = [x for x in per_seed if x is not None]
    out = {"per_seed": per_seed, "reached": len(reached), "n": len(per_seed)}
    if reached:
        out.update(t_interval(reached))
        out["n"] = len(per_seed)
    return out


def budget_spent(results, method: str, axis="completions") -> float:
    """The mean over seeds of a whole run's ``axis`` budget (its last evaluation)."""
    v.choice(axis, "axis", tuple(AXES))
    return float(
        np.mean(
            [sum(rec[k][-1] for k in AXES[axis]) for rec in results["runs"][method]]
        )
    )


def class_breakdown(results, methods=CHAIN, kind="sampled") -> dict:
    """Per method: ``{cls: {"start", "final", "gain"}}`` for ``cls`` in ``"carry"``,
    ``"nocarry"`` (means over seeds of the ``kind`` held-out pass rate of that class's
    prompts) plus ``forgot``, the seeds whose final no-carry pass rate is below their
    start, and ``n`` seeds."""
    v.choice(kind, "kind", ("sampled", "greedy"))
    part = "heldout_pass_rate_sampled_" if kind == "sampled" else "heldout_pass_rate_"
    out = {}
    for m in methods:
        rows = results["runs"][m]
        out[m] = {"n": len(rows)}
        for cls in ("carry", "nocarry"):
            curves = [r[part + cls] for r in rows]
            start = float(np.mean([c[0] for c in curves]))
            final = float(np.mean([c[-1] for c in curves]))
            out[m][cls] = {"start": start, "final": final, "gain": final - start}
        out[m]["forgot"] = int(
            sum(r[part + "nocarry"][-1] < r[part + "nocarry"][0] for r in rows)
        )
    return out
