"""The lab page's figures (:mod:`dpo_grpo.lab.figures`) and printed tables
(:mod:`dpo_grpo.lab.report`): each draws or prints what the page showed, with English
words by default and Chinese words under DPO_GRPO_LANG=zh (the Chinese edition runs the
same code cells), the numbers unchanged; bad arguments are named."""

from __future__ import annotations

import dataclasses
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
from dpo_grpo.lab import (
    LabHistory,
    report,
    sweep,
)
from dpo_grpo.lab import figures as lf
from matplotlib import rcParams
from testing_support import drawn_as_boxes

HAN = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"[+-]?\d+\.\d+")
METHODS = {"GRPO": "grpo", "PPO": "ppo", "DPO": "dpo", "DPO + NLL": "dpo+nll"}
METHODS["RFT"] = "rft"


@pytest.fixture(autouse=True)
def _english_and_fonts_restored(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    saved = list(rcParams["font.sans-serif"])
    yield
    rcParams["font.sans-serif"] = saved
    plt.close("all")


def history(algorithm="grpo", n=6) -> LabHistory:
    """A history whose every per-step list holds ``n`` values and every evaluation
    list ``n // 2 + 1`` (no training needed)."""
    h = LabHistory(algorithm, 0, {})
    n_eval = n // 2 + 1
    for f in dataclasses.fields(h):
        if f.type == "list" or (f.default_factory is list):
            length = n_eval if f.name.startswith(("eval_", "heldout_")) else n
            setattr(h, f.name, list(np.linspace(0.1, 0.9, length)))
    h.step = list(range(1, n + 1))
    h.eval_step = list(range(0, n + 1, 2))
    h.eval_pair_margin = list(np.linspace(0.1, 0.9, n_eval - 1))
    return h


def titles(fig) -> list[str]:
    return [ax.get_title() for ax in fig.axes]


def words(fig) -> list[str]:
    """Every visible string of the figure: titles, axis titles, legend entries and the
    suptitle."""
    out = []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        if ax.get_legend():
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    if fig._suptitle is not None:
        out.append(fig._suptitle.get_text())
    return [s for s in out if s]


RUNS = {name: history(algo) for name, algo in METHODS.items()}
BY_POS = {0: {"right": 0.3, "wrong": 0.2}, 1: {"right": 0.35, "wrong": 0.25}}
EV = np.linspace(-0.2, 0.1, 12).reshape(3, 4)


def draw_all() -> dict:
    results = sweep.load("cpu")
    return {
        "learning_curves": lf.learning_curves(RUNS, temperature=1.0, seed=0),
        "pair_margins": lf.pair_margins(RUNS),
        "seed_results": lf.seed_results(results, METHODS),
        "critic_by_position": lf.critic_by_position(EV, BY_POS),
        "training_dashboard": lf.training_dashboard(RUNS["GRPO"]),
        "reward_hacking_figure": lf.reward_hacking_figure(RUNS["GRPO"], 8),
    }


ENGLISH_TITLES = {
    "learning_curves": ["greedy", "sampled pass@1 (T = 1.0)"],
    "pair_margins": [
        "margin over all training pairs",
        "implicit rewards (batch means)",
    ],
    "seed_results": [
        "final greedy (dots: seeds; square: mean, 95% t)",
        "final sampled (dots: seeds; square: mean, 95% t)",
    ],
    "critic_by_position": [
        "explained variance of the returns",
        "critic's value by position (dotted: realised return)",
    ],
    "training_dashboard": [
        "reward and held-out pass rate",
        "fraction of groups",
        "clip ratio (fraction of tokens clipped)",
        r"KL to the reference ($k_3$, token mean)",
        "completion length (tokens, EOS included)",
        "gradient norm (before clipping)",
    ],
    "reward_hacking_figure": [
        "training reward (correct + bonus x characters)",
        "what we wanted: correct answers",
        "completion length",
    ],
}


def test_figures_in_english_have_the_pages_axes_and_titles():
    figs = draw_all()
    for name, fig in figs.items():
        assert titles(fig) == ENGLISH_TITLES[name], name
        assert not any(HAN.search(s) for s in words(fig)), name
    lc = figs["learning_curves"]
    assert lc._suptitle.get_text() == (
        "Seed 0: four methods from the same SFT start, matched budgets"
    )
    assert lc.axes[0].get_ylabel() == "held-out pass rate"
    assert [t.get_text() for t in lc.axes[0].get_legend().get_texts()] == list(METHODS)
    legend = [t.get_text() for t in figs["pair_margins"].axes[1].get_legend().texts]
    assert legend[:2] == ["DPO + NLL: chosen", "DPO + NLL: rejected"]
    hack = figs["reward_hacking_figure"].axes[2].get_legend().get_texts()
    assert hack[1].get_text() == "fraction truncated x 8"
    assert all(ax.get_xlabel() == "GRPO step" for ax in figs["training_dashboard"].axes)


def test_figures_in_chinese(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    figs = draw_all()
    for name, fig in figs.items():
        assert len(fig.axes) == len(ENGLISH_TITLES[name]), name
        for title in titles(fig):
            assert HAN.search(title), (name, title)
        for s in words(fig):
            # method names, symbols and the mathtext y label stay as they are
            assert HAN.search(s) or s in METHODS or s.startswith("$"), (name, s)
    assert titles(figs["learning_curves"])[1] == "采样 pass@1（T = 1.0）"
    assert "$k_3$" in titles(figs["training_dashboard"])[3]
    assert figs["learning_curves"]._suptitle.get_text().startswith("随机种子 0")


def test_figures_in_chinese_draw_every_glyph(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    for name, fig in draw_all().items():
        assert drawn_as_boxes(fig) == [], name
    assert rcParams["font.sans-serif"][0] == "Noto Sans CJK SC"


def test_figures_name_bad_arguments():
    with pytest.raises(TypeError, match="runs"):
        lf.learning_curves([], temperature=1.0, seed=0)
    with pytest.raises(ValueError, match="runs has methods without a colour"):
        lf.learning_curves({"SFT": RUNS["GRPO"]}, temperature=1.0, seed=0)
    with pytest.raises(ValueError, match="temperature"):
        lf.learning_curves(RUNS, temperature=0.0, seed=0)
    with pytest.raises(ValueError, match="runs has no"):
        lf.pair_margins({"GRPO": RUNS["GRPO"]})
    with pytest.raises(ValueError, match="explained_variance"):
        lf.critic_by_position(np.zeros(3), BY_POS)
    with pytest.raises(ValueError, match="by_position"):
        lf.critic_by_position(EV, {})
    with pytest.raises(ValueError, match="max_completion_length"):
        lf.reward_hacking_figure(RUNS["GRPO"], 0)
    with pytest.raises(ValueError, match="history"):
        lf.training_dashboard(LabHistory("grpo", 0, {}))


# --- the printed tables ------------------------------------------------------------


ROLLOUT_ROWS = [
    {
        "completion_length": 2,
        "rollout_s": 0.0012,
        "train_pass_s": 0.0006,
        "rollout_over_train": 2.0,
    },
    {
        "completion_length": 16,
        "rollout_s": 0.0123,
        "train_pass_s": 0.0011,
        "rollout_over_train": 11.2,
    },
]
STATE = {"step": 3, "config": {"a": 1, "b": 2}, "rng": {"torch": 1, "numpy": 2}}
COST = {
    "grpo": {
        "trainable_parameters": 100,
        "optimizer_state_bytes": 2**21,
        "training_state_bytes": 2**22,
        "peak_memory_bytes": 2**23,
        "step_seconds_median": 0.5,
    },
    "ppo": {
        "trainable_parameters": 200,
        "optimizer_state_bytes": 2**22,
        "training_state_bytes": 2**23,
        "peak_memory_bytes": 2**24,
        "step_seconds_median": 0.75,
    },
}


def tables() -> dict:
    results = sweep.load("cpu")
    rob = {
        m: sweep.robustness_table(results, "grpo", "rft", m)
        for m in ("final_greedy", "final_sampled")
    }
    return {
        "error_profile": report.error_profile_table(
            {"SFT": (0.2, 0.02), "GRPO": (0.293, 0.1)}
        ),
        "seed_summary": report.seed_summary_text(results, METHODS),
        "robustness": report.robustness_text(rob),
        "cost": report.ppo_vs_grpo_cost_table(COST),
        "rollout": report.rollout_vs_train_text(ROLLOUT_ROWS),
        "state": report.state_listing(STATE),
    }


def test_tables_in_english_print_what_the_page_printed():
    t = tables()
    # the page's former print statements, verbatim
    assert t["error_profile"].splitlines() == [
        f"{'':<10} {'greedy':>7} {'no-carry share of errors':>25}",
        f"{'SFT':<10} {0.2:7.3f} {0.02:25.0%}",
        f"{'GRPO':<10} {0.293:7.3f} {0.1:25.0%}",
    ]
    assert t["rollout"].splitlines() == [
        "L =  2 tokens: sampling    1.2 ms, one training pass   0.6 ms, ratio  2.0",
        "L = 16 tokens: sampling   12.3 ms, one training pass   1.1 ms, ratio 11.2",
    ]
    # key: value, the key as code (the state's own name)
    assert t["state"].splitlines() == [
        "step:              3",
        "config:            2 entries",
        "rng:               2 entries",
        "random generators saved: ['torch', 'numpy']",
    ]
    assert t["cost"].splitlines()[1] == (
        f"{'trainable parameters':<26} {100:>12,.2f} {200:>12,.2f} {2:>9.2f}"
    )
    rob = t["robustness"].splitlines()
    assert rob[0] == "final greedy: GRPO, RFT, GRPO - RFT [95% t], seeds ahead, p"
    assert rob[1].startswith("  main runs ") and rob[1].endswith(" behind")
    summary = t["seed_summary"].splitlines()
    assert summary[0].startswith("SFT start, greedy: mean ")
    assert summary[3] == "final greedy" and summary[4].startswith("  GRPO ")
    for text in t.values():
        assert not HAN.search(text)


def test_tables_in_chinese_have_chinese_words_and_the_same_numbers(monkeypatch):
    en = tables()
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    zh = tables()
    for key in en:
        assert HAN.search(zh[key]), key
        assert NUMBER.findall(zh[key]) == NUMBER.findall(en[key]), key
        assert len(zh[key].splitlines()) == len(en[key].splitlines()), key
    assert "错误中不进位答案的占比" in zh["error_profile"]
    assert zh["robustness"].splitlines()[1].startswith("  主实验")
    assert zh["state"].splitlines()[-1].startswith("保存的随机数生成器：")


def test_tables_name_bad_arguments():
    with pytest.raises(TypeError, match="table"):
        report.error_profile_table([(0.1, 0.2)])
    with pytest.raises(ValueError, match="metric"):
        report.robustness_text({"best_greedy": []})
    with pytest.raises(ValueError, match="a must be one of"):
        report.robustness_text({}, a="sft")
    with pytest.raises(TypeError, match="state"):
        report.state_listing(None)
    with pytest.raises(TypeError, match="cost"):
        report.ppo_vs_grpo_cost_table(None)
