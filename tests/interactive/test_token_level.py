"""dpo_grpo.interactive.token_level: the heat map of the token-level example and its
epsilon slider."""

import numpy as np
import pytest

pytest.importorskip("plotly")

from dpo_grpo.chapters import token_level as tl  # noqa: E402
from dpo_grpo.interactive import token_level as itl  # noqa: E402


def test_slider_steps_carry_the_gradient_at_each_epsilon():
    fig = itl.token_level_figure()
    (slider,) = fig.layout.sliders
    assert [s.label for s in slider.steps] == [f"{e:g}" for e in itl.EPSILON_GRID]
    for eps, step in zip(itl.EPSILON_GRID, slider.steps):
        data_update, layout_update, traces = step.args
        want = tl.token_table(epsilon=eps).grad
        z = data_update["z"][traces.index(1)]
        got = np.array([[np.nan if x is None else x for x in row] for row in z])
        mask = tl.token_level_example().mask > 0
        np.testing.assert_allclose(got[mask], want[mask], rtol=1e-3)
        n = int((tl.token_table(epsilon=eps).region == "platform").sum())
        assert f"{n} of 15 tokens" in layout_update["annotations[2].text"]


def test_epsilon_changes_which_tokens_are_clipped():
    small = itl.token_level_data(epsilon=0.05)["table"].region
    large = itl.token_level_data(epsilon=0.6)["table"].region
    assert (small == "platform").sum() > (large == "platform").sum()


def test_live_widget():
    pytest.importorskip("ipywidgets")
    ui = itl.token_level_widget()
    ui.controls["loss_type"].value = "dr_grpo"
    assert ui.error is None and ui.data["loss_type"] == "dr_grpo"
    ui.controls["epsilon"].value = 0.5
    assert ui.data["epsilon"] == 0.5


def test_chapter_3_figures_fit_the_page_budget():
    from dpo_grpo.interactive import (
        clip_platform,
        dpo_margin,
        group_advantage,
        kl_estimator,
        kl_variance,
        zero_std,
    )
    from dpo_grpo.interactive.explorable import PAGE_BUDGET_BYTES, figure_html_size

    figs = [
        dpo_margin.dpo_figure(),
        group_advantage.group_advantage_figure(),
        zero_std.zero_std_figure(),
        kl_estimator.kl_estimator_figure(),
        clip_platform.clip_platform_figure(),
        itl.token_level_figure(),
        kl_variance.kl_variance_figure(),
    ]
    assert sum(figure_html_size(f) for f in figs) < PAGE_BUDGET_BYTES
