"""The hardware assumptions that turn the step counts of :mod:`.costs` into seconds
(chapter 6): peak FLOP/s, memory bandwidth and the fractions of peak that training,
decoding and scoring reach. Illustrative defaults; measure your own
(:class:`dpo_grpo.chapters.phase_timer.PhaseTimer`)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import _validation as v


@dataclass(frozen=True)
class Throughput:
    """Assumed hardware throughputs that turn counts into seconds (illustrative
    defaults; measure your own).

    ``peak_flops`` and ``hbm_bandwidth`` per GPU (defaults of the order of a current
    datacentre GPU's dense bf16 peak and memory bandwidth); ``train_mfu`` and
    ``scoring_mfu`` the fraction of peak that training and reward-model scoring reach.
    Decoding is modelled as a roofline: each decode step of a GPU's ``b`` sequences
    takes ``max(b 2N / (peak decode_efficiency), (2N + b c kv) / hbm_bandwidth)``
    seconds, where ``c`` is the current context and ``kv`` the KV-cache bytes per token,
    so long answers make every later token slower. ``rule_seconds`` is the effective
    time per rule-based reward call after parallelism; ``bandwidth`` is for
    communication between services, which is not overlapped with compute. Gradient
    all-reduce is counted in the bytes but treated as overlapped with the backward pass
    unless ``overlap_gradients=False``.
    """

    peak_flops: float = 1e15
    hbm_bandwidth: float = 3.35e12
    train_mfu: float = 0.4
    decode_efficiency: float = 0.5
    scoring_mfu: float = 0.3
    rule_seconds: float = 1e-4
    bandwidth: float = 25e9
    overlap_gradients: bool = True

    def __post_init__(self):
        v.scalar(self.peak_flops, "peak_flops", positive=True)
        v.scalar(self.hbm_bandwidth, "hbm_bandwidth", positive=True)
        for name in ("train_mfu", "decode_efficiency", "scoring_mfu"):
            x = v.scalar(getattr(self, name), name, positive=True)
            if x > 1:
                raise ValueError(f"{name} must lie in (0, 1], got {x}")
        v.scalar(self.rule_seconds, "rule_seconds", nonnegative=True)
        v.scalar(self.bandwidth, "bandwidth", positive=True)
        if not isinstance(self.overlap_gradients, bool):
            raise TypeError("overlap_gradients must be True or False")


def as_throughput(throughput) -> Throughput:
    """``throughput``, or the default :class:`Throughput` when it is None (TypeError for
    anything else)."""
    t = Throughput() if throughput is None else throughput
    if not isinstance(t, Throughput):
        raise TypeError(f"throughput must be a Throughput, got {type(t).__name__}")
    return t
