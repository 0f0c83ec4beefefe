"""The paper lineage of chapter 7 as data: four papers, what each introduced, and the
results the book quotes.

Quoted results are quotations, so they are stored here as data (percentages exactly as
printed in the paper), each with the paper's own evaluation protocol. Everything the
chapter *derives* from them (gains in points, error reductions, which pairs may be
compared) is computed by the functions below. The publication month of each paper is
read from its arXiv identifier (``YYMM.NNNNN``), and the timeline figure is drawn from
this data.
"""

from __future__ import annotations

import re
import textwrap
from typing import NamedTuple

from .. import _validation as v
from ..i18n import N_, check_glyphs, language, tr, use_cjk_matplotlib_font


class Paper(NamedTuple):
    key: str  #: citation key in book/references.bib
    short: str
    title: str
    arxiv: str
    year: int
    introduced: str  #: what the paper introduced (English, marked with N_)
    role: str  #: its role in the DPO-to-GRPO lineage

    def introduced_text(self) -> str:
        """What the paper introduced, in the reader's language."""
        return tr(self.introduced)


class Result(NamedTuple):
    """One quoted number: ``value`` percent of ``model`` on ``benchmark`` under
    ``protocol`` (paper, location)."""

    paper: str  #: Paper.key
    source: str  #: where in the paper
    model: str
    benchmark: str
    protocol: str
    value: float  #: percent, as printed

    def protocol_text(self) -> str:
        """The evaluation protocol, in the reader's language."""
        return tr(self.protocol)

    def source_text(self) -> str:
        """Where in the paper, in the reader's language."""
        return tr(self.source)


PAPERS = (
    Paper(
        "schulman2017ppo",
        "PPO",
        "Proximal Policy Optimization Algorithms",
        "1707.06347",
        2017,
        N_(
            "a clipped surrogate objective that lets several epochs of updates reuse "
            "one batch of rollouts"
        ),
        "the direct source of GRPO's probability ratio and clip",
    ),
    Paper(
        "rafailov2023dpo",
        "DPO",
        "Direct Preference Optimization: Your Language Model is Secretly a Reward "
        "Model",
        "2305.18290",
        2023,
        N_(
            "the closed-form optimum of KL-regularised RLHF turns preference learning "
            "into binary classification"
        ),
        "trains from offline pairs, with no online RL loop and no explicit reward "
        "model",
    ),
    Paper(
        "shao2024deepseekmath",
        "DeepSeekMath",
        "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language "
        "Models",
        "2402.03300",
        2024,
        N_(
            "GRPO: the scores of a group of answers to the same question replace the "
            "value model"
        ),
        "keeps PPO's online sampling and clip, drops the critic",
    ),
    Paper(
        "deepseek2025r1",
        "DeepSeek-R1",
        "DeepSeek-R1: Incentivizing Reasoning Capability in LLMs via Reinforcement "
        "Learning",
        "2501.12948",
        2025,
        N_("large-scale GRPO for long chains of reasoning with verifiable rewards"),
        "made group-relative optimisation a standard baseline for training reasoning "
        "models",
    ),
)

#: the protocols of the quoted results
CHAIN_OF_THOUGHT = N_("chain-of-thought, one answer per problem")
MAJORITY_64 = N_("self-consistency: majority vote over 64 sampled answers")
#: where in the paper
TABLE_5, ABSTRACT = N_("Table 5"), N_("abstract")

RESULTS = (
    Result(
        "shao2024deepseekmath",
        TABLE_5,
        "DeepSeekMath-Instruct 7B",
        "GSM8K",
        CHAIN_OF_THOUGHT,
        82.9,
    ),
    Result(
        "shao2024deepseekmath",
        TABLE_5,
        "DeepSeekMath-RL 7B",
        "GSM8K",
        CHAIN_OF_THOUGHT,
        88.2,
    ),
    Result(
        "shao2024deepseekmath",
        TABLE_5,
        "DeepSeekMath-Instruct 7B",
        "MATH",
        CHAIN_OF_THOUGHT,
        46.8,
    ),
    Result(
        "shao2024deepseekmath",
        TABLE_5,
        "DeepSeekMath-RL 7B",
        "MATH",
        CHAIN_OF_THOUGHT,
        51.7,
    ),
    Result(
        "shao2024deepseekmath", ABSTRACT, "DeepSeekMath 7B", "MATH", MAJORITY_64, 60.9
    ),
    Result(
        "shao2024deepseekmath",
        TABLE_5,
        "DeepSeekMath-Instruct 7B",
        "MGSM-zh",
        CHAIN_OF_THOUGHT,
        73.2,
    ),
    Result(
        "shao2024deepseekmath",
        TABLE_5,
        "DeepSeekMath-RL 7B",
        "MGSM-zh",
        CHAIN_OF_THOUGHT,
        79.6,
    ),
    Result(
        "shao2024deepseekmath",
        TABLE_5,
        "DeepSeekMath-Instruct 7B",
        "CMATH",
        CHAIN_OF_THOUGHT,
        84.6,
    ),
    Result(
        "shao2024deepseekmath",
        TABLE_5,
        "DeepSeekMath-RL 7B",
        "CMATH",
        CHAIN_OF_THOUGHT,
        88.8,
    ),
)

#: the benchmarks whose training questions DeepSeekMath's RL stage used (its section
#: 4.2: chain-of-thought questions related to GSM8K and MATH from the SFT data); the
#: Chinese benchmarks MGSM-zh and CMATH are out of domain for RL
RL_IN_DOMAIN = ("GSM8K", "MATH")
BENCHMARK_ORDER = ("GSM8K", "MATH", "MGSM-zh", "CMATH")

#: training settings of DeepSeekMath's GRPO run (its section 4.2), also quotations
DEEPSEEKMATH_RL_SETTINGS = {
    "samples_per_question": 64,
    "max_length": 1024,
    "updates_per_exploration": 1,
}

#: DeepSeek-R1's KL coefficient, the one setting of its GRPO run that TRL 1.16.0's
#: ``GRPOConfig.beta`` documentation cites (a quotation; its learning rate, group size
#: and lengths are in the paper)
R1_KL_BETA = 0.001

#: who built on whom: (from, to, what was inherited)
LINEAGE = (
    ("schulman2017ppo", "shao2024deepseekmath", N_("ratio + clip")),
    (
        "schulman2017ppo",
        "rafailov2023dpo",
        N_("PPO-RLHF's objective, solved in closed form"),
    ),
    ("shao2024deepseekmath", "deepseek2025r1", N_("GRPO at scale")),
)

_ARXIV = re.compile(r"^(\d{2})(\d{2})\.(\d{4,5})(v\d+)?$")


def arxiv_month(arxiv_id: str) -> tuple:
    """``(year, month)`` of first submission encoded in a new-style arXiv id, e.g.
    ``"1707.06347"`` -> (2017, 7)."""
    if not isinstance(arxiv_id, str):
        raise TypeError(f"arxiv_id must be a string, got {type(arxiv_id).__name__}")
    m = _ARXIV.match(arxiv_id.strip())
    if not m:
        raise ValueError(f"arxiv_id must look like 'YYMM.NNNNN', got {arxiv_id!r}")
    month = int(m.group(2))
    if not 1 <= month <= 12:
        raise ValueError(f"arxiv_id has month {month}, which is not in 1..12")
    return 2000 + int(m.group(1)), month


def paper(key_or_short: str) -> Paper:
    """The paper with this citation key or short name."""
    for p in PAPERS:
        if key_or_short in (p.key, p.short):
            return p
    raise ValueError(
        f"unknown paper {key_or_short!r}; known: {[p.short for p in PAPERS]}"
    )


def result(model: str, benchmark: str, protocol: str = CHAIN_OF_THOUGHT) -> Result:
    """The quoted result for ``model`` on ``benchmark`` under ``protocol``."""
    for r in RESULTS:
        if (r.model, r.benchmark, r.protocol) == (model, benchmark, protocol):
            return r
    raise ValueError(
        f"no quoted result for {model!r} on {benchmark!r} under {protocol!r}"
    )


def comparable(a: Result, b: Result) -> tuple:
    """``(ok, reason)``: two results may be compared only on the same benchmark, under
    the same protocol, from the same paper's setting. The reason names the first
    difference."""
    for x, name in ((a, "a"), (b, "b")):
        if not isinstance(x, Result):
            raise TypeError(f"{name} must be a Result, got {type(x).__name__}")
    if a.benchmark != b.benchmark:
        return False, tr(
            "different benchmarks ({a} vs {b})", a=a.benchmark, b=b.benchmark
        )
    if a.protocol != b.protocol:
        return False, tr(
            "different evaluation protocols ({a} vs {b})",
            a=tr(a.protocol),
            b=tr(b.protocol),
        )
    if a.paper != b.paper:
        return False, tr("different papers, hence different models, data and settings")
    return True, tr("same paper, benchmark and protocol")


def gain(before: Result, after: Result) -> dict:
    """Gain from ``before`` to ``after`` (comparable results only): points, relative
    gain, error-rate reduction."""
    ok, reason = comparable(before, after)
    if not ok:
        raise ValueError(f"these results are not comparable: {reason}")
    for x, name in ((before, "before"), (after, "after")):
        if (
            isinstance(x.value, bool)
            or not isinstance(x.value, (int, float))
            or not 0 <= x.value <= 100
        ):
            raise ValueError(
                f"{name}.value must be a percentage in [0, 100], got {x.value!r}"
            )
    if not 0 < before.value < 100:
        raise ValueError(
            "before.value must lie strictly between 0 and 100 (it divides the "
            f"relative gain and the error-rate reduction), got {before.value!r}"
        )
    points = after.value - before.value
    return {
        "points": points,
        "relative": points / before.value,
        "error_reduction": (after.value - before.value) / (100.0 - before.value),
    }


def rl_gains(benchmarks=RL_IN_DOMAIN) -> dict:
    """DeepSeekMath Table 5: Instruct -> RL gains (chain-of-thought) on ``benchmarks``
    (default: the in-domain GSM8K and MATH; ``BENCHMARK_ORDER`` adds the out-of-domain
    MGSM-zh and CMATH)."""
    benchmarks = v.sequence(benchmarks, "benchmarks")
    return {
        bench: gain(
            result("DeepSeekMath-Instruct 7B", bench),
            result("DeepSeekMath-RL 7B", bench),
        )
        for bench in benchmarks
    }


def timeline_figure(ax=None):
    """Draw the four papers on a time axis (month from the arXiv id), what each
    introduced, and the lineage arcs labelled with what was inherited; returns the
    matplotlib figure."""
    import matplotlib.pyplot as plt
    import numpy as np

    use_cjk_matplotlib_font()
    if ax is None:
        fig, ax = plt.subplots(figsize=(9.5, 5.6))
    else:
        fig = ax.figure
    xs = {}
    for p in PAPERS:
        year, month = arxiv_month(p.arxiv)
        xs[p.key] = year + (month - 0.5) / 12
    lo, hi = min(xs.values()) - 0.9, max(xs.values()) + 0.9
    colors = {
        "schulman2017ppo": "#b91c1c",
        "rafailov2023dpo": "#15803d",
        "shao2024deepseekmath": "#1d4ed8",
        "deepseek2025r1": "#7c3aed",
    }
    ax.axhline(0, color="#334155", lw=1.2, zorder=1)
    for year in range(int(lo) + 1, int(hi) + 1):
        ax.plot([year, year], [-0.05, 0.05], color="#334155", lw=1)
        ax.text(
            year, -0.09, str(year), ha="center", va="top", fontsize=9, color="#475569"
        )
    # lineage arcs above the axis, labelled at their peak
    order = sorted(
        range(len(LINEAGE)), key=lambda i: abs(xs[LINEAGE[i][1]] - xs[LINEAGE[i][0]])
    )
    heights = {i: 0.25 + 0.3 * rank for rank, i in enumerate(order)}
    for i, (src, dst, label) in enumerate(LINEAGE):
        x0, x1 = xs[src], xs[dst]
        h = heights[i]
        t = np.linspace(0, 1, 60)
        ax.plot(
            x0 + (x1 - x0) * t, 4 * h * t * (1 - t), color="#64748b", lw=1, zorder=1
        )
        ax.annotate(
            "",
            xy=(x1, 0.02),
            xytext=(x1 - 0.02 * (x1 - x0), 4 * h * 0.02 * 0.98),
            arrowprops=dict(arrowstyle="-|>", color="#64748b", lw=1),
        )
        ax.text(
            (x0 + x1) / 2,
            h + 0.02,
            _wrap(tr(label), 60),
            ha="center",
            va="bottom",
            fontsize=8.5,
            color="#475569",
            # the CJK font has no italic face: matplotlib would fall back to a font
            # without Han glyphs
            style="italic" if language() == "en" else "normal",
        )
    # paper labels below the axis, evenly spread, with leader lines
    label_x = np.linspace(lo + 0.9, hi - 0.9, len(PAPERS))
    for p, lx in zip(PAPERS, label_x):
        x = xs[p.key]
        year, month = arxiv_month(p.arxiv)
        ax.plot([x, lx], [0, -0.55], color=colors[p.key], lw=1.2, zorder=2)
        ax.scatter([x], [0], s=60, color=colors[p.key], zorder=3)
        text = f"{p.short}\narXiv:{p.arxiv} ({year}-{month:02d})\n" + _wrap(
            p.introduced_text(), 26
        )
        ax.text(
            lx,
            -0.58,
            text,
            ha="center",
            va="top",
            fontsize=9,
            bbox=dict(boxstyle="round,pad=0.35", fc="white", ec=colors[p.key]),
        )
    ax.set_xlim(lo, hi)
    ax.set_ylim(-1.6, 1.05)
    ax.axis("off")
    ax.set_title(
        tr("The lineage in four papers (date = arXiv month; arcs: what was inherited)"),
        fontsize=11,
    )
    fig.tight_layout()
    return check_glyphs(fig) if language() == "zh" else fig


def results_figure(ax=None):
    """Bar chart of the quoted DeepSeekMath results, grouping comparable numbers and
    setting apart the one that uses another protocol; returns the matplotlib figure."""
    import matplotlib.pyplot as plt

    use_cjk_matplotlib_font()
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.5, 4.4))
    else:
        fig = ax.figure
    cot = [r for r in RESULTS if r.protocol == CHAIN_OF_THOUGHT]
    other = [r for r in RESULTS if r.protocol != CHAIN_OF_THOUGHT]
    benches = sorted({r.benchmark for r in cot}, key=BENCHMARK_ORDER.index)
    width = 0.36
    for j, (model, color) in enumerate(
        (("DeepSeekMath-Instruct 7B", "#93c5fd"), ("DeepSeekMath-RL 7B", "#1d4ed8"))
    ):
        vals = [result(model, b).value for b in benches]
        bars = ax.bar(
            [i + (j - 0.5) * width for i in range(len(benches))],
            vals,
            width,
            color=color,
            label=f"{model} ({tr(CHAIN_OF_THOUGHT)})",
        )
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    for k, r in enumerate(other):
        x = len(benches) + 0.3 + k
        bar = ax.bar(
            [x],
            [r.value],
            width,
            color="white",
            edgecolor="#b91c1c",
            hatch="//",
            label=tr(
                "{model}, {benchmark}: {protocol} (not comparable)",
                model=r.model,
                benchmark=r.benchmark,
                protocol=tr(r.protocol),
            ),
        )
        ax.bar_label(bar, fmt="%.1f", fontsize=8)
    ax.set_xticks(
        list(range(len(benches))) + [len(benches) + 0.3 + k for k in range(len(other))],
        benches + [f"{r.benchmark}\n(maj@64)" for r in other],
    )
    ax.set_ylabel(tr("accuracy (%)"))
    ax.set_ylim(0, 100)
    ax.legend(
        fontsize=7.5,
        frameon=False,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncol=1,
    )
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(tr("DeepSeekMath, as quoted: Table 5 and the abstract"), fontsize=10)
    fig.tight_layout()
    return check_glyphs(fig) if language() == "zh" else fig


def _wrap(text: str, width: int) -> str:
    if language() == "zh":
        # Chinese has no spaces between words and a Han character is about two Latin
        # ones wide
        return textwrap.fill(text, width=width // 2 + 2)
    words, lines, line = text.split(), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    lines.append(line)
    return "\n".join(lines)
