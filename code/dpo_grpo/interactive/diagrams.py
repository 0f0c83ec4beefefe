"""Figure 1 drawn from data: which parts of the PPO-RLHF pipeline DPO and GRPO keep, and
which they drop.

The figure is a grid: one column per method, one row per *role* in the training loop
(the data, the reward, online sampling, the trained policy, the baseline for advantages,
the reference). :func:`pipeline_components` holds the grid as plain data;
:func:`draw_pipelines` draws whatever grid it is given, so the figure and the tests read
the same source. Each component has a ``status``:

- ``"trained"``: parameters updated (weights, gradients and optimizer state in memory,
  forward and backward passes);
- ``"frozen"``: parameters fixed, but weights in memory and forward passes every step;
- ``"computed"``: work with no parameters of its own (sampling with the policy, group
  statistics);
- ``"data"``: read from a dataset;
- ``"dropped"``: the method does not have this component.
"""

from __future__ import annotations

import copy
import textwrap

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Patch

from .. import _validation as v
from ..i18n import N_, check_glyphs, language, tr, use_cjk_matplotlib_font

#: rows of the grid, top to bottom, with the label shown at the left
ROLES = {
    "data": N_("training\ndata"),
    "reward": N_("reward\nsignal"),
    "sampling": N_("online\nsampling"),
    "policy": N_("trained\npolicy"),
    "baseline": N_("advantage\nbaseline"),
    "reference": N_("reference"),
}

#: how each status is drawn: face colour, edge colour, line style, legend entry
STATUS_STYLE = {
    "trained": {
        "facecolor": "#fecaca",
        "edgecolor": "#b91c1c",
        "linestyle": "-",
        "legend": N_("trained (grads + optimizer)"),
    },
    "frozen": {
        "facecolor": "#dbeafe",
        "edgecolor": "#1d4ed8",
        "linestyle": "-",
        "legend": N_("frozen (forward passes)"),
    },
    "computed": {
        "facecolor": "#dcfce7",
        "edgecolor": "#15803d",
        "linestyle": "-",
        "legend": N_("computed (no parameters)"),
    },
    "data": {
        "facecolor": "#fef3c7",
        "edgecolor": "#b45309",
        "linestyle": "-",
        "legend": N_("dataset"),
    },
    "dropped": {
        "facecolor": "#f3f4f6",
        "edgecolor": "#9ca3af",
        "linestyle": "--",
        "legend": N_("dropped"),
    },
}

#: the two caveats printed under figure 1: what changes the real cost beyond the boxes
FIGURE_NOTES = (
    N_(
        "Policy and reference can share one base model (e.g. a frozen base plus a "
        "trainable LoRA adapter): then the reference is not a second copy of the "
        "weights."
    ),
    N_(
        "A rule-based reward (answer checker, unit tests) needs no model; a neural "
        "reward model costs a forward pass over every sampled answer."
    ),
)

#: the figure's default title
TITLE = N_("What each method keeps and drops")

#: box labels whose bare English is also a catalog entry with another sense ("prompts"
#: is an axis title, a count, elsewhere): translated through these keys instead
LABEL_CONTEXT = {"prompts": N_("prompts (the training data)")}

_COMPONENTS = {
    "PPO-RLHF": {
        "data": (N_("prompts\n(RM fitted on pairs beforehand)"), "data"),
        "reward": (N_("reward model\nscores each full answer"), "frozen"),
        "sampling": (N_("actor generates answers\nevery step"), "computed"),
        "policy": (N_("actor"), "trained"),
        "baseline": (N_("critic $V_\\phi(s_t)$\na value per token"), "trained"),
        "reference": (N_("reference model\nKL penalty"), "frozen"),
    },
    "DPO": {
        "data": (N_("offline preference pairs\n$(x, y_w, y_l)$"), "data"),
        "reward": (
            N_(
                "no explicit reward model\n(implicit: "
                "$\\beta\\log\\pi_\\theta/\\pi_{ref}$)"
            ),
            "dropped",
        ),
        "sampling": (N_("no online sampling"), "dropped"),
        "policy": (N_("policy"), "trained"),
        "baseline": (N_("no critic\n(binary classification loss)"), "dropped"),
        "reference": (N_("reference log-probs\n(can be precomputed)"), "frozen"),
    },
    "GRPO": {
        "data": (N_("prompts"), "data"),
        "reward": (N_("reward model (frozen)\nor rule checker (no model)"), "frozen"),
        "sampling": (N_("$G$ answers per prompt\nevery step"), "computed"),
        "policy": (N_("policy"), "trained"),
        "baseline": (N_("group mean and std\n(no critic)"), "computed"),
        "reference": (N_("reference model\nKL term in the loss"), "frozen"),
    },
}


def pipeline_components() -> dict:
    """The grid of figure 1: ``{method: {role: {"label": str, "status": str}}}``,
    methods in display order.

    Roles are the keys of :data:`ROLES`; statuses are the keys of :data:`STATUS_STYLE`.
    A fresh copy is returned, so callers may edit it (e.g. mark GRPO's reward as
    ``"computed"`` for a rule checker) and redraw.
    """
    return {
        method: {
            role: {"label": label, "status": status}
            for role, (label, status) in rows.items()
        }
        for method, rows in copy.deepcopy(_COMPONENTS).items()
    }


def components_with_status(components, status) -> dict:
    """``{method: [role, ...]}``: the roles whose component has ``status`` in each
    method of ``components``."""
    validate_components(components)
    if status not in STATUS_STYLE:
        raise ValueError(f"status must be one of {tuple(STATUS_STYLE)}, got {status!r}")
    return {
        m: [r for r, c in rows.items() if c["status"] == status]
        for m, rows in components.items()
    }


def validate_components(components) -> dict:
    """Check a grid like :func:`pipeline_components`'s; raise TypeError/ValueError
    naming ``components``."""
    if not isinstance(components, dict):
        raise TypeError(
            f"components must be a dict {{method: {{role: component}}}}, got "
            f"{type(components).__name__}"
        )
    if not components:
        raise ValueError("components must contain at least one method")
    for method, rows in components.items():
        if not isinstance(method, str) or not method:
            raise TypeError(
                f"components: method names must be non-empty strings, got {method!r}"
            )
        if not isinstance(rows, dict):
            raise TypeError(
                f"components[{method!r}] must be a dict {{role: component}}, got "
                f"{type(rows).__name__}"
            )
        if set(rows) != set(ROLES):
            missing, extra = (
                sorted(set(ROLES) - set(rows)),
                sorted(set(rows) - set(ROLES)),
            )
            raise ValueError(
                f"components[{method!r}] must have exactly the roles {list(ROLES)} "
                f"(missing {missing}, unknown {extra})"
            )
        for role, comp in rows.items():
            if not isinstance(comp, dict) or set(comp) != {"label", "status"}:
                raise ValueError(
                    f"components[{method!r}][{role!r}] must be a dict with keys "
                    "'label' and 'status'"
                )
            if not isinstance(comp["label"], str) or not comp["label"].strip():
                raise ValueError(
                    f"components[{method!r}][{role!r}]['label'] must be a non-empty "
                    "string"
                )
            if comp["status"] not in STATUS_STYLE:
                raise ValueError(
                    f"components[{method!r}][{role!r}]['status'] must be one of "
                    f"{tuple(STATUS_STYLE)}, got {comp['status']!r}"
                )
    return components


def draw_pipelines(
    components=None,
    *,
    notes=FIGURE_NOTES,
    title=TITLE,
    figsize=(9.0, 6.8),
) -> Figure:
    """Draw the grid ``components`` (default :func:`pipeline_components`) and return the
    matplotlib Figure.

    One column per method, one row per role; each box carries its component's label and
    the style of its status (dropped components are grey and dashed). Every box patch
    has ``gid = "method/role"`` so tests and readers can find it. ``notes`` (a sequence
    of strings, possibly empty) are printed under the grid. No pyplot state is used.
    Under ``DPO_GRPO_LANG=zh`` the title, role labels, box labels, legend and notes are
    drawn through :func:`dpo_grpo.i18n.tr` (text without a translation is drawn as
    given) in a CJK font.
    """
    comps = validate_components(
        pipeline_components() if components is None else components
    )
    if isinstance(notes, str) or not all(
        isinstance(n, str) for n in v.sequence(notes, "notes")
    ):
        raise TypeError("notes must be a sequence of strings")
    notes = tuple(notes)
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {type(title).__name__}")
    size = v.sequence(figsize, "figsize")
    if len(size) != 2:
        raise ValueError(
            f"figsize must be a pair (width, height) in inches, got {figsize!r}"
        )
    figsize = tuple(v.scalar(x, "figsize", positive=True) for x in size)

    n_cols, n_rows = len(comps), len(ROLES)
    use_cjk_matplotlib_font()
    # a Han character is about two Latin ones wide, and the CJK font has no bold face
    zh = language() == "zh"
    chars_per_inch, bold = (7.5, "normal") if zh else (13, "bold")
    fig = Figure(figsize=figsize, facecolor="white")
    wrapped = [
        textwrap.fill(
            tr("Note {k}. {note}", k=k + 1, note=tr(note)),
            width=int(chars_per_inch * figsize[0]),
        )
        for k, note in enumerate(notes)
    ]
    note_h = 0.012 + sum(0.034 * (w.count("\n") + 1) for w in wrapped)
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")

    left, right, top = 0.13, 0.99, 0.86
    bottom = 0.125 + note_h
    col_w = (right - left) / n_cols
    row_h = (top - bottom) / n_rows
    pad_x, pad_y = 0.012, 0.012

    ax.text(
        0.5,
        0.965,
        tr(title),
        ha="center",
        va="center",
        fontsize=15,
        weight=bold,
        color="#111827",
    )
    for j, method in enumerate(comps):
        ax.text(
            left + (j + 0.5) * col_w,
            top + 0.035,
            method,
            ha="center",
            va="center",
            fontsize=13,
            weight=bold,
            color="#111827",
            gid=f"title/{method}",
        )
    for i, (role, role_label) in enumerate(ROLES.items()):
        y0 = top - (i + 1) * row_h
        ax.text(
            left - 0.01,
            y0 + row_h / 2,
            tr(role_label),
            ha="right",
            va="center",
            fontsize=10,
            color="#374151",
            gid=f"role/{role}",
        )
        for j, (method, rows) in enumerate(comps.items()):
            comp = rows[role]
            style = STATUS_STYLE[comp["status"]]
            x0 = left + j * col_w
            patch = FancyBboxPatch(
                (x0 + pad_x, y0 + pad_y),
                col_w - 2 * pad_x,
                row_h - 2 * pad_y,
                boxstyle="round,pad=0,rounding_size=0.012",
                facecolor=style["facecolor"],
                edgecolor=style["edgecolor"],
                linestyle=style["linestyle"],
                linewidth=1.4,
            )
            patch.set_gid(f"{method}/{role}")
            ax.add_patch(patch)
            color = "#6b7280" if comp["status"] == "dropped" else "#111827"
            ax.text(
                x0 + col_w / 2,
                y0 + row_h / 2,
                tr(LABEL_CONTEXT.get(comp["label"], comp["label"]))
                if zh
                else comp["label"],
                ha="center",
                va="center",
                fontsize=9.5,
                color=color,
                gid=f"label/{method}/{role}",
            )

    # legend: one swatch per status, under the grid (matplotlib lays the entries out in
    # rows)
    handles = [
        Patch(
            facecolor=st["facecolor"],
            edgecolor=st["edgecolor"],
            linestyle=st["linestyle"],
            label=tr(st["legend"]),
        )
        for st in STATUS_STYLE.values()
    ]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5 * (left + right), bottom - 0.005),
        ncol=3,
        frameon=False,
        fontsize=9,
        handlelength=1.6,
        columnspacing=1.6,
    )
    y = bottom - 0.105
    for k, text in enumerate(wrapped):
        n_lines = text.count("\n") + 1
        ax.text(
            0.02,
            y,
            text,
            ha="left",
            va="top",
            fontsize=9,
            color="#374151",
            gid=f"note/{k}",
        )
        y -= 0.034 * n_lines + 0.012
    return check_glyphs(fig) if zh else fig
