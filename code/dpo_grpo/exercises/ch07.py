"""Exercises of chapter 7 (the paper lineage)."""

from ..chapters import papers as pp
from .core import choice, code, numeric

_MATH = pp.rl_gains()["MATH"]
_GSM = pp.rl_gains()["GSM8K"]
_VOTE = pp.result("DeepSeekMath 7B", "MATH", pp.MAJORITY_64).value
_MATH_INSTRUCT = pp.result("DeepSeekMath-Instruct 7B", "MATH").value
_MATH_RL = pp.result("DeepSeekMath-RL 7B", "MATH").value

numeric(
    "07.1",
    "DeepSeekMath Table 5 (chain-of-thought): by how many percentage points did GRPO "
    "raise MATH accuracy from DeepSeekMath-Instruct 7B to DeepSeekMath-RL 7B?",
    lambda: _MATH["points"],
    mistakes={
        "relative": (
            lambda: 100 * _MATH["relative"],
            "That is the relative gain in percent; the question asks for the "
            "difference in points.",
        ),
        "relative fraction": (
            lambda: _MATH["relative"],
            "That is the relative gain; give the difference in points.",
        ),
        "voting vs instruct": (
            lambda: _VOTE - pp.result("DeepSeekMath-Instruct 7B", "MATH").value,
            "One of your two numbers comes from majority voting over 64 samples, "
            "another protocol.",
        ),
        "voting vs rl": (
            lambda: _VOTE - pp.result("DeepSeekMath-RL 7B", "MATH").value,
            "Both numbers must be Table 5's single-answer chain-of-thought results.",
        ),
        "GSM8K": (
            lambda: _GSM["points"],
            "That is the GSM8K gain; the question is about MATH.",
        ),
    },
)

choice(
    "07.2",
    f"Three DeepSeekMath results on MATH: {_MATH_INSTRUCT:.1f}% (Instruct 7B, Table "
    f"5), {_MATH_RL:.1f}% (RL 7B, Table 5) and {_VOTE:.1f}% (DeepSeekMath 7B, "
    "abstract). Which one must not be compared with the other two, and why?",
    {
        "a": (
            f"{_MATH_INSTRUCT:.1f}%: it belongs to the Instruct model, not the RL "
            "model."
        ),
        "b": f"{_MATH_RL:.1f}%: it is the abstract's headline number.",
        "c": (
            f"{_VOTE:.1f}%: it is a majority vote over 64 sampled answers, not one "
            "chain-of-thought answer per problem."
        ),
        "d": "None: all three are MATH accuracies of 7B models.",
    },
    "c",
    explanations={
        "a": (
            "Instruct and RL under the same protocol is exactly the comparison Table "
            "5 makes."
        ),
        "b": (
            f"{_MATH_RL:.1f}% is also Table 5's single-answer result for the RL "
            f"model, the same protocol as {_MATH_INSTRUCT:.1f}%."
        ),
        "d": (
            "The same benchmark and model size are not enough: check how each number "
            "was measured."
        ),
    },
)

numeric(
    "07.3",
    "From the Table 5 MATH numbers (46.8% -> 51.7%): by what fraction did the error "
    "rate (100% - accuracy) fall? Give a number between 0 and 1.",
    lambda: _MATH["error_reduction"],
    mistakes={
        "relative accuracy": (
            lambda: _MATH["relative"],
            "That is the relative gain in accuracy; the question asks about the error "
            "rate.",
        ),
        "points": (
            lambda: _MATH["points"],
            "That is the gain in points; divide by the error rate before training.",
        ),
        "after error": (
            lambda: (
                _MATH["points"] / (100 - pp.result("DeepSeekMath-RL 7B", "MATH").value)
            ),
            "Divide the drop in error by the error rate before RL, not after.",
        ),
        "GSM8K": (
            lambda: _GSM["error_reduction"],
            "That is the GSM8K error reduction; the question is about MATH.",
        ),
    },
)


def _arxiv_month(arxiv_id):
    yymm = arxiv_id.split(".")[0]
    return 2000 + int(yymm[:2]), int(yymm[2:])


def _draw_arxiv_id(rng):
    """A new-style arXiv id 'YYMM.NNNNN' drawn at grading time."""
    return (
        f"{int(rng.integers(7, 26)):02d}{int(rng.integers(1, 13)):02d}."
        f"{int(rng.integers(1, 99999)):05d}",
    )


code(
    "07.4",
    "Implement arxiv_month(arxiv_id): the (year, month) encoded in a new-style arXiv "
    "id 'YYMM.NNNNN', e.g. '1707.06347' -> (2017, 7).",
    _arxiv_month,
    cases=[(p.arxiv,) for p in pp.PAPERS] + [("0704.0001",), ("1412.6980",)],
    mistakes={
        "19xx": (
            lambda a: (1900 + int(a[:2]), int(a[2:4])),
            "The two-digit year belongs to the 2000s.",
        ),
        "swapped": (
            lambda a: (2000 + int(a[2:4]), int(a[:2])),
            "The first two digits are the year, then the month.",
        ),
    },
    draw=_draw_arxiv_id,
)

choice(
    "07.5",
    "Team A reports that its GRPO-trained model beats team B's DPO-trained model by 3 "
    "points on MATH. What does this tell you about GRPO versus DPO?",
    {
        "a": "GRPO is the stronger algorithm for mathematics.",
        "b": (
            "Little: base models, data, compute and evaluation protocols differ, and "
            "the algorithm name alone does not decide final capability."
        ),
        "c": "DPO needs about 3 points more data to catch up.",
    },
    "b",
    explanations={
        "a": (
            "Each number comes from its own setting; a cross-paper comparison does "
            "not isolate the algorithm."
        ),
        "c": "Nothing in the two numbers measures data requirements.",
    },
)
