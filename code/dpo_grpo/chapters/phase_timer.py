"""Measuring instead of estimating: wall-clock time per phase of a training step
(chapter 6, section 6.11), to hold against the estimates of
:mod:`dpo_grpo.chapters.costs`."""

from __future__ import annotations

import time
from contextlib import contextmanager


class PhaseTimer:
    """Wall-clock time per phase of a training step, accumulated over steps.

    >>> timer = PhaseTimer()
    >>> with timer("generation"):
    ...     pass
    >>> sorted(timer.seconds)
    ['generation']

    Use the four phases of section 6.11 (generation, scoring, training, waiting) or your
    own names.
    """

    def __init__(self, clock=time.perf_counter):
        if not callable(clock):
            raise TypeError("clock must be callable")
        self._clock = clock
        self.seconds: dict = {}
        self.counts: dict = {}

    @contextmanager
    def __call__(self, phase: str):
        if not isinstance(phase, str) or not phase:
            raise TypeError("phase must be a non-empty string")
        start = self._clock()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + (self._clock() - start)
            self.counts[phase] = self.counts.get(phase, 0) + 1

    def fractions(self) -> dict:
        """Each phase's share of the total measured time."""
        total = sum(self.seconds.values())
        return {k: (s / total if total > 0 else 0.0) for k, s in self.seconds.items()}
