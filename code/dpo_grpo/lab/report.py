"""The lab page's printed tables, as text: each function takes what a run, the sweep or
a timing measured and returns the lines the page prints (``print(f(...))``).

Every word goes through :func:`~dpo_grpo.i18n.tr`, so the Chinese edition
(``DPO_GRPO_LANG=zh``) prints the same numbers with Chinese words; method names, code
names and symbols stay as they are.
"""

from __future__ import annotations

import itertools

from .. import _validation as v
from ..i18n import N_, language, pad, tr

__all__ = [
    "answer_note",
    "comparison_sentence",
    "error_profile_table",
    "grid_lines",
    "live_check_line",
    "live_check_sentence",
    "margin_rise_phrase",
    "ppo_vs_grpo_cost_table",
    "ratio_trend_phrase",
    "robustness_sentence",
    "robustness_text",
    "rollout_vs_train_text",
    "seed_summary_text",
    "sft_error_sentence",
    "sft_summary_line",
    "state_listing",
]

#: the sweep's metrics as the tables name them
METRIC_NAMES = {
    "final_greedy": N_("final greedy"),
    "final_sampled": N_("final sampled"),
}
#: :func:`dpo_grpo.lab.sweep.direction`'s words, and the robustness settings' labels
#: (:data:`dpo_grpo.lab.robustness.ROBUSTNESS`), translated where they are printed
WORDS = (
    N_("ahead"),
    N_("behind"),
    N_("not separated"),
    N_("main runs"),
    N_("the preset's settings (untuned)"),
    N_("twice the budget"),
    N_("on-policy GRPO (1 epoch a rollout)"),
    N_("GRPO without a KL term (beta = 0)"),
)
#: :func:`reach_table`'s headers: the budget axes (:data:`dpo_grpo.lab.ablation.AXES`)
AXIS_NAMES = {"completions": N_("completions"), "token_passes": N_("token_passes")}
#: the rows of :func:`ppo_vs_grpo_cost_table`: label, key of the measurement, unit
COST_ROWS = (
    (N_("trainable parameters"), "trainable_parameters", 1),
    (N_("optimiser state (MiB)"), "optimizer_state_bytes", 2**20),
    (N_("training state (MiB)"), "training_state_bytes", 2**20),
    (N_("peak memory (MiB)"), "peak_memory_bytes", 2**20),
    (N_("time per step (s, median)"), "step_seconds_median", 1),
)


#: :func:`comparison_sentence`'s sentences: comparison -> direction of the paired
#: difference (:func:`dpo_grpo.lab.sweep.direction`) -> the sentence
COMPARISONS = {
    "grpo_vs_rft": {
        "behind": N_(
            "At this budget, on this task, GRPO did not help against the control: "
            "fine-tuning once on verified samples of the start policy (RFT) ended "
            "ahead of sampling afresh at every step"
        ),
        "ahead": N_(
            "At this budget, on this task, GRPO's fresh samples paid off: "
            "it ended ahead of RFT"
        ),
        "not separated": N_(
            "At this budget, on this task, the seeds do not separate GRPO from RFT"
        ),
    },
    "dpo_nll_vs_rft": {
        "behind": N_(
            "The DPO term does not add to RFT here: DPO + NLL ends behind RFT on "
            "the same pairs, and its lead over DPO alone comes from the NLL term"
        ),
        "ahead": N_(
            "The DPO term adds to RFT here: DPO + NLL ends ahead of the NLL term "
            "alone on the same pairs"
        ),
        "not separated": N_(
            "The seeds do not separate DPO + NLL from RFT: what DPO + NLL gains "
            "over DPO alone is not shown to need the DPO term"
        ),
    },
    "ppo_vs_grpo": {
        "behind": N_("PPO, with its critic, ends behind GRPO"),
        "ahead": N_("PPO, with its critic, ends ahead of GRPO"),
        "not separated": N_(
            "the seeds do not separate PPO, with its critic, from GRPO"
        ),
    },
    "dpo_vs_start": {
        "ahead": N_("its final greedy pass rate is above its start"),
        "behind": N_("its final greedy pass rate is below its start"),
        "not separated": N_(
            "its final greedy pass rate is not separated from its start"
        ),
    },
}
DIRECTIONS = ("ahead", "behind", "not separated")
#: what separates the items of a list inside a sentence, per language
LIST_SEPARATOR = {"en": "; ", "zh": "；"}


def _metric(metric: str) -> str:
    if metric not in METRIC_NAMES:
        raise ValueError(f"metric must be one of {list(METRIC_NAMES)}, got {metric!r}")
    return tr(METRIC_NAMES[metric])


def _dict(x, name: str) -> dict:
    if not isinstance(x, dict):
        raise TypeError(f"{name} must be a dict, got {type(x).__name__}")
    return x


def error_profile_table(table: dict) -> str:
    """A table of the greedy held-out pass rate and the no-carry share of the wrong
    answers, one row per model. ``table``: model name -> ``(pass rate, no-carry
    share)`` (the first two fields of :func:`~dpo_grpo.lab.evaluation.error_profile`).
    """
    table = _dict(table, "table")
    heads = pad(tr("greedy"), 7, ">"), pad(tr("no-carry share of errors"), 25, ">")
    lines = [f"{'':<10} {heads[0]} {heads[1]}"]
    for name, (greedy, nocarry) in table.items():
        lines.append(f"{name:<10} {greedy:7.3f} {nocarry:25.0%}")
    return "\n".join(lines)


def seed_summary_text(results: dict, methods: dict) -> str:
    """The sweep over seeds in numbers: the SFT start's greedy and sampled pass rates
    (mean, range), then each method's final pass rate and its gain over the start, mean
    [95% t-interval], with the gain's direction.

    ``results``: the sweep's results (:func:`dpo_grpo.lab.sweep.load`); ``methods``:
    the name shown -> the algorithm's key (``{"GRPO": "grpo", ...}``)."""
    from .sweep import gain, summarise

    methods = _dict(methods, "methods")
    summary = summarise(results)
    st = summary["start"]
    lines = [
        tr(
            "SFT start, {kind}: mean {mean:.3f} over {n} seeds, from {lo:.3f} to "
            "{hi:.3f}",
            kind=tr(kind),
            mean=st[key]["mean"],
            n=st[key]["n"],
            lo=st[key]["min"],
            hi=st[key]["max"],
        )
        for key, kind in (
            ("start_greedy", N_("greedy")),
            ("start_sampled", N_("sampled")),
        )
    ]
    heads = pad(tr("final"), 22, ">"), pad(tr("gain over the start"), 30, ">")
    lines.append(f"{'':<10} {heads[0]} {heads[1]}")
    for metric in METRIC_NAMES:
        lines.append(_metric(metric))
        for name, algorithm in methods.items():
            f = summary[algorithm][metric]
            g = gain(results, algorithm, metric)
            lines.append(
                f"  {pad(tr(name), 10)} {f['mean']:.3f} "
                f"[{f['ci_low']:.3f}, {f['ci_high']:.3f}]"
                f"   {g['mean']:+.3f} [{g['ci_low']:+.3f}, {g['ci_high']:+.3f}]"
                f" {tr(g['direction'])}"
            )
    return "\n".join(lines)


def robustness_text(rob: dict, a: str = "grpo", b: str = "rft") -> str:
    """The robustness table in words: for each metric, one row per setting with the
    means of ``a`` and ``b``, the difference ``a - b`` with its 95% t-interval, the
    seeds where ``a`` is ahead, the sign test's p and the direction. ``rob``: metric
    (``"final_greedy"``, ``"final_sampled"``) -> the rows of
    :func:`dpo_grpo.lab.sweep.robustness_table`."""
    from .sweep import NAMES

    rob = _dict(rob, "rob")
    for key, name in ((a, "a"), (b, "b")):
        if key not in NAMES:
            raise ValueError(f"{name} must be one of {list(NAMES)}, got {key!r}")
    lines = []
    for metric, rows in rob.items():
        lines.append(
            tr(
                "{metric}: {a}, {b}, {a} - {b} [95% t], seeds ahead, p",
                metric=_metric(metric),
                a=tr(NAMES[a]),
                b=tr(NAMES[b]),
            )
        )
        for r in rows:
            lines.append(
                f"  {pad(tr(r['label']), 36)} {r[a]:.3f} {r[b]:.3f} {r['mean']:+.3f} "
                f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] {r['ahead']:>2}/{r['n']} "
                f"p={r['sign_p']:.3f} {tr(r['direction'])}"
            )
    return "\n".join(lines)


def ppo_vs_grpo_cost_table(cost: dict) -> str:
    """PPO's measured cost beside GRPO's: trainable parameters, optimiser state,
    training state, peak memory and the median time per step, with the ratio PPO/GRPO.
    ``cost``: the ``"ppo_vs_grpo"`` entry of a benchmark file (its ``"grpo"`` and
    ``"ppo"`` measurements, :func:`dpo_grpo.lab.ppo_vs_grpo_cost`)."""
    cost = _dict(cost, "cost")
    lines = [f"{'':<26} {'GRPO':>12} {'PPO':>12} {'PPO/GRPO':>9}"]
    for label, key, unit in COST_ROWS:
        g, p = cost["grpo"][key] / unit, cost["ppo"][key] / unit
        lines.append(f"{pad(tr(label), 26)} {g:>12,.2f} {p:>12,.2f} {p / g:>9.2f}")
    return "\n".join(lines)


def rollout_vs_train_text(rows) -> str:
    """One line per completion length: the time to sample, the time of one training
    pass and their ratio. ``rows``: :func:`dpo_grpo.lab.rollout_vs_train_time`'s."""
    rows = v.sequence(rows, "rows")
    return "\n".join(
        tr(
            "L = {length:2d} tokens: sampling {rollout:6.1f} ms, one training pass "
            "{train:5.1f} ms, ratio {ratio:4.1f}",
            length=row["completion_length"],
            rollout=row["rollout_s"] * 1e3,
            train=row["train_pass_s"] * 1e3,
            ratio=row["rollout_over_train"],
        )
        for row in rows
    )


def state_listing(state: dict) -> str:
    """What a run's checkpoint holds (:meth:`dpo_grpo.lab.LabRun.state_dict`): one line
    per entry (the history left out), ``key: value`` (the key is code: the state's
    own), a dict as its number of entries, anything else as its first 80 characters of
    ``repr``; then the random generators saved."""
    state = _dict(state, "state")
    lines = []
    for key, value in state.items():
        if key != "history":
            described = (
                tr("{n} entries", n=len(value))
                if isinstance(value, dict)
                else repr(value)
            )
            lines.append(f"{key + ':':<18} {described[:80]}")
    lines.append(tr("random generators saved:") + f" {list(state['rng'])}")
    return "\n".join(lines)


def answer_note(correct, no_carry) -> str:
    """What a greedy answer of the SFT listing is: ``"correct"``, ``"wrong: the
    no-carry answer"`` (the demonstrator's flaw) or ``"wrong"``."""
    correct, no_carry = v.boolean(correct, "correct"), v.boolean(no_carry, "no_carry")
    if correct:
        return tr("correct")
    return tr("wrong: the no-carry answer") if no_carry else tr("wrong")


def sft_summary_line(
    steps, seconds, probe_pass, heldout_pass, nocarry, top, top_share
) -> str:
    """One line on the SFT warm-up: its steps and seconds, the probe's and the
    held-out greedy pass rates, the no-carry share of the wrong answers, and the most
    common wrong answer (``top``) with its share of them (``top_share``), as
    :func:`~dpo_grpo.lab.evaluation.error_profile` returns them."""
    return tr(
        "SFT: {steps} steps in {seconds:.1f} s; probe pass rate {probe:.3f}; held-out "
        "pass rate {heldout:.3f}; {nocarry:.0%} of the wrong answers are the no-carry "
        "answer; the most common wrong answer is {top!r} ({share:.0%} of them)",
        steps=v.integer(steps, "steps", minimum=0),
        seconds=v.scalar(seconds, "seconds", nonnegative=True),
        probe=v.scalar(probe_pass, "probe_pass", nonnegative=True, maximum=1),
        heldout=v.scalar(heldout_pass, "heldout_pass", nonnegative=True, maximum=1),
        nocarry=v.scalar(nocarry, "nocarry", nonnegative=True, maximum=1),
        top=top,
        share=v.scalar(top_share, "top_share", nonnegative=True, maximum=1),
    )


def sft_error_sentence(nocarry, top, top_share) -> str:
    """What the SFT start's errors are, a clause that ends the page's sentence on them:
    mostly the demonstrator's flaw when ``nocarry`` (the no-carry share of the wrong
    answers) is at least one half, else the most common wrong answer ``top`` and its
    share ``top_share`` of them."""
    nocarry = v.scalar(nocarry, "nocarry", nonnegative=True, maximum=1)
    top_share = v.scalar(top_share, "top_share", nonnegative=True, maximum=1)
    if nocarry >= 0.5:
        return tr("in most of its errors it reproduces the demonstrator's flaw")
    return tr(
        "most of its errors are not the flaw: the most common wrong answer, "
        "`{top}`, accounts for {share:.0%} of them on its own. "
        "SFT stopped early, by design, before the model had learned the sums: "
        "the start is undertrained, and its errors collapse onto frequent answers "
        "rather than onto the demonstrator's",
        top=top,
        share=top_share,
    )


def live_check_sentence(checks: dict, results: dict) -> str:
    """How the page's live runs compare with the shipped sweep file, the predicate of
    a sentence whose subject is the live runs: bit for bit, within one sample, or by
    the largest difference in a pass rate (with the file's torch and CPU). ``checks``:
    method name -> :func:`dpo_grpo.lab.sweep.compare`'s result; ``results``: the
    sweep's results (:func:`dpo_grpo.lab.sweep.load`)."""
    checks = _dict(checks, "checks")
    results = _dict(results, "results")
    if not checks:
        raise ValueError("checks must name at least one method")
    if all(c["exact"] for c in checks.values()):
        return tr("reproduce the file bit for bit")
    if all(c["within_tolerance"] for c in checks.values()):
        return tr(
            "reproduce the file's greedy curves exactly and its sampled pass@1 "
            "to within one sample"
        )
    return tr(
        "differ from the file by at most {diff:.3f} in a pass rate (the file was "
        "written with torch {torch} on {cpu}; floating-point sums differ between CPU "
        "types, and a run diverges from the first differing sample)",
        diff=max(c["max_abs_diff"] for c in checks.values()),
        torch=results["environment"]["torch"],
        cpu=results["environment"]["cpu"],
    )


def live_check_line(seed, live: str) -> str:
    """The printed line of :func:`live_check_sentence`'s verdict ``live`` for
    ``seed``."""
    return tr(
        "seed {seed}, live vs file: {live}",
        seed=v.integer(seed, "seed", minimum=0),
        live=live,
    )


def comparison_sentence(which: str, direction: str) -> str:
    """The sentence a paired comparison over the seeds supports, given its
    ``direction`` (``"ahead"``, ``"behind"``, ``"not separated"``:
    :func:`dpo_grpo.lab.sweep.direction`). ``which``: ``"grpo_vs_rft"`` (GRPO minus
    the RFT control), ``"dpo_nll_vs_rft"`` (DPO + NLL minus RFT), ``"ppo_vs_grpo"`` (a
    clause: PPO minus GRPO) or ``"dpo_vs_start"`` (a clause: DPO's final greedy pass
    rate minus its start)."""
    if which not in COMPARISONS:
        raise ValueError(f"which must be one of {list(COMPARISONS)}, got {which!r}")
    v.choice(direction, "direction", DIRECTIONS)
    return tr(COMPARISONS[which][direction])


def robustness_sentence(rob: dict, a: str = "grpo", b: str = "rft") -> str:
    """The robustness table (:func:`robustness_text`'s ``rob``, both metrics) in one
    sentence: in how many settings ``a`` ends behind ``b`` on the greedy and on the
    sampled pass rate, then the settings where it does not, with their direction."""
    from .sweep import NAMES

    rob = _dict(rob, "rob")
    for metric in METRIC_NAMES:
        if metric not in rob:
            raise ValueError(f"rob must have the metric {metric!r}")
    for key, name in ((a, "a"), (b, "b")):
        if key not in NAMES:
            raise ValueError(f"{name} must be one of {list(NAMES)}, got {key!r}")
    behind = {m: [r["direction"] == "behind" for r in rows] for m, rows in rob.items()}
    elsewhere = [
        tr(
            "{label} ({kind}: {direction})",
            label=tr(r["label"]),
            kind=tr(metric.split("_")[1]),
            direction=tr(r["direction"]),
        )
        for metric, rows in rob.items()
        for r in rows
        if r["direction"] != "behind"
    ]
    sentence = tr(
        "{a} ends behind {b} in {greedy} of {n} settings on the greedy pass rate and "
        "in {sampled} on the sampled pass@1",
        a=tr(NAMES[a]),
        b=tr(NAMES[b]),
        greedy=sum(behind["final_greedy"]),
        n=len(behind["final_greedy"]),
        sampled=sum(behind["final_sampled"]),
    )
    if elsewhere:
        sentence += tr(
            "; the others: {others}", others=LIST_SEPARATOR[language()].join(elsewhere)
        )
    return sentence


def _rises_each_time(values, name: str) -> bool:
    values = v.sequence(values, name)
    if len(values) < 2:
        raise ValueError(f"{name} must hold at least two values, got {len(values)}")
    values = [v.scalar(x, name) for x in values]
    return all(b > a for a, b in itertools.pairwise(values))


def margin_rise_phrase(margins) -> str:
    """How DPO's pair margin rose over the evaluations ``margins``: ``"at every
    evaluation"`` when each is above the one before, else ``"overall"``."""
    if _rises_each_time(margins, "margins"):
        return tr("at every evaluation")
    return tr("overall")


def ratio_trend_phrase(ratios) -> str:
    """How the ratio of sampling time to training time moves over completion lengths
    that double (``ratios``, shortest first): a predicate whose subject is the
    ratio."""
    if _rises_each_time(ratios, "ratios"):
        return tr("rises with every doubling of the length")
    return tr("rises overall, though not at every doubling")


def verdict_table(rows, names: dict) -> str:
    """:func:`dpo_grpo.lab.ablation.verdict_family`'s rows as a table: the comparison
    (``a - b``, or ``a - SFT`` for a gain), the metric, the mean difference with its
    95% t-interval, the seeds ahead / behind / tied (``+/-/=``), the sign test's p,
    the t-test's p, Holm's adjusted p and the direction it allows. ``names``:
    algorithm -> name shown."""
    names = _dict(names, "names")
    head = (
        f"{'':<22} {'':<8} {pad(tr('mean'), 7, '>')} {'95% t':>17} {'+/-/=':>8} "
        f"{pad(tr('sign p'), 7, '>')}"
    )
    lines = [head + f" {'t p':>7} {'Holm p':>7}"]
    for r in rows:
        what = f"{tr(names[r['a']])} - {tr(names[r['b']]) if r['b'] else 'SFT'}"
        kind = "greedy" if "greedy" in r["metric"] else "sampled"
        lines.append(
            f"{pad(what, 22)} {pad(tr(kind), 8)} {r['mean']:+7.3f}"
            f" [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
            f" {r['ahead']:>2}/{r['behind']}/{r['ties']:<2} {r['sign_p']:7.3f}"
            f" {r['t_p']:7.3f} {r['holm_p']:7.3f}  {tr(r['direction'])}"
        )
    return "\n".join(lines)


def class_table(breakdown: dict, names: dict) -> str:
    """:func:`dpo_grpo.lab.ablation.class_breakdown` as a table: per method, the
    held-out pass rate of the carry and the no-carry prompts at the SFT start and at
    the end (means over seeds), and the seeds whose no-carry pass rate fell below its
    start (``forgot``: the page's prose names the column so)."""
    breakdown, names = _dict(breakdown, "breakdown"), _dict(names, "names")
    heads = pad(tr("carry"), 15, ">"), pad(tr("nocarry"), 15, ">")
    lines = [f"{'':<12} {heads[0]} {heads[1]} {'forgot':>8}"]
    for m, b in breakdown.items():
        cells = [
            f"{b[c]['start']:.3f} -> {b[c]['final']:.3f}" for c in ("carry", "nocarry")
        ]
        lines.append(
            f"{pad(tr(names[m]), 12)} {cells[0]:>15} {cells[1]:>15} "
            f"{b['forgot']:>4}/{b['n']}"
        )
    return "\n".join(lines)


def reach_table(reach: dict, names: dict) -> str:
    """:func:`dpo_grpo.lab.ablation.budget_to_reach` for each method and axis as a
    table: per axis, the seeds that reached the target (``k/n``) and the mean budget
    they needed with its 95% t-interval. ``reach``: ``(algorithm, axis)`` -> the
    function's answer; ``names``: algorithm -> name shown."""
    reach, names = _dict(reach, "reach"), _dict(names, "names")
    axes = list(dict.fromkeys(axis for _, axis in reach))
    methods = list(dict.fromkeys(m for m, _ in reach))
    lines = [
        f"{'':<12}"
        + "".join(f" {pad(tr(AXIS_NAMES.get(a, a)), 36, '>')}" for a in axes)
    ]
    for m in methods:
        cells = []
        for axis in axes:
            r = reach[m, axis]
            if not r["reached"]:
                cells.append(f"{'0/' + str(r['n']):>36}")
                continue
            span = (
                f"{r['mean']:,.0f} [{r['ci_low']:,.0f}, {r['ci_high']:,.0f}]"
                if r["reached"] > 1
                else f"{r['mean']:,.0f}"
            )
            cells.append(f"{str(r['reached']) + '/' + str(r['n']):>6} {span:>29}")
        lines.append(f"{pad(tr(names[m]), 12)}" + "".join(f" {c}" for c in cells))
    return "\n".join(lines)


def grid_lines(methods, names: dict) -> str:
    """The tuning grids, one line per method of ``methods`` (algorithm keys): its name
    shown (``names``: algorithm -> name), then its grid
    (:func:`dpo_grpo.lab.tuning.grid_text`)."""
    from .tuning import grid_text

    names = _dict(names, "names")
    return "\n".join(f"{pad(tr(names[m]), 12)} {grid_text(m)}" for m in methods)


def tuning_table(tune: dict, names: dict) -> str:
    """A tuning file (:func:`dpo_grpo.lab.tuning.tune`) as a table: per method, its
    grid points, the mean validation sampled pass@1 of the chosen point and the range
    of the grid points' means, and the chosen settings. ``names``: algorithm -> name
    shown."""
    tune, names = _dict(tune, "tune"), _dict(names, "names")
    lines = [
        f"{'':<12} {tr('grid points'):>11} {tr('chosen'):>7} {tr('grid range'):>13}  "
        + tr("chosen settings")
    ]
    for m, rows in tune["scores"].items():
        means = [sum(r["per_seed"]) / len(r["per_seed"]) for r in rows]
        chosen = tune["best"][m]
        best = max(means)
        settings = ", ".join(f"{k}={x:g}" for k, x in chosen.items())
        lines.append(
            f"{pad(tr(names[m]), 12)} {len(rows):>11} {best:>7.3f} "
            f"{min(means):>6.3f}-{best:<6.3f}  {settings}"
        )
    return "\n".join(lines)
