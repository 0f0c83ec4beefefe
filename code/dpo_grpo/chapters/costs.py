"""What one training step costs under PPO, GRPO and DPO (chapter 6, sections 6.1, 6.2,
6.10 and 6.11).

A step processes ``prompts`` prompts. PPO-RLHF samples ``ppo_samples`` answers per
prompt and trains an actor and a critic; GRPO samples ``group_size`` answers per prompt
and trains the policy only; DPO reads ``prompts`` offline preference pairs (a chosen and
a rejected answer each) and samples nothing. For each algorithm :func:`step_cost` counts
the five budget items of section 6.10:

1. trainable state (weights, gradients, optimizer state) and frozen weights, per GPU,
   from :mod:`dpo_grpo.reference.memory`;
2. forward passes of frozen models (reference, reward model) and no-gradient passes of
   trained models (the policy's old log-probs, PPO's critic values);
3. generated tokens;
4. reward evaluations (answers scored);
5. communication volume (bytes moved between services or GPUs).

Compute uses the standard dense-transformer approximation: a forward pass costs ``2 N``
FLOPs per token for a model of ``N`` parameters and a full backward pass ``4 N``
(attention's quadratic term ignored). With LoRA the backward still propagates activation
gradients through the whole network (``2 N``) but forms weight gradients only for the
adapter (``2 f N`` for a trainable fraction ``f``). :func:`attention_flops` gives the
attention term that this rule leaves out, and ``step_time(..., attention=...)`` adds it.
:func:`step_time` turns FLOPs and bytes into seconds under explicit throughput
assumptions (:class:`~.throughput.Throughput`); it is an illustration, not a measurement
(:class:`dpo_grpo.chapters.phase_timer.PhaseTimer` measures). Decoding time grows with
the context through the KV-cache reads (:func:`generation_seconds`), which is assumed to
fit (:func:`kv_cache_bytes` says how large it gets).

The plotly figure and the ipywidgets UI of these estimates are in
:mod:`dpo_grpo.interactive.cost_explorer`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import _validation as v
from ..i18n import N_, tr
from ..reference.memory import (
    GB,
    GiB,
    algorithm_ledger,
    frozen_model_bytes,
    training_state_ledger,
)
from ..tables import html_table, human_number
from .throughput import Throughput, as_throughput
from .workload import Workload

ALGORITHMS = ("ppo", "grpo", "dpo")
LABELS = {"ppo": "PPO", "grpo": "GRPO", "dpo": "DPO"}
FORWARD_FLOPS = 2  #: FLOPs per parameter per token, forward
#: FLOPs per parameter per token, full backward (activation + weight gradients)
BACKWARD_FLOPS = 4
TOKEN_ID_BYTES = 4  #: int32 token id
FLOAT_BYTES = 4  #: fp32 scalar (log-prob, value, reward, advantage)
MASK_BYTES = 1
GRAD_BYTES = 2  #: bf16 gradients (the memory ledger's default)
WEIGHT_BYTES = 2  #: bf16 weights
PHASES = ("generation", "scoring", "training", "waiting")
#: token counts of the forward passes without a backward (see
#: :attr:`StepCost.frozen_forward_tokens`)
NO_GRAD_PASSES = (
    "reference forward",
    "reward-model forward",
    "old-logprob forward",
    "critic value forward",
)
#: (layers, model width) of the grouped-query-attention 8B model behind
#: ``Workload.kv_bytes_per_token``'s default
ATTENTION_SHAPE = (32, 4096)


@dataclass
class StepCost:
    """The cost of one step of ``algorithm`` on ``workload``.

    ``memory``: bytes per GPU by component; ``tokens``: token counts by pass; ``flops``:
    FLOPs by pass; ``reward_calls``: answers scored; ``communication``: bytes moved by
    channel.
    """

    algorithm: str
    workload: Workload
    sequences: int
    memory: dict = field(default_factory=dict)
    tokens: dict = field(default_factory=dict)
    flops: dict = field(default_factory=dict)
    reward_calls: int = 0
    communication: dict = field(default_factory=dict)

    @property
    def trainable_bytes(self) -> float:
        return sum(b for k, b in self.memory.items() if "trainable" in k)

    @property
    def frozen_bytes(self) -> float:
        return sum(b for k, b in self.memory.items() if "trainable" not in k)

    @property
    def memory_bytes(self) -> float:
        return sum(self.memory.values())

    @property
    def generated_tokens(self) -> int:
        return self.tokens.get("generated", 0)

    @property
    def frozen_forward_tokens(self) -> int:
        """Tokens through frozen models and no-grad passes of trained models (reference,
        reward model, old log-probs, PPO's critic values): every forward pass without a
        backward."""
        return sum(self.tokens.get(k, 0) for k in NO_GRAD_PASSES)

    @property
    def total_flops(self) -> float:
        return sum(self.flops.values())

    @property
    def communication_bytes(self) -> float:
        return sum(self.communication.values())


def _trainable_state(n: int, fraction: float) -> int:
    """Logical state of one trained model: full fine-tuning, or a frozen bf16 base + a
    trainable adapter (LoRA)."""
    if fraction >= 1.0:
        return training_state_ledger(n).total_bytes
    adapter = max(1, round(fraction * n))
    return frozen_model_bytes(n) + training_state_ledger(adapter).total_bytes


def _backward_per_token(n: int, fraction: float) -> float:
    """Backward FLOPs per token: activation gradients 2N plus weight gradients 2N x
    trainable fraction."""
    return (BACKWARD_FLOPS / 2) * n * (1.0 + fraction)


def _memory(alg: str, w: Workload) -> dict:
    critic = w.n_params if w.critic_params is None else w.critic_params
    if not w.lora:
        mem = dict(
            algorithm_ledger(
                alg,
                w.n_params,
                critic_params=critic,
                reward_params=w.reward_params,
                precomputed_reference=w.precomputed_reference,
            )
        )
    else:
        mem = {"policy (trainable)": _trainable_state(w.n_params, w.trainable_fraction)}
        if alg == "ppo":
            mem["critic (trainable)"] = _trainable_state(critic, w.trainable_fraction)
        # the reference is the shared base with the adapter disabled: no second copy of
        # the weights
        if w.reward_params is not None and alg != "dpo":
            mem["reward model (frozen)"] = frozen_model_bytes(w.reward_params)
    div = w.n_gpus if w.shard_states else 1
    return {k: b / div for k, b in mem.items()}


def step_cost(algorithm: str, workload: Workload) -> StepCost:
    """Count the cost items of one step of ``algorithm`` in {"ppo", "grpo", "dpo"} on
    ``workload``.

    Sequences per step: PPO ``prompts x ppo_samples``, GRPO ``prompts x group_size``,
    DPO ``2 x prompts`` (chosen and rejected). Every trained sequence has
    ``prompt_len + answer_len`` tokens. Generation prefills each prompt once (the
    samples of a prompt share its KV cache) and decodes ``answer_len`` tokens per
    sampled answer.
    """
    v.choice(algorithm, "algorithm", ALGORITHMS)
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a Workload, got {type(workload).__name__}")
    w = workload
    n, f, e = w.n_params, w.trainable_fraction, w.inner_epochs
    critic = w.n_params if w.critic_params is None else w.critic_params
    online = algorithm != "dpo"
    seqs = {
        "ppo": w.prompts * w.ppo_samples,
        "grpo": w.prompts * w.group_size,
        "dpo": 2 * w.prompts,
    }[algorithm]
    seq_tokens = seqs * w.seq_len
    epochs = e if online else 1

    tokens, flops = {}, {}
    if online:
        tokens["generated"] = seqs * w.answer_len
        tokens["prefill"] = w.prompts * w.prompt_len
        flops["generation"] = (
            FORWARD_FLOPS * n * (tokens["generated"] + tokens["prefill"])
        )
        if w.reward_params is not None:
            tokens["reward-model forward"] = seq_tokens
            flops["reward model"] = FORWARD_FLOPS * w.reward_params * seq_tokens
        else:
            flops["reward model"] = 0.0
    if not (algorithm == "dpo" and w.precomputed_reference):
        tokens["reference forward"] = seq_tokens
    flops["reference forward"] = FORWARD_FLOPS * n * tokens.get("reference forward", 0)
    if online and e > 1:
        tokens["old-logprob forward"] = seq_tokens
    flops["old-logprob forward"] = (
        FORWARD_FLOPS * n * tokens.get("old-logprob forward", 0)
    )
    tokens["policy forward+backward"] = seq_tokens * epochs
    flops["policy update"] = (FORWARD_FLOPS * n + _backward_per_token(n, f)) * tokens[
        "policy forward+backward"
    ]
    if algorithm == "ppo":
        tokens["critic value forward"] = seq_tokens
        tokens["critic forward+backward"] = seq_tokens * epochs
        flops["critic"] = (
            FORWARD_FLOPS * critic * seq_tokens
            + (FORWARD_FLOPS * critic + _backward_per_token(critic, f))
            * seq_tokens
            * epochs
        )

    comm = {}
    k = w.n_gpus
    trained = [n] + ([critic] if algorithm == "ppo" else [])
    grad_bytes = sum(
        GRAD_BYTES * (max(1, round(f * m)) if w.lora else m) for m in trained
    )
    comm["gradient all-reduce (per GPU)"] = 2 * (k - 1) / k * grad_bytes
    if online and w.separate_generation:
        comm["weight sync to generation engine"] = WEIGHT_BYTES * (
            max(1, round(f * n)) if w.lora else n
        )
        comm["rollouts to trainer"] = (
            seq_tokens * TOKEN_ID_BYTES + tokens["generated"] * FLOAT_BYTES
        )
    if algorithm == "ppo" and w.critic_remote:
        # token ids + mask out, one value per token back, one return per token out for
        # the critic update
        comm["remote critic"] = seq_tokens * (
            TOKEN_ID_BYTES + MASK_BYTES + 2 * FLOAT_BYTES
        )
    if online and w.reward_remote:
        comm["remote reward scorer"] = seqs * (w.seq_len * TOKEN_ID_BYTES + FLOAT_BYTES)
    if algorithm == "grpo":
        # all-gather one scalar reward per answer
        comm["group statistics"] = seqs * FLOAT_BYTES
    return StepCost(
        algorithm,
        w,
        seqs,
        _memory(algorithm, w),
        tokens,
        flops,
        seqs if online else 0,
        comm,
    )


def compare(workload: Workload) -> dict:
    """``{algorithm: StepCost}`` for PPO, GRPO and DPO on the same workload."""
    return {alg: step_cost(alg, workload) for alg in ALGORITHMS}


def generation_seconds(
    workload: Workload, sequences: int, throughput: Throughput | None = None
) -> float:
    """Roofline estimate of the time to prefill and decode ``sequences`` answers spread
    over the GPUs.

    Each GPU holds a full replica and ``b = sequences / n_gpus`` sequences; decode step
    ``t`` (context ``c = prompt_len + t``) costs
    ``max(b 2N / (peak decode_efficiency), (2N + b c kv) / hbm_bandwidth)``. Prefill
    runs at ``train_mfu``. The KV cache is assumed to fit (:func:`kv_cache_bytes`):
    nothing models the several waves, or the preemption, that an engine needs when it
    does not.
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a Workload, got {type(workload).__name__}")
    w = workload
    t = as_throughput(throughput)
    sequences = v.integer(sequences, "sequences", minimum=0)
    if sequences == 0:
        return 0.0
    b = sequences / w.n_gpus
    contexts = w.prompt_len + np.arange(w.answer_len, dtype=np.float64)
    compute = b * FORWARD_FLOPS * w.n_params / (t.peak_flops * t.decode_efficiency)
    memory = (
        WEIGHT_BYTES * w.n_params + b * contexts * w.kv_bytes_per_token
    ) / t.hbm_bandwidth
    prefill = (
        FORWARD_FLOPS
        * w.n_params
        * w.prompts
        * w.prompt_len
        / (w.n_gpus * t.peak_flops * t.train_mfu)
    )
    return float(np.maximum(compute, memory).sum() + prefill)


def kv_cache_bytes(workload: Workload, sequences: int) -> float:
    """KV-cache bytes per GPU at the last decode step, which :func:`generation_seconds`
    assumes fit.

    ``sequences / n_gpus`` sequences of ``prompt_len + answer_len`` tokens at
    ``kv_bytes_per_token`` each: the same per-sequence context that the roofline reads
    (shared prompt prefixes are not deduplicated).
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a Workload, got {type(workload).__name__}")
    sequences = v.integer(sequences, "sequences", minimum=0)
    return sequences / workload.n_gpus * workload.seq_len * workload.kv_bytes_per_token


def _attention_shape(attention) -> tuple:
    if not isinstance(attention, (tuple, list)) or len(attention) != 2:
        raise TypeError(
            f"attention must be a pair (n_layers, d_model), got {attention!r}"
        )
    return (
        v.integer(attention[0], "n_layers", minimum=1),
        v.integer(attention[1], "d_model", minimum=1),
    )


def attention_flops(cost: StepCost, attention=ATTENTION_SHAPE) -> dict:
    """The causal-attention FLOPs of the training passes of ``cost`` that the
    ``2N``/``4N`` rule leaves out.

    ``attention = (n_layers, d_model)``. For a token at context ``c`` the score and
    value products (``QK^T`` and ``AV``) cost ``4 d_model c`` FLOPs per layer; averaged
    over a causal sequence of ``T = seq_len`` tokens (``c ≈ T/2``) that is
    ``2 n_layers d_model T`` per token forward. The backward costs twice the forward
    (gradients with respect to both operands; no weights are involved, so LoRA does not
    shrink it). Returns extra FLOPs under the keys of ``cost.flops``:
    ``"policy update"``, ``"reference forward"``, ``"old-logprob forward"`` and, for
    PPO, ``"critic"`` (value pass + update). Every model is given the same shape.
    Generation and the reward model are left out: decoding's time comes from
    :func:`generation_seconds`, which already reads the KV cache at every step.
    """
    if not isinstance(cost, StepCost):
        raise TypeError(f"cost must be a StepCost, got {type(cost).__name__}")
    n_layers, d_model = _attention_shape(attention)
    fwd = 2.0 * n_layers * d_model * cost.workload.seq_len  # per token, forward
    tok = cost.tokens
    extra = {
        "policy update": 3 * fwd * tok["policy forward+backward"],
        "reference forward": fwd * tok.get("reference forward", 0),
        "old-logprob forward": fwd * tok.get("old-logprob forward", 0),
    }
    if cost.algorithm == "ppo":
        extra["critic"] = (
            fwd * tok["critic value forward"] + 3 * fwd * tok["critic forward+backward"]
        )
    return extra


def step_time(
    cost: StepCost, throughput: Throughput | None = None, *, attention=None
) -> dict:
    """Estimated seconds per step split into the four phases of section 6.11:
    generation, scoring, training, waiting.

    ``generation`` uses :func:`generation_seconds`; ``training`` holds the policy
    update, the critic (value pass + update) and the reference/old-log-prob forwards at
    ``train_mfu``; ``waiting`` is communication between services at ``bandwidth``.
    Compute is spread over ``workload.n_gpus``. By default training ignores attention's
    quadratic term; ``attention=(n_layers, d_model)`` adds it (:func:`attention_flops`).
    """
    if not isinstance(cost, StepCost):
        raise TypeError(f"cost must be a StepCost, got {type(cost).__name__}")
    t = Throughput() if throughput is None else throughput
    if not isinstance(t, Throughput):
        raise TypeError(f"throughput must be a Throughput, got {type(t).__name__}")
    w = cost.workload
    rate = w.n_gpus * t.peak_flops
    fl = dict(cost.flops)
    if attention is not None:
        for k, x in attention_flops(cost, attention).items():
            fl[k] = fl.get(k, 0.0) + x
    online = cost.algorithm != "dpo"
    scoring = (
        fl.get("reward model", 0.0) / (rate * t.scoring_mfu)
        if w.reward_params is not None
        else cost.reward_calls * t.rule_seconds
    )
    training = sum(
        fl.get(k, 0.0)
        for k in ("policy update", "critic", "reference forward", "old-logprob forward")
    )
    comm = sum(
        b
        for k, b in cost.communication.items()
        if not (t.overlap_gradients and k.startswith("gradient all-reduce"))
    )
    return {
        "generation": generation_seconds(w, cost.sequences, t) if online else 0.0,
        "scoring": scoring if online else 0.0,
        "training": training / (rate * t.train_mfu),
        "waiting": comm / t.bandwidth,
    }


def critic_cost(
    workload: Workload, throughput: Throughput | None = None, *, attention=None
) -> dict:
    """What the critic costs in one PPO step: its state per GPU (bytes), FLOPs, seconds
    (training phase).

    This is exactly what GRPO saves when it samples the same answers as PPO
    (``ppo_samples == group_size``). ``attention=(n_layers, d_model)`` adds the critic's
    attention FLOPs (:func:`attention_flops`).
    """
    c = step_cost("ppo", workload)
    t = as_throughput(throughput)
    flops = c.flops["critic"] + (
        attention_flops(c, attention)["critic"] if attention is not None else 0.0
    )
    return {
        "state_bytes": c.memory["critic (trainable)"],
        "flops": flops,
        "seconds": flops / (workload.n_gpus * t.peak_flops * t.train_mfu),
    }


def critic_vs_rollout(
    workload: Workload,
    answer_lens,
    throughput: Throughput | None = None,
    *,
    attention=ATTENTION_SHAPE,
) -> list:
    """PPO's critic against GRPO's rollout at the same rollout
    (``ppo_samples = group_size``), per answer length.

    One dict per length in ``answer_lens``: ``answer_len``; ``rollout``, GRPO's
    generation + scoring seconds; ``critic`` and ``share``, the critic's seconds and its
    share of PPO's step time; ``critic_att`` and ``share_att``, the same with
    ``attention=(n_layers, d_model)`` counted in every training pass
    (:func:`attention_flops`); ``kv_gb``, the KV cache per GPU that generation assumes
    fits (:func:`kv_cache_bytes`).
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a Workload, got {type(workload).__name__}")
    base = workload.with_(ppo_samples=workload.group_size)
    rows = []
    for length in v.sequence(answer_lens, "answer_lens"):
        w = base.with_(answer_len=v.integer(length, "answer_lens", minimum=1))
        ppo = step_cost("ppo", w)
        grpo = step_time(step_cost("grpo", w), throughput)
        row = {
            "answer_len": w.answer_len,
            "rollout": grpo["generation"] + grpo["scoring"],
            "critic": critic_cost(w, throughput)["seconds"],
            "critic_att": critic_cost(w, throughput, attention=attention)["seconds"],
            "kv_gb": kv_cache_bytes(w, ppo.sequences) / GB,
        }
        row["share"] = row["critic"] / sum(step_time(ppo, throughput).values())
        row["share_att"] = row["critic_att"] / sum(
            step_time(ppo, throughput, attention=attention).values()
        )
        rows.append(row)
    return rows


def rollout_crossover(rows, critic_key: str = "critic"):
    """``(shorter, longer)``: in rows of :func:`critic_vs_rollout` (increasing lengths),
    the length before and the first length at which GRPO's rollout costs more than the
    critic (``critic_key``: ``"critic"`` or ``"critic_att"``). ``shorter`` is None when
    the first row already does; the result is None when no row does."""
    v.choice(critic_key, "critic_key", ("critic", "critic_att"))
    rows = v.sequence(rows, "rows")
    for r in rows:
        if not isinstance(r, dict) or not {"answer_len", "rollout", critic_key} <= set(
            r
        ):
            raise ValueError(
                "rows must be the dicts returned by critic_vs_rollout (with "
                f"'answer_len', 'rollout' and {critic_key!r}), got {r!r}"
            )
    for i, r in enumerate(rows):
        if r["rollout"] > r[critic_key]:
            return (rows[i - 1]["answer_len"] if i else None), r["answer_len"]
    return None


def budget_rows(
    workload: Workload, throughput: Throughput | None = None, *, memory: bool = True
) -> list:
    """The budget of section 6.10 as rows ``(item, unit, {algorithm: value})`` for PPO,
    GRPO and DPO; ``memory=False`` leaves out the two memory rows (chapter 1's ledger
    is their home)."""
    costs = compare(workload)
    times = {a: step_time(c, throughput) for a, c in costs.items()}
    memory_items = (
        (N_("trainable state per GPU"), "GB", lambda c: c.trainable_bytes / GB),
        (N_("frozen weights per GPU"), "GB", lambda c: c.frozen_bytes / GB),
    )
    items = (memory_items if v.boolean(memory, "memory") else ()) + (
        (
            N_("frozen / no-grad forward tokens"),
            N_("tokens"),
            lambda c: c.frozen_forward_tokens,
        ),
        (N_("generated tokens"), N_("tokens"), lambda c: c.generated_tokens),
        (N_("reward evaluations"), N_("calls"), lambda c: c.reward_calls),
        (N_("communication"), "GB", lambda c: c.communication_bytes / GB),
        (N_("compute"), "PFLOP", lambda c: c.total_flops / 1e15),
    )
    rows = [
        (item, unit, {a: f(c) for a, c in costs.items()}) for item, unit, f in items
    ]
    time_items = {
        "generation": N_("time: generation"),
        "scoring": N_("time: scoring"),
        "training": N_("time: training"),
        "waiting": N_("time: waiting"),
    }
    for phase in PHASES:
        rows.append(
            (time_items[phase], N_("s"), {a: times[a][phase] for a in ALGORITHMS})
        )
    rows.append(
        (N_("time: total"), N_("s"), {a: sum(times[a].values()) for a in ALGORITHMS})
    )
    return rows


def format_rows(rows) -> str:
    """:func:`budget_rows` (or rows of the same ``(item, unit, {algorithm: value})``
    form) as an HTML table, its words in the reader's language
    (:func:`dpo_grpo.i18n.tr`)."""
    rows = v.sequence(rows, "rows")
    if not rows:
        raise ValueError("rows must not be empty")
    for row in rows:
        if not (
            isinstance(row, (tuple, list))
            and len(row) == 3
            and isinstance(row[2], dict)
        ):
            raise ValueError(
                f"rows must be (item, unit, {{algorithm: value}}) triples, got {row!r}"
            )
    algs = list(rows[0][2])
    cells = [
        [tr(str(item)), tr(str(unit)), *(human_number(vals[a]) for a in algs)]
        for item, unit, vals in rows
    ]
    head = [tr("item"), tr("unit"), *(LABELS.get(a, a) for a in algs)]
    return html_table(cells, head)


def memory_saving(workload: Workload) -> dict:
    """Bytes per GPU that removing the critic saves (PPO minus GRPO memory) and its
    share of PPO's memory."""
    ppo, grpo = step_cost("ppo", workload), step_cost("grpo", workload)
    saved = ppo.memory_bytes - grpo.memory_bytes
    return {
        "bytes": saved,
        "gb": saved / GB,
        "gib": saved / GiB,
        "fraction": saved / ppo.memory_bytes,
    }


#: The assumptions :func:`sensitivity` varies: decode efficiency (fraction of peak
#: FLOP/s a decode step reaches when compute-bound), training MFU and HBM bandwidth,
#: each from a pessimistic to an optimistic value.
SENSITIVITY_GRID = {
    "decode_efficiency": (0.2, 0.35, 0.5, 0.75, 1.0),
    "train_mfu": (0.25, 0.4, 0.55),
    "hbm_bandwidth": (2.0e12, 3.35e12, 4.8e12),
}


def sensitivity(
    workload: Workload, answer_lens=(256, 1024, 4096, 16384), grid=None
) -> dict:
    """The chapter-6 estimates over every combination of the assumptions in ``grid``
    (default :data:`SENSITIVITY_GRID`), as ranges ``(min, max)`` instead of single
    numbers from guessed constants.

    At the same rollout (``ppo_samples = group_size``): ``share_short`` and
    ``share_long`` (the critic's share of PPO's step at the first and last of
    ``answer_lens``), ``time_ratio`` (PPO / GRPO step time at ``workload.answer_len``),
    ``crossovers`` (the set of ``(shorter, longer)`` answer lengths between which GRPO's
    rollout overtakes the critic, None when it never does in ``answer_lens``) and
    ``t_grpo`` (seconds of GRPO's step at ``workload.answer_len``). ``n_assumptions`` is
    the number of combinations. The KV cache is assumed to fit in every combination
    (:func:`kv_cache_bytes`), which long answers violate on real hardware.
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a Workload, got {type(workload).__name__}")
    grid = dict(SENSITIVITY_GRID if grid is None else grid)
    unknown = set(grid) - {
        "decode_efficiency",
        "train_mfu",
        "hbm_bandwidth",
        "peak_flops",
        "scoring_mfu",
    }
    if unknown:
        raise ValueError(f"grid: unknown assumption(s) {sorted(unknown)}")
    lens = v.sequence(answer_lens, "answer_lens")
    if len(lens) < 2:
        raise ValueError("answer_lens must hold at least two lengths")
    same = workload.with_(ppo_samples=workload.group_size)
    names = list(grid)
    combos = np.array(
        np.meshgrid(*[np.asarray(grid[k], dtype=float) for k in names], indexing="ij")
    )
    combos = combos.reshape(len(names), -1).T
    share_s, share_l, ratio, t_grpo, cross = [], [], [], [], set()
    for values in combos:
        t = Throughput(**dict(zip(names, (float(x) for x in values))))
        rows = critic_vs_rollout(same, lens, t)
        share_s.append(rows[0]["share"])
        share_l.append(rows[-1]["share"])
        times = {a: sum(step_time(c, t).values()) for a, c in compare(same).items()}
        ratio.append(times["ppo"] / times["grpo"])
        t_grpo.append(times["grpo"])
        cross.add(rollout_crossover(rows))
    span = lambda xs: (float(min(xs)), float(max(xs)))  # noqa: E731
    return {
        "share_short": span(share_s),
        "share_long": span(share_l),
        "time_ratio": span(ratio),
        "t_grpo": span(t_grpo),
        "crossovers": sorted(cross, key=lambda c: (c is None, c)),
        "n_assumptions": len(combos),
        "answer_lens": tuple(int(x) for x in lens),
    }
