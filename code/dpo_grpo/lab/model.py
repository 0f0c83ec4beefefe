"""The lab's pieces below the trainer: a character vocabulary, the verifier, a tiny
decoder-only transformer (:func:`make_model` builds it from a config), batched sampling
with per-token log-probs, and the completion log-probs a trainer needs.

Layout of one sequence (prompts are left-padded to a common width ``P``, completions
right-padded to ``L``)::

    [PAD PAD BOS 4 7 + 5 =] [5 2 EOS PAD PAD]
     <----- prompt (P) ---> <- completion (L) ->
     prompt_mask 0 0 1 ...   completion_mask 1 1 1 0 0

``completion_mask`` is 1 on every sampled token up to and including the first EOS and 0
afterwards, so losses and log-prob sums never see the prompt or the padding. Shapes:
``(B, P)`` prompts, ``(B, L)`` completions, ``(B, L, V)`` logits over the vocabulary of
size ``V``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn as nn

from .. import _validation as v
from .config import LabConfig, checked_config

PAD, BOS, EOS = 0, 1, 2
CHARS = "0123456789+="


class CharVocab:
    """Character vocabulary: ``PAD=0``, ``BOS=1``, ``EOS=2``, then one id per character
    of :data:`CHARS`."""

    specials = ("<pad>", "<bos>", "<eos>")

    def __init__(self, chars: str = CHARS):
        if not isinstance(chars, str) or not chars or len(set(chars)) != len(chars):
            raise ValueError(
                "chars must be a non-empty string of distinct characters, got "
                f"{chars!r}"
            )
        self.chars = chars
        self.itos = list(self.specials) + list(chars)
        self.stoi = {c: i + len(self.specials) for i, c in enumerate(chars)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        try:
            return [self.stoi[c] for c in text]
        except KeyError as exc:
            raise ValueError(
                f"character {exc.args[0]!r} is not in the vocabulary {self.chars!r}"
            ) from None

    def decode(self, ids) -> str:
        """Characters up to (not including) the first EOS; PAD and BOS are skipped."""
        out = []
        if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            raise TypeError(
                f"ids must be a sequence of token ids, got {type(ids).__name__}"
            )
        for i in ids:
            i = _token_id(i, len(self.itos))
            if i == EOS:
                break
            if i >= len(self.specials):
                out.append(self.itos[i])
        return "".join(out)


def _token_id(i, size: int) -> int:
    """One token id as an int in ``[0, size)``."""
    try:
        j = int(i)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"ids must hold integer token ids, got {i!r}") from None
    if isinstance(i, (bool, np.bool_)) or j != i:
        raise ValueError(f"ids must hold integer token ids, got {i!r}")
    if not 0 <= j < size:
        raise ValueError(f"token id {j} is outside the vocabulary (size {size})")
    return j


VOCAB = CharVocab()


# --- The task and its verifier --------------------------------------------------------


def verify(prompt: str, completion: str) -> bool:
    """True iff ``completion`` is exactly the decimal sum asked by ``prompt``
    (``"a+b+c="``): no leading zeros, no sign, no extra characters. This program is the
    lab's whole reward model."""
    if not isinstance(prompt, str) or not isinstance(completion, str):
        raise TypeError("prompt and completion must be str")
    terms = prompt[:-1].split("+")
    if (
        not prompt.endswith("=")
        or len(terms) < 2
        or not all(t.isdigit() and t.isascii() for t in terms)
    ):
        raise ValueError(
            "prompt must look like 'a+b=' or 'a+b+c=' with decimal terms, got "
            f"{prompt!r}"
        )
    return completion == str(sum(int(t) for t in terms))


# --- The model ------------------------------------------------------------------------


class Block(nn.Module):
    """Pre-norm transformer block: causal multi-head self-attention, then a GELU MLP,
    each with a residual."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model)
        )

    def forward(self, x, allowed):
        bsz, width, d = x.shape
        h = self.n_heads
        q, k, v = (
            self.qkv(self.ln1(x)).view(bsz, width, 3, h, d // h).permute(2, 0, 3, 1, 4)
        )
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // h)  # (B, H, T, T)
        scores = scores.masked_fill(~allowed[:, None], float("-inf"))
        att = scores.softmax(dim=-1) @ v  # (B, H, T, d/h)
        x = x + self.proj(att.transpose(1, 2).reshape(bsz, width, d))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    """Decoder-only transformer in plain torch: token + learned position embeddings,
    ``n_layers`` blocks, a final LayerNorm and an untied output head.
    ``forward(ids, attention_mask) -> logits (B, T, V)``.

    Positions count valid tokens only (``cumsum(attention_mask) - 1``), and masked keys
    are never attended to, so a left-padded sequence gives exactly the logits of the
    same sequence without its padding.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        d_ff: int = 256,
        max_seq_len: int = 16,
    ):
        super().__init__()
        for name, x in (
            ("vocab_size", vocab_size),
            ("d_model", d_model),
            ("n_layers", n_layers),
            ("n_heads", n_heads),
            ("d_ff", d_ff),
            ("max_seq_len", max_seq_len),
        ):
            v.integer(x, name, minimum=1)
        if d_model % n_heads:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by n_heads ({n_heads})"
            )
        self.max_seq_len = max_seq_len
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_seq_len, d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, d_ff) for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.apply(self._init)

    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids, attention_mask=None):
        bsz, width = ids.shape
        if width > self.max_seq_len:
            raise ValueError(
                f"sequence width {width} exceeds max_seq_len {self.max_seq_len}"
            )
        if attention_mask is None:
            attention_mask = torch.ones_like(ids, dtype=torch.bool)
        valid = attention_mask.bool()
        positions = (valid.long().cumsum(dim=1) - 1).clamp(min=0)
        causal = torch.ones(width, width, dtype=torch.bool, device=ids.device).tril()
        eye = torch.eye(width, dtype=torch.bool, device=ids.device)
        # query i may attend key j <= i if j is a real token; a padding query attends
        # itself only (its output is never used, but a row of -inf would give NaN).
        allowed = (causal & valid[:, None, :]) | eye
        x = self.tok(ids) + self.pos(positions)
        for block in self.blocks:
            x = block(x, allowed)
        return self.head(self.ln_f(x))


def make_model(cfg: LabConfig) -> TinyTransformer:
    checked_config(cfg)
    return TinyTransformer(
        len(VOCAB),
        d_model=cfg.d_model,
        n_layers=cfg.n_layers,
        n_heads=cfg.n_heads,
        d_ff=cfg.d_ff,
        max_seq_len=cfg.context_length,
    )


def count_parameters(model: nn.Module) -> int:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return sum(p.numel() for p in model.parameters())


# --- Batching, sampling and log-probs -------------------------------------------------


def encode_prompts(prompts, device=None, vocab: CharVocab = VOCAB):
    """Left-padded ``(ids, mask)`` of shape ``(B, P)``: ``PAD.. BOS chars``; ``mask`` is
    1 on BOS and the chars."""
    rows = [[BOS] + vocab.encode(p) for p in text_list(prompts, "prompts")]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), PAD, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r)
        mask[i, width - len(r) :] = True
    return ids.to(device), mask.to(device)


def encode_completions(texts, width=None, device=None, vocab: CharVocab = VOCAB):
    """Right-padded ``(ids, mask)`` of ``text + EOS``, shape ``(B, L)``; ``mask`` is 1
    up to and including EOS."""
    rows = [vocab.encode(t) + [EOS] for t in text_list(texts, "texts")]
    width = (
        max(len(r) for r in rows)
        if width is None
        else v.integer(width, "width", minimum=1)
    )
    ids = torch.full((len(rows), width), PAD, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, r in enumerate(rows):
        r = r[:width]
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = True
    return ids.to(device), mask.to(device)


def text_list(texts, name) -> list:
    """A non-empty list of strings (a bare string is one text, not a list of characters:
    rejected)."""
    if isinstance(texts, str):
        raise TypeError(
            f"{name} must be a list of strings, got a single str {texts!r} (wrap it "
            "in a list)"
        )
    texts = v.sequence(texts, name)
    if not texts:
        raise ValueError(f"{name} must not be empty")
    if not all(isinstance(t, str) for t in texts):
        raise TypeError(
            f"{name} must be a list of strings, got an item of type "
            f"{next(type(t).__name__ for t in texts if not isinstance(t, str))}"
        )
    return texts


def check_ids_and_mask(ids, mask, name):
    """Check a 2-D integer id tensor ``<name>_ids`` ``(B, L)`` and its same-shaped mask
    ``<name>_mask``; a TypeError/ValueError names the bad one."""
    if (
        not isinstance(ids, torch.Tensor)
        or ids.dim() != 2
        or ids.is_floating_point()
        or ids.is_complex()
    ):
        raise TypeError(
            f"{name}_ids must be a 2-D integer tensor, got {type(ids).__name__} "
            f"{tuple(getattr(ids, 'shape', ()))}"
        )
    if not isinstance(mask, torch.Tensor) or mask.shape != ids.shape:
        raise ValueError(
            f"{name}_mask must be a tensor of shape {tuple(ids.shape)}, got "
            f"{type(mask).__name__} {tuple(getattr(mask, 'shape', ()))}"
        )


def _temperature(temperature) -> float:
    return v.scalar(temperature, "temperature", positive=True)


class Rollout(NamedTuple):
    """What sampling hands to the trainer: token ids, masks and the sampling policy's
    log-probs, never text."""

    completion_ids: torch.Tensor  #: (B, L) sampled tokens, PAD after EOS
    completion_mask: torch.Tensor  #: (B, L) bool, 1 up to and including the first EOS
    #: (B, L) log-prob of each sampled token under the sampling distribution, 0 on
    #: padding
    logps: torch.Tensor
    finished: torch.Tensor  #: (B,) bool, an EOS was produced within the length limit


@torch.no_grad()
def generate(
    model,
    prompt_ids,
    prompt_mask,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    greedy: bool = False,
    generator: torch.Generator | None = None,
    eos_id: int = EOS,
    pad_id: int = PAD,
    logits_fn=None,
) -> Rollout:
    """Sample (or decode greedily) up to ``max_new_tokens`` tokens per prompt; stop
    early when all rows ended.

    Each step runs the full prefix through the model (no KV cache: the sequences here
    are a dozen tokens), samples from ``softmax(logits / temperature)`` with
    ``generator``, and records the token's log-prob under that same tempered
    distribution: these are the rollout's "old" log-probs.
    ``logits_fn(model, ids, mask)`` (default: ``model(ids, mask)``) and
    ``eos_id``/``pad_id`` let the same sampler drive a Hugging Face model
    (:func:`dpo_grpo.lab.hf.hf_generate`).
    """
    check_ids_and_mask(prompt_ids, prompt_mask, "prompt")
    max_new_tokens = v.integer(max_new_tokens, "max_new_tokens", minimum=1)
    eos_id, pad_id = (
        v.integer(eos_id, "eos_id", minimum=0),
        v.integer(pad_id, "pad_id", minimum=0),
    )
    logits_fn = (lambda m, ids, mask: m(ids, mask)) if logits_fn is None else logits_fn
    temperature = _temperature(temperature)
    greedy = v.boolean(greedy, "greedy")
    bsz = prompt_ids.shape[0]
    device = prompt_ids.device
    seq, seq_mask = prompt_ids, prompt_mask.bool()
    ids = torch.full((bsz, max_new_tokens), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((bsz, max_new_tokens), dtype=torch.bool, device=device)
    logps = torch.zeros((bsz, max_new_tokens), dtype=torch.float32, device=device)
    done = torch.zeros(bsz, dtype=torch.bool, device=device)
    steps = 0
    for t in range(max_new_tokens):
        logits = logits_fn(model, seq, seq_mask)[:, -1, :].float()
        logp = torch.log_softmax(logits / temperature, dim=-1)
        if greedy:
            tok = logp.argmax(dim=-1)
        else:
            tok = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)
        live = ~done
        tok = torch.where(live, tok, torch.full_like(tok, pad_id))
        ids[:, t] = tok
        mask[:, t] = live
        logps[:, t] = torch.where(
            live, logp.gather(1, tok[:, None]).squeeze(1), torch.zeros_like(logps[:, t])
        )
        done = done | (live & (tok == eos_id))
        seq = torch.cat([seq, tok[:, None]], dim=1)
        seq_mask = torch.cat([seq_mask, live[:, None]], dim=1)
        steps = t + 1
        if bool(done.all()):
            break
    return Rollout(ids[:, :steps], mask[:, :steps], logps[:, :steps], done)


def completion_logps(
    model,
    prompt_ids,
    prompt_mask,
    completion_ids,
    completion_mask,
    *,
    temperature: float = 1.0,
    log_softmax_fn=None,
    logits_fn=None,
):
    """Per-token log-probs ``(B, L)`` of the completion tokens under ``model``, one
    forward pass.

    The logits that predict completion token ``t`` sit at position ``P - 1 + t`` of
    ``cat(prompt, completion)``; they are divided by ``temperature`` (as TRL does, so
    the ratio compares the distributions that were sampled) and gathered with
    ``log_softmax_fn(logits, ids)`` (``selective_log_softmax``). Padding positions hold
    arbitrary finite values: multiply by ``completion_mask`` before summing.
    ``logits_fn(model, ids, mask)`` (default ``model(ids, mask)``) lets a Hugging Face
    model use it (:func:`dpo_grpo.lab.hf.hf_logps`).
    """
    check_ids_and_mask(prompt_ids, prompt_mask, "prompt")
    check_ids_and_mask(completion_ids, completion_mask, "completion")
    if completion_ids.shape[0] != prompt_ids.shape[0]:
        raise ValueError(
            f"completion_ids must have one row per prompt ({prompt_ids.shape[0]}), "
            f"got {completion_ids.shape[0]}"
        )
    temperature = _temperature(temperature)
    width = prompt_ids.shape[1]
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask.bool(), completion_mask.bool()], dim=1)
    logits = (model(ids, mask) if logits_fn is None else logits_fn(model, ids, mask))[
        :, width - 1 : -1, :
    ]
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    if log_softmax_fn is None:
        return (
            torch.log_softmax(logits, dim=-1)
            .gather(-1, completion_ids[..., None])
            .squeeze(-1)
        )
    return log_softmax_fn(logits, completion_ids)
