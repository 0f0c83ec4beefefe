"""What a training algorithm supplies to a lab run (:class:`Algorithm`): its learning
rate, its number of steps, its evaluation interval, its budget and one step, and, if it
trains more than the policy (PPO's critic), that state and its checkpoint. A run
(:class:`dpo_grpo.lab.run.LabRun`) owns the state; the algorithm reads and updates it.
"""

from __future__ import annotations


class Algorithm:
    """The interface :class:`dpo_grpo.lab.run.LabRun` drives. Subclasses override every
    method but :meth:`evaluate` (default: nothing beyond the held-out pass rate) and
    the state hooks :meth:`setup`, :meth:`state_dict`, :meth:`load_state_dict`
    (default: no state besides the run's)."""

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

    @staticmethod
    def setup(run):
        """Build the algorithm's own state on a new ``run`` (called once, after the
        policy, the reference, the optimiser and the history exist)."""

    @staticmethod
    def state_dict(run) -> dict:
        """The algorithm's own state, for the checkpoint (tensors on CPU)."""
        return {}

    @staticmethod
    def load_state_dict(run, state: dict):
        """Restore what :meth:`state_dict` saved."""
