"""Ranges instead of point estimates: an estimate of :mod:`.costs` evaluated over every
combination of its throughput assumptions (chapters 6 and 8 quote these ranges)."""

from __future__ import annotations

import itertools

from .. import _validation as v
from .costs import SENSITIVITY_GRID
from .throughput import Throughput


def over_assumptions(fn, grid=None) -> tuple:
    """``(min, max)`` of ``fn(throughput)`` over every combination of the assumptions
    in ``grid`` (default :data:`SENSITIVITY_GRID`; keys are :class:`Throughput`
    fields, values the settings to try), the other fields at their defaults. A range
    for any estimate of this module, e.g.
    ``over_assumptions(lambda t: sum(step_time(cost, t).values()))``.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    grid = dict(SENSITIVITY_GRID if grid is None else grid)
    fields = set(Throughput.__dataclass_fields__) - {"overlap_gradients"}
    unknown = set(grid) - fields
    if unknown:
        raise ValueError(f"grid: unknown assumption(s) {sorted(unknown)}")
    if not grid or any(len(v.sequence(x, k)) == 0 for k, x in grid.items()):
        raise ValueError("grid must name at least one assumption, each with values")
    names = list(grid)
    values = [
        float(fn(Throughput(**dict(zip(names, (float(x) for x in combo))))))
        for combo in itertools.product(*(grid[k] for k in names))
    ]
    return (min(values), max(values))
