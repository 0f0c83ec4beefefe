"""dpo_grpo.interactive.kl_variance: the bias/variance/gradient explorable of the KL
estimators."""

import numpy as np
import pytest

import dpo_grpo as dg
from dpo_grpo.reference import examples as ex

pytest.importorskip("plotly")

from dpo_grpo.interactive import kl_variance as kv  # noqa: E402


def test_data_at_the_article_example():
    d = kv.kl_variance_data(gap=1.0)
    np.testing.assert_allclose(d["policy"], ex.KL_EXAMPLE["p"], atol=1e-15)
    np.testing.assert_allclose(d["at"]["k3"].grad, [0.5, -0.1, -0.4], atol=1e-15)
    np.testing.assert_allclose(d["at"]["k2"].grad, d["true_grad"], atol=1e-15)
    assert d["exact"] == pytest.approx(
        dg.exact_kl(ex.KL_EXAMPLE["p"], ex.KL_EXAMPLE["q"])
    )
    # the curves: k1 and k3 unbiased everywhere, k2 biased (up or down) away from the
    # reference, all zero at g = 0
    np.testing.assert_allclose(d["mean"]["k1"], d["kl"], atol=1e-12)
    np.testing.assert_allclose(d["mean"]["k3"], d["kl"], atol=1e-12)
    assert (
        d["mean"]["k2"][50] - d["kl"][50] > 0.06
        and d["mean"]["k2"][-1] - d["kl"][-1] < -0.05
    )
    assert d["std"]["k3"][0] == 0 and d["std"]["k1"][0] == 0


def test_k3_variance_advantage_holds_near_the_reference_only():
    d = kv.kl_variance_data()
    g = d["gaps"]
    near, far = np.argmin(np.abs(g - 0.2)), np.argmin(np.abs(g - 2.0))
    assert d["std"]["k3"][near] < 0.2 * d["std"]["k1"][near]
    assert d["std"]["k3"][far] > d["std"]["k1"][far]


def test_bad_input_names_the_argument():
    with pytest.raises(TypeError, match="gap"):
        kv.kl_variance_data(gap="x")
    with pytest.raises(ValueError, match="q"):
        kv.kl_variance_data(q=[0.5, 0.6, 0.1])


def test_static_figure_has_one_slider_over_the_gap_grid():
    fig = kv.kl_variance_figure()
    (slider,) = fig.layout.sliders
    assert slider.name == "gap" and len(slider.steps) == len(kv.GAP_GRID)
    # the step at g = 0.5 shows the k3 bars of the policy at g = 0.5
    step = slider.steps[kv.GAP_GRID.index(0.5)]
    data_update, _, traces = step.args
    bars = dg.estimator_views(dg.policy_gap_family(0.5), ex.KL_EXAMPLE["q"])["k3"].grad
    k3_index = traces.index(11)
    np.testing.assert_allclose(data_update["y"][k3_index], bars, rtol=1e-3)


def test_live_widget_recomputes():
    pytest.importorskip("ipywidgets")
    ui = kv.kl_variance_widget()
    ui.controls["gap"].value = 0.5
    assert ui.error is None and ui.data["gap"] == 0.5
    ui.controls["q"].value = "0.5, 0.6"
    assert ui.error is not None
