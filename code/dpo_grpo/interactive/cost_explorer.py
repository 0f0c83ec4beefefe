"""The cost explorer of chapter 6: a plotly figure of the step-time and memory estimates
of :mod:`dpo_grpo.chapters.costs` (:func:`cost_figure`, works in static HTML) and an
ipywidgets UI that recomputes the section 6.10 budget live (:func:`cost_explorer`).
plotly and ipywidgets are imported when called.
"""

from __future__ import annotations

from ..i18n import N_, plotly_font, tr
from .. import _validation as v
from ..chapters.costs import (
    ALGORITHMS,
    GB,
    LABELS,
    budget_rows,
    compare,
    critic_cost,
    format_rows,
    step_cost,
    step_time,
)
from ..chapters.throughput import Throughput, as_throughput
from ..chapters.workload import Workload

DEFAULT_MODEL_SIZES = (1.5e9, 7e9, 32e9)
DEFAULT_ANSWER_LENS = (256, 1024, 4096, 16384)
DEFAULT_GROUP_SIZES = (2, 4, 8, 16, 32, 64)
_COLORS = {
    "ppo": "#b91c1c",
    "ppo_same": "#f97316",
    "grpo": "#1d4ed8",
    "dpo": "#15803d",
    "critic": "#b91c1c",
    "rollout": "#1d4ed8",
}
_MEM_COLORS = {
    N_("policy (trainable)"): "#fca5a5",
    N_("critic (trainable)"): "#b91c1c",
    N_("reference (frozen)"): "#93c5fd",
    N_("reward model (frozen)"): "#fcd34d",
}


def _r4(ys):
    """Round to 4 significant digits (keeps the figure's JSON small)."""
    return [float(f"{y:.4g}") for y in ys]


def _size_label(n: float) -> str:
    return f"{n / 1e9:g}B"


def _total_time(alg, w, t):
    return sum(step_time(step_cost(alg, w), t).values())


def _curves(w: Workload, group_sizes, t):
    """Step time vs G for the lines of :func:`cost_figure`, on workload ``w`` (G and
    ppo_samples overridden)."""
    ws = [w.with_(group_size=g, ppo_samples=1) for g in group_sizes]
    same = [w.with_(group_size=g, ppo_samples=g) for g in group_sizes]
    grpo = [step_time(step_cost("grpo", x), t) for x in ws]
    return {
        "PPO, 1 answer per prompt": [_total_time("ppo", x, t) for x in ws],
        "PPO, G answers per prompt": [_total_time("ppo", x, t) for x in same],
        "GRPO": [sum(d.values()) for d in grpo],
        "DPO (pairs, no sampling)": [_total_time("dpo", x, t) for x in ws],
        "GRPO generation + scoring": [d["generation"] + d["scoring"] for d in grpo],
        "PPO critic (G answers per prompt)": [
            critic_cost(x, t)["seconds"] for x in same
        ],
    }


_LINE_STYLE = {
    N_("PPO, 1 answer per prompt"): dict(color=_COLORS["ppo"], dash="solid"),
    N_("PPO, G answers per prompt"): dict(color=_COLORS["ppo_same"], dash="solid"),
    "GRPO": dict(color=_COLORS["grpo"], dash="solid"),
    N_("DPO (pairs, no sampling)"): dict(color=_COLORS["dpo"], dash="solid"),
    N_("GRPO generation + scoring"): dict(color=_COLORS["rollout"], dash="dot"),
    N_("PPO critic (G answers per prompt)"): dict(color=_COLORS["critic"], dash="dot"),
}


def cost_figure(
    model_sizes=DEFAULT_MODEL_SIZES,
    answer_lens=DEFAULT_ANSWER_LENS,
    group_sizes=DEFAULT_GROUP_SIZES,
    *,
    base: Workload | None = None,
    throughput: Throughput | None = None,
    reward_model_size="same",
):
    """A plotly figure that works in static HTML: step time vs G (left) and memory per
    GPU (right).

    Right panel: the logical state of :func:`step_cost` (per GPU when
    ``base.shard_states``). A dropdown picks the model size and the reward (rule
    checker, or a reward model of ``reward_model_size`` parameters, ``"same"`` = the
    policy's size); a slider (one per dropdown entry, swapped by the dropdown) picks the
    answer length. Every state is precomputed, so no kernel is needed. ``base`` supplies
    the other workload fields (default ``Workload(n_params=7e9)`` with 64 prompts of 256
    tokens on 8 GPUs).
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    sizes = [
        int(v.scalar(s, "model_sizes", positive=True))
        for s in v.sequence(model_sizes, "model_sizes")
    ]
    lens = [
        v.integer(x, "answer_lens", minimum=1)
        for x in v.sequence(answer_lens, "answer_lens")
    ]
    gs = [
        v.integer(g, "group_sizes", minimum=2)
        for g in v.sequence(group_sizes, "group_sizes")
    ]
    if not sizes or not lens or not gs:
        raise ValueError("model_sizes, answer_lens and group_sizes must not be empty")
    base = Workload(n_params=int(7e9)) if base is None else base
    if not isinstance(base, Workload):
        raise TypeError(f"base must be a Workload, got {type(base).__name__}")
    t = as_throughput(throughput)
    if not (isinstance(reward_model_size, str) and reward_model_size == "same"):
        reward_model_size = int(
            v.scalar(reward_model_size, "reward_model_size", positive=True)
        )
    rewards = [
        (tr("rule checker"), None),
        (tr("reward model"), reward_model_size),
    ]

    mem_title = (
        tr("logical state per GPU (GB, sharded over {n})", n=base.n_gpus)
        if base.shard_states
        else tr("logical state (GB, unsharded)")
    )
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.62, 0.38],
        horizontal_spacing=0.1,
        subplot_titles=(tr("estimated seconds per step"), mem_title),
    )
    scenarios = []  # (label, [trace indices per answer length], memory trace indices)
    for n in sizes:
        for rlabel, rsize in rewards:
            rparams = None if rsize is None else (n if rsize == "same" else int(rsize))
            label = tr("{size} policy, {reward}", size=_size_label(n), reward=rlabel)
            per_len = []
            for L in lens:
                w = base.with_(n_params=n, answer_len=L, reward_params=rparams)
                idx = []
                for name, ys in _curves(w, gs, t).items():
                    fig.add_trace(
                        go.Scatter(
                            x=gs,
                            y=_r4(ys),
                            name=tr(name),
                            mode="lines+markers",
                            line=dict(width=2, **_LINE_STYLE[name]),
                            visible=False,
                            legendgroup=name,
                            hovertemplate=tr(name)
                            + "<br>G=%{x}<br>%{y:.3g} s<extra></extra>",
                        ),
                        row=1,
                        col=1,
                    )
                    idx.append(len(fig.data) - 1)
                per_len.append(idx)
            w = base.with_(n_params=n, reward_params=rparams)
            costs = compare(w)
            mem_idx = []
            for comp, color in _MEM_COLORS.items():
                ys = [costs[a].memory.get(comp, 0.0) / GB for a in ALGORITHMS]
                fig.add_trace(
                    go.Bar(
                        x=[LABELS[a] for a in ALGORITHMS],
                        y=_r4(ys),
                        name=tr(comp),
                        marker_color=color,
                        visible=False,
                        legendgroup=comp,
                        showlegend=True,
                        hovertemplate=tr(comp) + "<br>%{y:.1f} GB<extra></extra>",
                    ),
                    row=1,
                    col=2,
                )
                mem_idx.append(len(fig.data) - 1)
            scenarios.append((label, per_len, mem_idx))

    n_traces = len(fig.data)
    default_len = min(range(len(lens)), key=lambda i: abs(lens[i] - 1024))

    def visible(s, li):
        vis = [False] * n_traces
        for i in scenarios[s][1][li] + scenarios[s][2]:
            vis[i] = True
        return vis

    # the first scenario is the base workload's policy size (if listed) with a rule
    # checker
    first = next((2 * i for i, n in enumerate(sizes) if n == base.n_params), 0)
    sliders = []
    for s, (label, per_len, _) in enumerate(scenarios):
        steps = [
            dict(method="restyle", label=str(L), args=[{"visible": visible(s, li)}])
            for li, L in enumerate(lens)
        ]
        sliders.append(
            dict(
                active=default_len,
                steps=steps,
                visible=(s == first),
                x=0.0,
                len=0.62,
                y=-0.1,
                yanchor="top",
                currentvalue=dict(
                    prefix=tr("answer length (tokens): "), font=dict(size=12)
                ),
                pad=dict(t=30, b=0),
            )
        )
    buttons = []
    for s, (label, _, _) in enumerate(scenarios):
        layout = {f"sliders[{j}].visible": (j == s) for j in range(len(scenarios))}
        layout.update(
            {f"sliders[{j}].active": default_len for j in range(len(scenarios))}
        )
        buttons.append(
            dict(
                method="update",
                label=label,
                args=[{"visible": visible(s, default_len)}, layout],
            )
        )
    for i, on in enumerate(visible(first, default_len)):
        fig.data[i].visible = on
    fig.update_layout(
        sliders=sliders,
        updatemenus=[
            dict(
                buttons=buttons,
                direction="down",
                x=0.0,
                xanchor="left",
                y=1.13,
                yanchor="bottom",
                showactive=True,
                active=first,
                pad=dict(t=0, b=0),
            )
        ],
        barmode="stack",
        height=720,
        template="plotly_white",
        margin=dict(t=120, b=230, l=60, r=20),
        legend=dict(orientation="h", y=-0.5, yanchor="top", x=0.0, font=dict(size=11)),
        title=dict(
            text=tr(
                "One step: {prompts} prompts of {tokens} tokens on {gpus} GPUs "
                "(illustrative throughputs)",
                prompts=base.prompts,
                tokens=base.prompt_len,
                gpus=base.n_gpus,
            ),
            x=0.0,
            xanchor="left",
            y=0.985,
            font=dict(size=13),
        ),
    )
    fig.update_xaxes(
        type="log",
        title_text=tr("group size G"),
        tickvals=gs,
        ticktext=[str(g) for g in gs],
        row=1,
        col=1,
    )
    fig.update_yaxes(type="log", dtick=1, title_text=tr("seconds"), row=1, col=1)
    if plotly_font():
        fig.update_layout(font=plotly_font())
    return fig


def cost_explorer(base: Workload | None = None, throughput: Throughput | None = None):
    """An ipywidgets UI that recomputes the budget live: model size, G, prompt/answer
    lengths, reward model, LoRA, GPUs, sharding and service placement. Returns the
    widget (display it in Jupyter or Colab).

    Core widgets only (ipywidgets 7.6+ or 8), so it also runs in Colab. In a chapter,
    put it in a cell tagged ``remove-cell`` and ``skip-execution``: the static page
    shows :func:`cost_figure` instead."""
    import ipywidgets as W

    from .widgets import in_kernel

    base = Workload(n_params=int(7e9)) if base is None else base
    t = Throughput() if throughput is None else throughput
    style = {"description_width": "150px"}
    lay = W.Layout(width="420px")

    def slider(key, description, lo, hi, log=False, **kw):
        cls = W.FloatLogSlider if log else W.IntSlider
        extra = {"base": 10} if log else {}
        return cls(
            value=getattr(base, key),
            min=lo,
            max=hi,
            description=description,
            style=style,
            layout=lay,
            **extra,
            **kw,
        )

    def checkbox(key, description):
        return W.Checkbox(value=getattr(base, key), description=description)

    c = {
        "n_params": slider(
            "n_params",
            tr("policy parameters"),
            8.5,
            11,
            True,
            step=0.05,
            readout_format=".3g",
        ),
        "group_size": slider("group_size", "G (GRPO)", 2, 128),
        "ppo_samples": slider("ppo_samples", tr("PPO answers/prompt"), 1, 128),
        "prompts": slider("prompts", tr("prompts per step"), 1, 1024),
        "prompt_len": slider("prompt_len", tr("prompt tokens"), 16, 8192, step=16),
        "answer_len": slider("answer_len", tr("answer tokens"), 16, 32768, step=16),
        "reward": W.Dropdown(
            options=[(tr("rule checker (no model)"), 0.0)]
            + [
                (tr("reward model, {size}", size=size), n_params)
                for size, n_params in (("1.5B", 1.5e9), ("7B", 7e9), ("70B", 70e9))
            ],
            value=0.0,
            description=tr("reward"),
            style=style,
            layout=lay,
        ),
        "inner_epochs": slider("inner_epochs", tr("updates per rollout"), 1, 8),
        "trainable_fraction": slider(
            "trainable_fraction",
            tr("trainable fraction"),
            -4,
            0,
            True,
            step=0.25,
            readout_format=".2g",
        ),
        "n_gpus": slider("n_gpus", tr("GPUs"), 1, 256),
        "shard_states": checkbox("shard_states", tr("shard states (ZeRO-3/FSDP)")),
        "critic_remote": checkbox("critic_remote", tr("critic in a separate service")),
        "reward_remote": checkbox("reward_remote", tr("reward scorer remote")),
    }
    out = W.Output()
    state = {}

    def render(*_):
        kw = {k: w.value for k, w in c.items() if k != "reward"}
        kw["n_params"] = int(kw["n_params"])
        kw["reward_params"] = int(c["reward"].value) or None
        w = base.with_(**kw)
        crit = critic_cost(w.with_(ppo_samples=w.group_size), t)
        grpo = step_time(step_cost("grpo", w), t)
        state["workload"] = w
        state["text"] = format_rows(budget_rows(w, t))
        state["note"] = tr(
            "critic of PPO at the same rollout: {gb:.1f} GB state per GPU, "
            "{seconds:.3g} s per step; GRPO generation + scoring: "
            "{rollout:.3g} s per step",
            gb=crit["state_bytes"] / GB,
            seconds=crit["seconds"],
            rollout=grpo["generation"] + grpo["scoring"],
        )
        if not in_kernel():
            return
        # the outputs are set, not captured with `with out:` (see
        # dpo_grpo.interactive.widgets.display_data)
        out.outputs = (
            {
                "output_type": "display_data",
                "metadata": {},
                "data": {"text/html": state["text"], "text/plain": state["note"]},
            },
            {"output_type": "stream", "name": "stdout", "text": state["note"] + "\n"},
        )

    for w in c.values():
        if hasattr(w, "continuous_update"):
            w.continuous_update = False  # recompute when a slider is released
        w.observe(render, names="value")
    render()
    note = W.HTML(
        tr(
            "<small>Times use illustrative throughputs (see "
            "<code>dpo_grpo.chapters.costs.Throughput</code>); measure your own with "
            "<code>dpo_grpo.chapters.phase_timer.PhaseTimer</code>.</small>"
        )
    )
    ui = W.HBox([W.VBox(list(c.values()) + [note]), out])
    # for programmatic use: ui.controls["group_size"].value = 16
    ui.controls, ui.state = c, state
    return ui
