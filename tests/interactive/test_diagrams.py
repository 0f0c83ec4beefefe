"""dpo_grpo.interactive.diagrams: figure 1's data says what the article says, and the
figure draws exactly that data."""

import matplotlib

matplotlib.use("Agg")

import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.figure import Figure

import dpo_grpo as dg
from dpo_grpo.interactive import diagrams as dgm
from testing_support import figure_texts


def figure_boxes(fig) -> dict:
    """``{"method/role": patch}`` for every component box drawn in ``fig``."""
    return {p.get_gid(): p for ax in fig.axes for p in ax.patches if p.get_gid()}


def test_the_grid_encodes_section_01():
    comps = dgm.pipeline_components()
    assert list(comps) == ["PPO-RLHF", "DPO", "GRPO"]
    trained = dgm.components_with_status(comps, "trained")
    dropped = dgm.components_with_status(comps, "dropped")
    # PPO-RLHF trains actor and critic; reference and reward model are frozen but still
    # run.
    assert (
        trained["PPO-RLHF"] == ["policy", "baseline"]
        and "critic" in comps["PPO-RLHF"]["baseline"]["label"]
    )
    assert (
        comps["PPO-RLHF"]["reward"]["status"]
        == comps["PPO-RLHF"]["reference"]["status"]
        == "frozen"
    )
    assert dropped["PPO-RLHF"] == []
    # DPO drops the explicit reward model and the online RL loop (sampling and the
    # critic).
    assert dropped["DPO"] == ["reward", "sampling", "baseline"]
    # GRPO keeps online sampling and the reward but replaces the critic by group
    # statistics.
    assert dropped["GRPO"] == [] and trained["GRPO"] == ["policy"]
    assert (
        comps["GRPO"]["baseline"]["status"] == "computed"
        and "group" in comps["GRPO"]["baseline"]["label"]
    )
    assert comps["GRPO"]["sampling"]["status"] == "computed"
    for method in comps:
        assert comps[method]["reference"]["status"] == "frozen"


def test_trained_boxes_match_the_memory_ledger():
    """The figure's trained components are the ledger's trainable entries, method by
    method."""
    n = 7_000_000_000
    ledgers = {
        "PPO-RLHF": dg.algorithm_ledger("ppo", n, reward_params=n),
        "DPO": dg.algorithm_ledger("dpo", n),
        "GRPO": dg.algorithm_ledger("grpo", n, reward_params=n),
    }
    trained = dgm.components_with_status(dgm.pipeline_components(), "trained")
    for method, ledger in ledgers.items():
        assert len(trained[method]) == sum("(trainable)" in k for k in ledger)


def test_pipeline_components_returns_a_fresh_copy():
    a = dgm.pipeline_components()
    a["GRPO"]["reward"]["status"] = "computed"
    assert dgm.pipeline_components()["GRPO"]["reward"]["status"] == "frozen"


def test_figure_draws_every_component_with_its_style():
    comps = dgm.pipeline_components()
    fig = dgm.draw_pipelines(comps)
    assert isinstance(fig, Figure)
    boxes = figure_boxes(fig)
    assert set(boxes) == {f"{m}/{r}" for m in comps for r in dgm.ROLES}
    texts = figure_texts(fig)
    for method, rows in comps.items():
        assert method in texts
        for role, comp in rows.items():
            assert comp["label"] in texts
            patch = boxes[f"{method}/{role}"]
            style = dgm.STATUS_STYLE[comp["status"]]
            assert matplotlib.colors.to_hex(patch.get_facecolor()) == style["facecolor"]
            assert (patch.get_linestyle() == "--") == (comp["status"] == "dropped")
    for role_label in dgm.ROLES.values():
        assert role_label in texts
    unwrapped = [t.replace("\n", " ") for t in texts]
    for k, note in enumerate(dgm.FIGURE_NOTES):
        assert f"Note {k + 1}. {note}" in unwrapped
    for style in dgm.STATUS_STYLE.values():
        assert style["legend"] in texts
    fig.canvas.draw()  # renders without error (mathtext labels included)


def test_a_modified_grid_is_drawn_as_given():
    comps = dgm.pipeline_components()
    comps["GRPO"]["reward"] = {"label": "unit tests (rule)", "status": "computed"}
    del comps["DPO"]
    fig = dgm.draw_pipelines(comps, notes=())
    boxes = figure_boxes(fig)
    assert len(boxes) == 2 * len(dgm.ROLES)
    assert "unit tests (rule)" in figure_texts(fig)
    assert not any(t.startswith("Note") for t in figure_texts(fig))
    assert (
        matplotlib.colors.to_hex(boxes["GRPO/reward"].get_facecolor())
        == dgm.STATUS_STYLE["computed"]["facecolor"]
    )


@given(
    st.lists(
        st.sampled_from(list(dgm.STATUS_STYLE)),
        min_size=len(dgm.ROLES),
        max_size=len(dgm.ROLES),
    )
)
def test_any_status_assignment_draws_one_box_per_role(statuses):
    comps = {
        "X": {
            role: {"label": f"{role}-{s}", "status": s}
            for role, s in zip(dgm.ROLES, statuses)
        }
    }
    fig = dgm.draw_pipelines(comps)
    boxes = figure_boxes(fig)
    assert len(boxes) == len(dgm.ROLES)
    dashed = sorted(gid for gid, p in boxes.items() if p.get_linestyle() == "--")
    assert dashed == sorted(
        f"X/{r}" for r, s in zip(dgm.ROLES, statuses) if s == "dropped"
    )
    assert dgm.components_with_status(comps, "dropped")["X"] == [
        r for r, s in zip(dgm.ROLES, statuses) if s == "dropped"
    ]


def test_invalid_input():
    with pytest.raises(TypeError, match="components"):
        dgm.draw_pipelines(["PPO"])
    with pytest.raises(ValueError, match="components"):
        dgm.draw_pipelines({})
    bad = dgm.pipeline_components()
    bad["DPO"]["reward"]["status"] = "deleted"
    with pytest.raises(
        ValueError, match=r"components\['DPO'\]\['reward'\]\['status'\]"
    ):
        dgm.draw_pipelines(bad)
    bad = dgm.pipeline_components()
    del bad["GRPO"]["baseline"]
    with pytest.raises(ValueError, match="missing \\['baseline'\\]"):
        dgm.validate_components(bad)
    bad = dgm.pipeline_components()
    bad["GRPO"]["policy"]["label"] = " "
    with pytest.raises(ValueError, match="label"):
        dgm.validate_components(bad)
    with pytest.raises(TypeError, match="notes"):
        dgm.draw_pipelines(notes="one note")
    with pytest.raises(ValueError, match="status"):
        dgm.components_with_status(dgm.pipeline_components(), "gone")
