"""The record a check of chapter 9 returns, the tolerances it is held to, and the
numbers the article reports.

A check either recomputes one claim of the book independently of the code it checks or
compares the package's output with :data:`ARTICLE_REPORTED`; it returns a
:class:`CheckResult` (the measured value, usually a maximum absolute error, the
threshold it must stay below, and the intermediate numbers in ``details``). Errors are
measured in float64 and depend on the machine and the NumPy build.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..i18n import tr

#: central finite differences with h = 1e-6 must agree with an analytic gradient to this
#: absolute error
FD_TOL = 1e-8
#: identities evaluated in float64 (a few roundings of O(1) numbers) must hold to this
#: absolute error
EXACT_TOL = 1e-12

#: What the article reports (its Windows / Python 3.11.9 / NumPy 2.4.3 machine). Our
#: runs are compared with these: the bandit table and the two-sample advantages must
#: match to six decimals; errors are machine-dependent and are only required to stay
#: below the thresholds.
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


@dataclass(frozen=True)
class CheckResult:
    """One verified claim: ``passed`` iff ``value`` satisfies the check's criterion
    (usually ``value < threshold``)."""

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
        """One report line: PASS/FAIL, name, measured value and threshold; words in the
        reader's language (:func:`dpo_grpo.i18n.tr`), the name (a key) as it is. A value
        below :data:`EXACT_TOL` is float64 rounding and shows as that bound
        (``< 1e-12``), not as its digits."""
        thr = (
            ""
            if self.threshold is None
            else tr(" (threshold {threshold:.0e})", threshold=self.threshold)
        )
        status = tr("PASS") if self.passed else tr("FAIL")
        value = (
            f"{self.value:.3e}"
            if abs(self.value) >= EXACT_TOL
            else f"{'< ' + format(EXACT_TOL, '.0e'):>9}"
        )
        return f"{status}  {self.name:<28} {value}{thr}  {tr(self.description)}"


def check_result(name, value, threshold, description, details, passed=None):
    """A :class:`CheckResult`; ``passed`` defaults to ``value < threshold``."""
    value = float(value)
    ok = (value < threshold) if passed is None else bool(passed)
    return CheckResult(name, bool(ok), value, threshold, description, details)
