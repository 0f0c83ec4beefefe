"""The registry of explorables (dpo_grpo.interactive.registry), and the four of chapters
6-10 in it (length normalisation, difficulty weighting, DPO dynamics, reusing a
generation batch): hand-checked data, exact static sliders in every combination, and
live widgets."""

import math

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from dpo_grpo.chapters import trl_questions as tq  # noqa: E402

from dpo_grpo.interactive import (  # noqa: E402
    clip_reuse,
    difficulty,
    dpo_dynamics,
    length_norm,
    registry,
)
from dpo_grpo.interactive.explorable import (  # noqa: E402
    figure_html_size,
    flatten_attributes,
    same_value,
    set_layout_path,
)


def test_length_norm_matches_each_loss_types_denominator():
    d = length_norm.length_norm_data(
        other_length=100, max_completion_length=512, group_size=4
    )
    lens = d["lengths"]
    np.testing.assert_allclose(d["push"]["grpo"][1], 1 / (4 * lens))  # 1/(B |y_i|)
    # 1/(B L_max)
    np.testing.assert_allclose(
        d["push"]["dr_grpo"][1], np.full(lens.shape, 1 / (4 * 512))
    )
    # 1/(tokens in the batch)
    np.testing.assert_allclose(d["push"]["dapo"][1], 1 / (lens + 300))
    np.testing.assert_allclose(d["push"]["bnpo"][-1], -1 / (lens + 300))
    # every answer the same total
    np.testing.assert_allclose(d["total"]["grpo"][1], np.full(lens.shape, 0.25))
    with pytest.raises(ValueError, match="max_completion_length"):
        length_norm.length_norm_data(other_length=600)


def test_difficulty_weights_by_hand():
    d = difficulty.difficulty_data(group_size=8)
    assert d["relative"]["none"][1] == pytest.approx(1.75 / 4)
    s1, s4 = math.sqrt(7 / 56), math.sqrt(16 / 56)  # sample std of k = 1 and k = 4 of 8
    assert d["relative"]["group"][1] == pytest.approx(
        (1.75 / (s1 + 1e-4)) / (4 / (s4 + 1e-4))
    )
    assert d["weight"]["group"][0] == d["weight"]["group"][8] == 0.0
    # one scale for all groups
    np.testing.assert_allclose(d["relative"]["batch"], d["relative"]["none"], rtol=1e-3)
    # the std division up-weights k = 1
    assert d["relative"]["group"][1] / d["relative"]["none"][1] > 1.5


def test_dpo_dynamics_panels_are_the_displacement_runs():
    d = dpo_dynamics.dpo_dynamics_data(beta=0.5, similarity=0.0, steps=30)
    want = tq.dpo_displacement(beta=0.5, similarity=0.9, steps=30)
    np.testing.assert_array_equal(d["by_beta"]["chosen"], want["chosen"])
    np.testing.assert_array_equal(
        d["by_similarity"]["margins"],
        tq.dpo_displacement(beta=0.1, similarity=0.0, steps=30)["margins"],
    )


def test_clip_reuse_first_step_is_on_policy_and_reuse_clips():
    one = clip_reuse.reuse_run(1, 1)
    assert (
        one["clip"].max() == 0.0
        and one["spread"].max() == 0.0
        and one["on_policy"].all()
    )
    four = clip_reuse.reuse_run(4, 1)
    assert len(four["clip"]) == 48 and four["on_policy"].sum() == 12
    assert (
        four["clip"][four["on_policy"]].max() == 0.0
        and four["clip"][~four["on_policy"]].mean() > 0.1
    )
    assert (
        clip_reuse.reuse_run(1, 8)["clip"].mean()
        > clip_reuse.reuse_run(1, 2)["clip"].mean()
        > 0
    )
    with pytest.raises(ValueError, match="num_iterations"):
        clip_reuse.reuse_run(0)


SPECS = {
    "length_norm": length_norm.LENGTH_NORM,
    "difficulty": difficulty.DIFFICULTY,
    "dpo_dynamics": dpo_dynamics.DPO_DYNAMICS,
    "clip_reuse": clip_reuse.CLIP_REUSE,
}


def test_registry_lists_every_explorable_once_by_its_spec_name():
    assert (
        list(registry.FIGURES) == list(registry.WIDGETS) == list(registry.EXPLORABLES)
    )
    assert all(spec.name == name for name, spec in registry.EXPLORABLES.items())
    assert {name: registry.EXPLORABLES[name] for name in SPECS} == SPECS
    assert len(registry.EXPLORABLES) == 11  # chapters 1-5's seven and these four


@pytest.mark.parametrize("name", list(SPECS))
def test_every_slider_combination_is_exact_and_small(name):
    spec, fig = SPECS[name], registry.FIGURES[name]().to_plotly_json()
    assert fig["layout"]["meta"]["explorable"] == name
    assert figure_html_size(fig) < 300_000
    grid = list(spec.grid.items())
    rng = np.random.default_rng(0)
    for _ in range(4):
        choice = [int(rng.integers(len(values))) for _, values in grid]
        shown = [dict(t) for t in spec.state()[1]]
        for slider, j in zip(fig["layout"]["sliders"], choice):
            data_update, _, traces = slider["steps"][j]["args"]
            for attr, values in data_update.items():
                for value, i in zip(values, traces):
                    set_layout_path(shown[i], attr, value)
        params = {p: values[j] for (p, values), j in zip(grid, choice)}
        want = spec.state(**params)[1]
        for got, exp in zip(shown, want):
            g, e = flatten_attributes(got), flatten_attributes(exp)
            assert all(same_value(g.get(k), e.get(k)) for k in set(g) | set(e)), (
                name,
                params,
            )


@pytest.mark.parametrize("name", list(SPECS))
def test_widget_builds_and_recomputes(name):
    ui = registry.WIDGETS[name]()
    assert ui.error is None and ui.figure is not None
    first = [t["y"] for t in ui.figure["data"]]
    key = next(iter(SPECS[name].grid))
    control = ui.controls[key]
    control.value = control.max if control.value != control.max else control.min
    assert ui.error is None
    assert [t["y"] for t in ui.figure["data"]] != first
    want = SPECS[name].figure_dict(**ui.params())
    assert [flatten_attributes(t) for t in ui.figure["data"]] == [
        flatten_attributes(t) for t in want["data"]
    ]
