"""What a training algorithm supplies to a lab run (:class:`Algorithm`): its learning
rate, its number of steps, its evaluation interval, its budget and one step. A run
(:class:`dpo_grpo.lab.run.LabRun`) owns the state; the algorithm reads and updates it.
"""

from __future__ import annotations


class Algorithm:
    """The interface :class:`dpo_grpo.lab.run.LabRun` drives. Subclasses override every
    method but :meth:`evaluate` (default: nothing beyond the held-out pass rate)."""

    @staticmethod
    def learning_rate(cfg) -> float:
        raise NotImplementedError

    @staticmethod
    def total_steps(cfg) -> int:
        raise NotImplementedError

    @staticmethod
    def eval_interval(cfg) -> int:
        """Steps between evaluations."""
        raise NotImplementedError

    @staticmethod
    def budget(cfg) -> dict:
        """``{"optimizer_steps": ..., "completions_sampled": ...}`` of a whole run."""
        raise NotImplementedError

    @staticmethod
    def step(run) -> dict:
        """One step on ``run``: update its policy and its counters
        (``optimizer_steps``, ``completions_sampled``, ``tokens_generated``); return
        the step's metrics by :class:`dpo_grpo.lab.history.LabHistory` field names,
        plus ``tokens`` (tokens processed, for the throughput)."""
        raise NotImplementedError

    @staticmethod
    def evaluate(run):
        """Log the algorithm's own evaluation metrics into ``run.history``."""
