"""The explorables' pure data functions (hand-computed values) and their static plotly figures (sliders, size,
exactness of every slider combination, offline HTML)."""

import math
import subprocess
import sys

import numpy as np
import pytest

from dpo_grpo.interactive import explorables as xp
from dpo_grpo.reference.advantages import group_advantages
from dpo_grpo.reference.bandit import bandit_trajectory

plotly = pytest.importorskip("plotly")

from dpo_grpo.interactive import figures as F  # noqa: E402

# noqa: E402
from dpo_grpo_book import (
    PLOTLY_MIME,
    PlotlyMimeRenderer,
    dedupe_scripts,
    plotly_fragment,
)

# ----------------------------------------------------------------------------------------------------------------
# Pure data functions
# ----------------------------------------------------------------------------------------------------------------


def _at(d, key, rho):
    i = int(np.argmin(np.abs(d["rho"] - rho)))
    assert abs(d["rho"][i] - rho) < 1e-9
    return d[key][i]


def test_clip_platform_boundaries_and_values():
    d = xp.clip_platform_data(epsilon=0.2)
    assert d["bounds"] == {"low": 0.8, "high": 1.2, "delta": None}
    # A = +1: min(rho, 1.2) on the right, rho itself on the left (not clipped, wrong direction)
    assert _at(d, "objective_pos", 1.5) == pytest.approx(1.2)
    assert _at(d, "grad_pos", 1.5) == 0.0 and _at(d, "region_pos", 1.5) == "platform"
    assert _at(d, "objective_pos", 0.5) == pytest.approx(0.5)
    assert (
        _at(d, "grad_pos", 0.5) == 1.0
        and _at(d, "region_pos", 0.5) == "wrong_direction"
    )
    # A = -1: flat at -(1 - eps) on the left, keeps -rho on the right
    assert _at(d, "objective_neg", 0.5) == pytest.approx(-0.8)
    assert _at(d, "grad_neg", 0.5) == 0.0 and _at(d, "region_neg", 0.5) == "platform"
    assert _at(d, "objective_neg", 1.5) == pytest.approx(-1.5)
    assert (
        _at(d, "grad_neg", 1.5) == -1.0
        and _at(d, "region_neg", 1.5) == "wrong_direction"
    )
    assert _at(d, "region_pos", 1.0) == "inside" and _at(d, "grad_pos", 1.0) == 1.0
    # the boundaries are where the gradient switches: 1.2 itself is still inside, 1.205 on the platform
    assert _at(d, "grad_pos", 1.2) == 1.0 and _at(d, "grad_pos", 1.205) == 0.0
    assert _at(d, "grad_neg", 0.8) == -1.0 and _at(d, "grad_neg", 0.795) == 0.0


def test_clip_platform_asymmetric_and_delta():
    d = xp.clip_platform_data(epsilon=0.2, epsilon_high=0.28, delta=1.4)
    assert d["bounds"] == {"low": 0.8, "high": 1.28, "delta": 1.4}
    assert (
        _at(d, "objective_pos", 1.25) == pytest.approx(1.25)
        and _at(d, "grad_pos", 1.25) == 1.0
    )
    assert _at(d, "objective_pos", 1.3) == pytest.approx(1.28)
    # delta caps the unclipped wrong-direction branch for A < 0: flat at -delta, gradient 0
    assert _at(d, "objective_neg", 1.5) == pytest.approx(-1.4)
    assert _at(d, "grad_neg", 1.5) == 0.0 and _at(d, "capped_neg", 1.5)
    assert _at(d, "objective_neg", 1.35) == pytest.approx(-1.35) and not _at(
        d, "capped_neg", 1.35
    )
    with pytest.raises(ValueError):
        xp.clip_platform_data(delta=0.9)


def test_clip_examples_are_the_articles_and_the_gallery_claims_hold():
    seq = xp.example_sequences()
    np.testing.assert_allclose(
        seq["ratio"], [1.2840, 1.1052, 0.7788, 0.9048], atol=5e-5
    )
    np.testing.assert_allclose(
        seq["advantage"], group_advantages(xp.ex.REWARD_GROUPS[:1])[0]
    )
    assert list(xp.clip_platform_data()["examples"]["region"]) == [
        "wrong_direction",
        "inside",
        "wrong_direction",
        "inside",
    ]
    assert (
        xp.clip_platform_data(epsilon_high=0.1)["examples"]["region"][1] == "platform"
    )
    assert xp.clip_platform_data(epsilon=0.05)["examples"]["region"][3] == "platform"
    ex = xp.clip_platform_data()["examples"]
    # objective per unit |A| for answer 1 (A > 0, rho = 1.1052 inside): rho itself
    assert ex["objective_unit"][1] == pytest.approx(ex["ratio"][1])
    assert ex["objective"][0] == pytest.approx(ex["ratio"][0] * ex["advantage"][0])


def test_zero_std_matches_p_to_the_G_plus_one_minus_p_to_the_G():
    d = xp.zero_std_data(group_size=8, pass_rate=0.8, eps=1e-4)
    assert d["probability"] == pytest.approx(0.8**8 + 0.2**8)
    assert d["probability"] == pytest.approx(0.16777472)
    np.testing.assert_allclose(d["prob_vs_p"], d["p"] ** 8 + (1 - d["p"]) ** 8)
    np.testing.assert_allclose(d["prob_vs_g"], 0.8 ** d["g"] + 0.2 ** d["g"])
    assert (
        d["prob_vs_p"][0] == 1.0
        and d["prob_vs_p"][-1] == 1.0
        and d["prob_vs_p"][50] == pytest.approx(2 * 0.5**8)
    )
    # seeded Monte Carlo: within 5 binomial standard errors of the exact value
    exact = d["mc_p"] ** 8 + (1 - d["mc_p"]) ** 8
    se = np.sqrt(exact * (1 - exact) / d["n_groups"]) + 1e-12
    assert np.all(np.abs(d["mc_vs_p"] - exact) <= 5 * se + 1e-9)
    again = xp.zero_std_data(group_size=8, pass_rate=0.8, eps=1e-4)
    np.testing.assert_array_equal(again["mc_vs_p"], d["mc_vs_p"])  # seeded
    # batch: the mean over its prompts of p_i^G + (1 - p_i)^G
    b = d["batch_pass_rates"]
    assert (
        b.size == 256
        and np.all((b >= 0) & (b <= 1))
        and b.mean() == pytest.approx(0.8, abs=0.05)
    )
    assert d["batch_expected"] == pytest.approx(np.mean(b**8 + (1 - b) ** 8))
    # two-sample suppression d / (d + 2 eps)
    np.testing.assert_allclose(
        d["two_sample_at_gaps"], [1 / (1 + 2e-4), 0.01 / 0.0102, 1e-5 / (1e-5 + 2e-4)]
    )
    assert d["two_sample_at_gaps"][2] == pytest.approx(1 / 21)


def test_group_advantage_invariances_and_where_eps_breaks_them():
    r = np.array([0.2, 0.8, 1.4, 0.6])
    base = xp.group_advantage_data(r)
    np.testing.assert_allclose(
        base["advantages_ddof0"],
        [-1.26987733, 0.11544339, 1.50076411, -0.34633018],
        atol=1e-8,
    )
    std0, std1 = math.sqrt(0.1875), math.sqrt(0.25)
    assert base["std_ddof0"] == pytest.approx(std0) and base[
        "std_ddof1"
    ] == pytest.approx(std1)
    np.testing.assert_allclose(base["advantages_ddof1"], (r - 0.75) / (std1 + 1e-4))
    # shift: unchanged (up to rounding of r + b)
    np.testing.assert_allclose(
        xp.group_advantage_data(r, shift=-100.0)["advantages_ddof0"],
        base["advantages_ddof0"],
        atol=1e-10,
    )
    # scale a > 0: (r - m) / (std + eps / a)
    for a in (10.0, 1e-2, 1e-4):
        got = xp.group_advantage_data(r, scale=a)["advantages_ddof0"]
        np.testing.assert_allclose(got, (r - 0.75) / (std0 + 1e-4 / a), rtol=1e-9)
    shrink = (
        xp.group_advantage_data(r, scale=1e-4)["advantages_ddof0"]
        / base["advantages_ddof0"]
    )
    # about 0.30
    np.testing.assert_allclose(shrink, (std0 + 1e-4) / (std0 + 1.0), rtol=1e-6)
    # negative scale flips the signs
    np.testing.assert_allclose(
        xp.group_advantage_data(r, scale=-1.0)["advantages_ddof0"],
        -base["advantages_ddof0"],
        atol=1e-12,
    )
    curve = base["best_advantage_vs_scale"][1e-4]
    assert base["scales"][-1] == 100.0 and base["scales"][0] == pytest.approx(1e-7)
    assert (
        curve[-1] == pytest.approx(0.65 / (std0 + 1e-4 / 100)) and abs(curve[0]) < 1e-2
    )
    with pytest.raises(ValueError):
        xp.group_advantage_data(np.arange(17.0))


def test_dpo_data_margin_loss_and_weight():
    d = xp.dpo_data(beta=0.1)
    assert d["margin"] == pytest.approx((-2.2 + 2.0) - (-2.8 + 2.4))
    assert d["margin"] == pytest.approx(0.2) and d["logit"] == pytest.approx(0.02)
    assert d["pair_loss"] == pytest.approx(math.log1p(math.exp(-0.02)))
    assert d["pair_weight"] == pytest.approx(1 / (1 + math.exp(0.02)))
    assert d["chosen_reward"] == pytest.approx(-0.02) and d[
        "rejected_reward"
    ] == pytest.approx(-0.04)
    mid = int(np.argmin(np.abs(d["margin_grid"])))
    assert d["loss"][mid] == pytest.approx(math.log(2)) and d["weight"][
        mid
    ] == pytest.approx(0.5)
    m = d["margin_grid"]
    np.testing.assert_allclose(d["loss_by_beta"][0.5], np.log1p(np.exp(-0.5 * m)))


def test_kl_estimators_and_the_off_policy_bias():
    d = xp.kl_estimator_data(delta=0.5, mix=1.0)
    assert d["at_delta"] == pytest.approx(
        {"k1": -0.5, "k2": 0.125, "k3": math.exp(0.5) - 1.5}
    )
    p, q, old = (
        np.array([0.7, 0.2, 0.1]),
        np.array([0.2, 0.3, 0.5]),
        np.array([0.3, 0.3, 0.4]),
    )
    exact = float(np.sum(p * np.log(p / q)))
    assert d["exact"] == pytest.approx(exact) and exact == pytest.approx(
        0.634897, abs=1e-6
    )
    k3 = q / p - np.log(q / p) - 1
    assert d["biased"] == pytest.approx(float(old @ k3))
    assert d["biased"] == pytest.approx(1.146128, abs=1e-6)
    assert d["corrected"] == pytest.approx(exact)
    np.testing.assert_allclose(d["corrected_vs_mix"], exact)
    assert d["biased_vs_mix"][0] == pytest.approx(exact)  # t = 0 samples from p itself
    np.testing.assert_allclose(
        xp.kl_estimator_data(mix=0.3)["sampling"], 0.7 * p + 0.3 * old
    )


def test_bandit_data_is_the_seeded_trajectory():
    d = xp.bandit_data(group_size=8, seed=3, steps=20)
    np.testing.assert_array_equal(
        d["probs"], bandit_trajectory(steps=20, group_size=8, seed=3)
    )
    assert d["probs"].shape == (21, 4) and d["best"] == 2
    np.testing.assert_allclose(d["probs"][0], 0.25)
    np.testing.assert_allclose(d["probs"].sum(axis=1), 1.0)


def test_bandit_data_extends_a_kept_run_instead_of_rerunning(monkeypatch):
    monkeypatch.setattr(xp, "_BANDIT_RUNS", type(xp._BANDIT_RUNS)())
    short = xp.bandit_data(group_size=8, seed=5, steps=10)
    run = next(iter(xp._BANDIT_RUNS.values()))
    assert run.steps_run == 10
    # runs steps 11..40 only, on the same run
    long = xp.bandit_data(group_size=8, seed=5, steps=40)
    assert len(xp._BANDIT_RUNS) == 1 and run.steps_run == 40
    back = xp.bandit_data(group_size=8, seed=5, steps=25)  # a prefix: nothing runs
    assert run.steps_run == 40
    full = bandit_trajectory(steps=40, group_size=8, seed=5)
    np.testing.assert_array_equal(long["probs"], full)
    np.testing.assert_array_equal(short["probs"], full[:11])
    np.testing.assert_array_equal(back["probs"], full[:26])
    long["probs"][:] = 0  # callers own their arrays: the kept run is untouched
    np.testing.assert_array_equal(
        xp.bandit_data(group_size=8, seed=5, steps=40)["probs"], full
    )
    xp.bandit_data(group_size=8, seed=6, steps=10)
    assert len(xp._BANDIT_RUNS) == 2  # another seed is another run


def test_bandit_data_keeps_a_bounded_number_of_runs(monkeypatch):
    monkeypatch.setattr(xp, "_BANDIT_RUNS", type(xp._BANDIT_RUNS)())
    monkeypatch.setattr(xp, "_BANDIT_RUNS_MAX", 3)
    for seed in range(5):
        xp.bandit_data(group_size=4, seed=seed, steps=2)
    assert [key[1] for key in xp._BANDIT_RUNS] == [2, 3, 4]  # least recently used out


@pytest.mark.parametrize(
    "bad, exc, match",
    [
        (dict(seed=True), TypeError, "seed"),
        (dict(beta=[1]), TypeError, "beta"),
        (dict(reward_table=[[1, 2], [3, 4]]), ValueError, "reward_table"),
        (dict(steps=0), ValueError, "steps"),
    ],
)
def test_bandit_data_validates_every_call(bad, exc, match):
    # a kept run with seed 1 must not let seed=True through
    xp.bandit_data(seed=1, steps=3)
    with pytest.raises(exc, match=match):
        xp.bandit_data(**{"seed": 1, "steps": 3, **bad})


def test_memory_ledger_totals():
    d = xp.memory_ledger_data()  # 7B, bf16 + fp32 master + AdamW
    assert d["policy_bytes"] == 112 * 10**9 and d["policy_bytes_per_param"] == 16
    # PPO: 2 x 112 + 14 + 14; GRPO: 112 + 14 + 14
    assert d["totals_gb"] == pytest.approx([252.0, 140.0, 126.0])
    assert d["totals_gib"][0] == pytest.approx(252e9 / 2**30)
    for k, alg in enumerate(d["algorithms"]):
        assert sum(c[k] for c in d["components"].values()) == d["totals_bytes"][k]
    assert d["components"]["critic (trainable state)"] == [112 * 10**9, 0, 0]
    assert xp.memory_ledger_data(precomputed_reference=True)["totals_gb"][
        2
    ] == pytest.approx(112.0)
    # rule-based
    assert xp.memory_ledger_data(grpo_reward_model=False)["totals_gb"][
        1
    ] == pytest.approx(126.0)
    assert xp.memory_ledger_data(reward_model=False)["totals_gb"][0] == pytest.approx(
        238.0
    )
    for name, per_param in (
        ("fp32 + AdamW", 16),
        ("bf16 + AdamW, no master", 12),
        ("bf16 + fp32 master + SGD-momentum", 12),
    ):
        got = xp.memory_ledger_data(10**9, **xp.MEMORY_RECIPES[name])
        assert got["policy_bytes_per_param"] == per_param, name


def test_import_dpo_grpo_pulls_in_neither_plotly_nor_ipywidgets():
    code = (
        "import sys, dpo_grpo, dpo_grpo.interactive.explorables; "
        "bad = [m for m in ('plotly', 'ipywidgets') if m in sys.modules]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------------------------------------------
# Static figures
# ----------------------------------------------------------------------------------------------------------------

STEPS = {
    "clip_platform": [8, 8, 5],
    "zero_std": [13, 19, 7],
    "group_advantage": [12],
    "dpo": [9],
    "kl_estimator": [11, 11],
    "bandit": [6, 7, 6, 6, 10],
    "memory_ledger": [10, 4],
}


@pytest.fixture(scope="module")
def built():
    return {name: fn() for name, fn in F.FIGURES.items()}


@pytest.mark.parametrize("name", list(F.FIGURES))
def test_figure_has_the_expected_sliders_and_defaults(built, name):
    fig, spec = built[name], F.EXPLORABLES[name]
    assert [len(s.steps) for s in fig.layout.sliders] == STEPS[name]
    assert [s["param"] for s in fig.layout.meta["sliders"]] == list(spec.grid)
    assert fig.layout.meta["explorable"] == name
    for slider, (param, values) in zip(fig.layout.sliders, spec.grid.items()):
        assert slider.active == [F._jsonable(v) for v in values].index(
            F._jsonable(spec.defaults[param])
        )
        assert all(step.method == "update" for step in slider.steps)


def test_figures_stay_under_the_page_budget(built):
    sizes = {name: F.figure_html_size(fig) for name, fig in built.items()}
    assert all(size < 300_000 for size in sizes.values()), sizes
    assert sum(sizes.values()) < F.PAGE_BUDGET_BYTES  # the gallery page holds all seven


def _apply_steps(fig_dict, fig, choice):
    """Emulate plotly.js: apply slider k's step choice[k] (Plotly.update with per-trace values)."""
    for slider, j in zip(fig["layout"]["sliders"], choice):
        data_update, layout_update, traces = slider["steps"][j]["args"]
        for attr, values in data_update.items():
            for value, i in zip(values, traces):
                F._set_path(fig_dict["data"][i], attr, value)
        for path, value in layout_update.items():
            F._set_path(fig_dict["layout"], path, value)
    return fig_dict


def _flat_traces(traces):
    return [F._flatten(t) for t in traces]


@pytest.mark.parametrize("name", list(F.FIGURES))
def test_every_slider_combination_shows_the_data_at_those_parameters(built, name):
    """Sliders are independent in plotly; the figure is built so that their combination is still exact."""
    spec, fig = F.EXPLORABLES[name], built[name].to_plotly_json()
    rng = np.random.default_rng(0)
    grid = list(spec.grid.items())
    base = {
        "data": [dict(t) for t in spec.state()[1]],
        "layout": F.copy.deepcopy(fig["layout"]),
    }
    for _ in range(4):
        choice = [int(rng.integers(len(values))) for _, values in grid]
        shown = _apply_steps(
            {
                "data": F.copy.deepcopy(base["data"]),
                "layout": F.copy.deepcopy(base["layout"]),
            },
            fig,
            choice,
        )
        params = {param: values[j] for (param, values), j in zip(grid, choice)}
        _, traces, updates = spec.state(**params)
        for i, (got, want) in enumerate(
            zip(_flat_traces(shown["data"]), _flat_traces(traces))
        ):
            for key in set(got) | set(want):
                assert F._same(got.get(key), want.get(key)), (name, params, i, key)
        for path, value in updates.items():
            node = shown["layout"]
            for part in path.replace("]", "").replace("[", ".").split("."):
                node = node[int(part)] if part.isdigit() else node[part]
            assert node == value, (name, params, path)


def test_decoupling_is_enforced():
    spec = F.EXPLORABLES["zero_std"]
    coupled = F.Explorable(
        name="bad",
        title="",
        defaults=dict(spec.defaults),
        grid={"group_size": [2, 8], "pass_rate": [0.5, 0.8]},
        labels={},
        data=spec.data,
        layout=spec.layout,
        updates=lambda d: {},
        traces=lambda d: [
            {
                "type": "scatter",
                "x": [d["params"]["pass_rate"]],
                "y": [d["probability"]],
            }
        ],
    )
    with pytest.raises(ValueError, match="both change"):
        coupled.figure()


def test_figure_html_is_offline_and_deterministic(built):
    html = plotly_fragment(built["dpo"], div_id="x")
    assert (
        "Plotly.newPlot" in html
        and "<script src" not in html
        and "cdn" not in html.lower()
    )
    assert plotly_fragment(built["dpo"]) == plotly_fragment(F.dpo_figure())


def test_mime_renderer_registration_and_script_dedupe():
    assert ("html", PLOTLY_MIME, 5) in PlotlyMimeRenderer.mime_priority_overrides
    from importlib.metadata import entry_points

    names = [ep.value for ep in entry_points(group="myst_nb.mime_renderers")]
    assert "dpo_grpo_book:PlotlyMimeRenderer" in names

    class JS:
        def __init__(self, filename, body):
            self.filename, self.priority, self.attributes = (
                filename,
                500,
                {"body": body},
            )

    files = [
        JS(None, "const THEBE_JS_URL = 1"),
        JS("a.js", ""),
        JS("", "const THEBE_JS_URL = 1"),
    ]
    dedupe_scripts(files)
    assert [f.filename for f in files] == [None, "a.js"]


def test_gallery_claim_the_bandit_clip_binds_only_below_0_1():
    """book/explorables: with the chapter's learning rate, runs with eps >= 0.1 are identical; eps = 0.05 is not."""
    base = bandit_trajectory(steps=80, group_size=32, seed=7, epsilon=0.2)
    for eps in (0.1, 0.3, 0.4):
        np.testing.assert_array_equal(
            bandit_trajectory(steps=80, group_size=32, seed=7, epsilon=eps), base
        )
    assert (
        np.abs(
            bandit_trajectory(steps=80, group_size=32, seed=7, epsilon=0.05) - base
        ).max()
        > 0.05
    )
