"""The hands-on verification suite of chapter 9: run every check, report, and the
command line.

:func:`run_all_checks` runs the checks of :mod:`.dpo_checks` and :mod:`.grpo_checks` and
returns ``{name: CheckResult}``; ``python -m dpo_grpo.chapters.checks`` prints a report
(``--json`` prints the results as JSON, ``--fast`` skips the 50 bandit runs).

Scope: finite action sets and synthetic losses only. Nothing here trains a language
model or a video model; the checks establish that the formulas and their implementation
agree, not how training behaves at scale. Errors are measured in float64 and depend on
the machine and the NumPy build; finite-difference errors must stay below
:data:`~.check_result.FD_TOL`.
"""

from __future__ import annotations

import numpy as np

from ..i18n import tr
from .check_result import CheckResult
from .dpo_checks import (
    check_chosen_probability_counterexample,
    check_dpo_gradient,
    check_dpo_swap,
    check_objective_identity,
)
from .grpo_checks import (
    check_bandit_table,
    check_clip_does_not_bound_kl,
    check_group_enumeration,
    check_kl,
    check_masks,
    check_surrogate_gradient,
    check_two_sample_gaps,
)


def run_all_checks(*, bandit=True) -> dict:
    """Run every check; return ``{name: CheckResult}`` in report order. ``bandit=False``
    skips the 50 bandit runs (about 5 s); the returned dict then has no ``bandit_table``
    entry."""
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
    """A plain-text report of :func:`run_all_checks`'s results, one line per check plus
    a summary line."""
    if not isinstance(results, dict) or not all(
        isinstance(r, CheckResult) for r in results.values()
    ):
        raise TypeError("results must be the dict returned by run_all_checks()")
    lines = [r.line() for r in results.values()]
    n_pass = sum(r.passed for r in results.values())
    lines.append(
        tr(
            "{n_pass}/{n} checks passed (finite actions and synthetic losses; "
            "NumPy {numpy})",
            n_pass=n_pass,
            n=len(results),
            numpy=np.__version__,
        )
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
    """Command line: ``python -m dpo_grpo.chapters.checks [--json] [--fast]``; exit
    status 0 iff every check passes."""
    import argparse
    import json

    parser = argparse.ArgumentParser(
        prog="python -m dpo_grpo.chapters.checks",
        description="The hands-on verification suite of chapter 9.",
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
