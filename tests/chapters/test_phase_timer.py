"""dpo_grpo.chapters.phase_timer: wall-clock time per phase of a step."""

import pytest

from dpo_grpo.chapters.phase_timer import PhaseTimer


def test_phase_timer_with_a_fake_clock():
    ticks = iter([0.0, 2.0, 2.0, 3.0, 10.0, 11.0])
    timer = PhaseTimer(clock=lambda: next(ticks))
    with timer("generation"):
        pass
    with timer("training"):
        pass
    with timer("generation"):
        pass
    assert (
        timer.seconds == {"generation": 3.0, "training": 1.0}
        and timer.counts["generation"] == 2
    )
    assert timer.fractions() == {"generation": 0.75, "training": 0.25}
    with pytest.raises(TypeError, match="phase"):
        with timer(""):
            pass
