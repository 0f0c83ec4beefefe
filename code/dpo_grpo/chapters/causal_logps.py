"""Per-token log-probs of a real causal LM (chapter 5, section 5.16).

The four details of step 5 that a toy table of logits hides:

- **the shift**: the logits at position ``t`` predict token ``t + 1``, so the
  log-prob of ``input_ids[:, 1:]`` is read off ``logits[:, :-1]``
  (:func:`token_logps`); gathering at the same position
  (:func:`token_logps_unshifted_buggy`) runs and returns plausible numbers.
  :func:`prefix_forward_logps` recomputes every log-prob from its own prefix, one
  forward pass per position, and :func:`assert_logps_match` fails on the bug.
- **the temperature**: TRL 1.16.0 divides the logits by ``args.temperature`` before
  the log-softmax (``add_fused_lm_head(model, temperature=...)``;
  :func:`trl_fused_head_logps` runs TRL's own head), so the ratio compares the
  distribution that was sampled.
- **the masks**: :func:`trl_labels` builds the labels TRL's
  ``_get_per_token_logps_and_entropies`` builds (``-100`` on padding and on the
  prompt); :func:`completion_mask` is 1 up to and including the first EOS.
- **the old log-probs**: :func:`old_logps_source` states TRL 1.16.0's rule.
"""

from __future__ import annotations

import torch

from .. import _validation as v
from ..i18n import tr
from ..torch_ops.logprobs import selective_log_softmax


def _temperature(temperature):
    return v.scalar(temperature, "temperature", positive=True)


def _check(logits, input_ids):
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3:
        raise ValueError("logits must be a (B, L, V) tensor")
    if not isinstance(input_ids, torch.Tensor) or input_ids.shape != logits.shape[:2]:
        raise ValueError(
            f"input_ids must have shape {tuple(logits.shape[:2])}, "
            f"got {tuple(getattr(input_ids, 'shape', ()))}"
        )


def token_logps(logits, input_ids, temperature=1.0):
    """``log softmax(logits[:, t] / T)[input_ids[:, t + 1]]``, shape (B, L - 1).

    Position ``t``'s logits predict token ``t + 1``: drop the last logits (they
    predict a token that does not exist) and the first token (nothing predicts it).
    """
    _check(logits, input_ids)
    scaled = logits[:, :-1] / _temperature(temperature)
    return selective_log_softmax(scaled, input_ids[:, 1:])


def token_logps_unshifted_buggy(logits, input_ids, temperature=1.0):
    """BUGGY: ``log softmax(logits[:, t] / T)[input_ids[:, t]]``, the same position.

    It runs and returns finite log-probs of the right shape (cut to (B, L - 1) like
    :func:`token_logps`), but scores each token with the distribution that predicts
    the *next* one."""
    _check(logits, input_ids)
    scaled = logits[:, 1:] / _temperature(temperature)
    return selective_log_softmax(scaled, input_ids[:, 1:])


@torch.no_grad()
def prefix_forward_logps(model, input_ids, temperature=1.0):
    """Brute force, (B, L - 1): the log-prob of token ``t`` from a forward pass over
    ``input_ids[:, :t]`` alone, whose *last* logits predict it. No shift to get wrong:
    one forward pass per position (rows without padding)."""
    t_inv = 1.0 / _temperature(temperature)
    cols = []
    for t in range(1, input_ids.shape[1]):
        last = model(input_ids=input_ids[:, :t]).logits[:, -1].float() * t_inv
        cols.append(torch.log_softmax(last, -1).gather(-1, input_ids[:, t, None]))
    return torch.cat(cols, dim=1)


def assert_logps_match(logps, reference, mask=None, atol=1e-4):
    """DETECTOR: raise ``ValueError`` unless ``|logps - reference| <= atol`` at every
    position where ``mask`` is 1 (all positions by default); returns the largest
    difference."""
    if logps.shape != reference.shape:
        raise ValueError(f"shapes differ: {tuple(logps.shape)} vs {reference.shape}")
    diff = (logps.detach().double() - reference.detach().double()).abs()
    if mask is not None:
        diff = diff * mask.to(diff.dtype)
    worst = float(diff.max()) if diff.numel() else 0.0
    if not worst <= atol:
        raise ValueError(
            tr(
                "per-token log-probs differ from the prefix forward passes by up to "
                "{worst:.3g} (> {atol:g}): are the logits shifted against the labels?",
                worst=worst,
                atol=atol,
            )
        )
    return worst


def completion_mask(completion_ids, eos_id):
    """1 up to and including the first ``eos_id`` of each row, 0 after it (padding),
    as TRL 1.16.0's generation builds it: ``sequence_indices <= eos_idx``."""
    is_eos = completion_ids == eos_id
    width = completion_ids.shape[1]
    no_eos = torch.full_like(completion_ids[:, 0], width)
    first = torch.where(is_eos.any(1), is_eos.int().argmax(1), no_eos)
    return (torch.arange(width)[None, :] <= first[:, None]).int()


def trl_labels(input_ids, attention_mask, logits_to_keep):
    """The labels of TRL 1.16.0's ``_get_per_token_logps_and_entropies``: the ids,
    ``-100`` where ``attention_mask`` is 0 (padding) and on everything before the
    last ``logits_to_keep`` positions (the prompt). Only labels that are not
    ``-100`` are scored; the fused head shifts them by one itself."""
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, : input_ids.shape[1] - int(logits_to_keep)] = -100
    return labels


def trl_fused_head_logps(model, input_ids, labels, temperature=1.0):
    """The per-token log-probs TRL 1.16.0's fused LM head returns (a copy of ``model``
    with ``trl.trainer.utils.add_fused_lm_head(model, temperature=...)``), 0 where
    ``labels`` is ``-100``. Raises ``ImportError`` when TRL is not installed."""
    import copy

    from trl.trainer.utils import add_fused_lm_head

    fused = copy.deepcopy(model)
    add_fused_lm_head(fused, temperature=_temperature(temperature))
    with torch.no_grad():
        out = fused(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            labels=labels,
            fused_lm_head=True,
        )
    return out.log_probs


def old_logps_source(
    num_iterations=1,
    steps_per_generation=None,
    gradient_accumulation_steps=1,
    vllm_importance_sampling=False,
):
    """Where TRL 1.16.0's ``old_per_token_logps`` come from, as a sentence.

    ``_generate_and_score_completions`` computes them, once per generation batch,
    under ``torch.no_grad()`` with the weights that sampled it, if
    ``gradient_accumulation_steps % (steps_per_generation * num_iterations) != 0``
    or vLLM's importance-sampling correction is on; otherwise it stores ``None`` and
    ``_compute_loss`` uses ``per_token_logps.detach()``: the ratio is exactly 1.
    ``steps_per_generation`` defaults to ``gradient_accumulation_steps`` (GRPOConfig).
    """
    ga = v.integer(
        gradient_accumulation_steps, "gradient_accumulation_steps", minimum=1
    )
    spg = ga if steps_per_generation is None else steps_per_generation
    spg = v.integer(spg, "steps_per_generation", minimum=1)
    every = spg * v.integer(num_iterations, "num_iterations", minimum=1)
    if ga % every != 0 or vllm_importance_sampling:
        return "computed once per generation batch, before its updates"
    return "the current log-probs, detached (ratio 1)"
