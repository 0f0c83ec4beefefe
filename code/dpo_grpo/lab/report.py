"""The lab page's printed tables, as text: each function takes what a run, the sweep or
a timing measured and returns the lines the page prints (``print(f(...))``).

Every word goes through :func:`~dpo_grpo.i18n.tr`, so the Chinese edition
(``DPO_GRPO_LANG=zh``) prints the same numbers with Chinese words; method names, code
names and symbols stay as they are.
"""

from __future__ import annotations

from .. import _validation as v
from ..i18n import N_, tr

__all__ = [
    "error_profile_table",
    "ppo_vs_grpo_cost_table",
    "robustness_text",
    "rollout_vs_train_text",
    "seed_summary_text",
    "state_listing",
]

#: the sweep's metrics as the tables name them
METRIC_NAMES = {
    "final_greedy": N_("final greedy"),
    "final_sampled": N_("final sampled"),
}
#: :func:`dpo_grpo.lab.sweep.direction`'s words, and the robustness settings' labels
#: (:data:`dpo_grpo.lab.sweep.ROBUSTNESS`), translated where they are printed
WORDS = (
    N_("ahead"),
    N_("behind"),
    N_("not separated"),
    N_("main runs"),
    N_("learning rate 1e-3"),
    N_("twice the budget"),
    N_("on-policy GRPO (1 epoch a rollout)"),
    N_("GRPO without a KL term (beta = 0)"),
)
#: the rows of :func:`ppo_vs_grpo_cost_table`: label, key of the measurement, unit
COST_ROWS = (
    (N_("trainable parameters"), "trainable_parameters", 1),
    (N_("optimiser state (MiB)"), "optimizer_state_bytes", 2**20),
    (N_("training state (MiB)"), "training_state_bytes", 2**20),
    (N_("peak memory (MiB)"), "peak_memory_bytes", 2**20),
    (N_("time per step (s, median)"), "step_seconds_median", 1),
)


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
    lines = [f"{'':<10} {tr('greedy'):>7} {tr('no-carry share of errors'):>25}"]
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
    lines.append(f"{'':<10} {tr('final'):>22} {tr('gain over the start'):>30}")
    for metric in METRIC_NAMES:
        lines.append(_metric(metric))
        for name, algorithm in methods.items():
            f = summary[algorithm][metric]
            g = gain(results, algorithm, metric)
            lines.append(
                f"  {name:<10} {f['mean']:.3f} [{f['ci_low']:.3f}, {f['ci_high']:.3f}]"
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
                a=NAMES[a],
                b=NAMES[b],
            )
        )
        for r in rows:
            lines.append(
                f"  {tr(r['label']):<36} {r[a]:.3f} {r[b]:.3f} {r['mean']:+.3f} "
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
        lines.append(f"{tr(label):<26} {g:>12,.2f} {p:>12,.2f} {p / g:>9.2f}")
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
    per entry (the history left out), a dict as its number of entries, anything else
    as its first 80 characters of ``repr``; then the random generators saved."""
    state = _dict(state, "state")
    lines = []
    for key, value in state.items():
        if key != "history":
            described = (
                tr("{n} entries", n=len(value))
                if isinstance(value, dict)
                else repr(value)
            )
            lines.append(f"{key:<17} {described[:80]}")
    lines.append(tr("random generators saved:") + f" {list(state['rng'])}")
    return "\n".join(lines)
