"""Tests of dpo_grpo.chapters.cost_ranges: an estimate over every combination of
assumptions."""

import pytest

from dpo_grpo.chapters import cost_ranges
from dpo_grpo.chapters import costs as c

N7 = 7_000_000_000


def test_over_assumptions_spans_the_grid_and_contains_the_default():
    w = c.Workload(n_params=N7)
    cost = c.step_cost("grpo", w)
    lo, hi = cost_ranges.over_assumptions(lambda t: sum(c.step_time(cost, t).values()))
    default = sum(c.step_time(cost).values())
    assert lo < default < hi
    # the range of sensitivity() is the same computation
    assert (lo, hi) == pytest.approx(c.sensitivity(w)["t_grpo"])
    # a field the grid does not vary stays at its default
    one = cost_ranges.over_assumptions(
        lambda t: t.scoring_mfu, grid={"train_mfu": (0.25, 0.55)}
    )
    assert one == (0.3, 0.3)
    scored = cost_ranges.over_assumptions(
        lambda t: t.scoring_mfu, grid={"scoring_mfu": (0.2, 0.5)}
    )
    assert scored == (0.2, 0.5)
    with pytest.raises(ValueError, match="unknown"):
        cost_ranges.over_assumptions(lambda t: 0.0, grid={"speed": (1.0,)})
    with pytest.raises(TypeError):
        cost_ranges.over_assumptions(3.0)
