"""A real sentence as the arrays of the token-level loss (chapter 4, section 4.4).

The losses of chapters 3 and 4 take per-token log-probs of shape ``(answers,
positions)`` and a mask. This module makes such arrays from English text, with no
download: a word-level tokenizer built from :data:`CORPUS` (each piece keeps its
leading space, as GPT-2's byte-level pieces do), a bigram language model fitted on the
same sentences by counting, and a batch of one prompt with several answers laid out as
a trainer lays it out, ``<bos> prompt answer <eos>`` then padding.

- :class:`WordTokenizer`: ``encode`` (text to ids, refusing a piece it does not
  know) and ``pieces`` (ids to pieces).
- :func:`bigram_logprobs`: ``log P(next | previous)``, counts with add-``alpha``
  smoothing, so a pair the corpus never shows keeps a small probability.
- :func:`encode_batch`: ids, roles (``"P"`` prompt, ``"C"`` completion, ``"."``
  padding) and the loss mask (1 exactly on the completion, ``<eos>`` included).

The chapter reads each token's log-prob from the table row of the token before it (the
shift of a causal language model) in its own cell.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from .. import _validation as v

#: The corpus the tokenizer and the bigram model are built from.
CORPUS = (
    "The capital of France is Paris.",
    "The capital of Italy is Rome.",
    "Paris is a city on the Seine.",
    "Rome is a city on the Tiber.",
)
PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
#: A word with its leading space, or one punctuation mark
_PIECE = re.compile(r" ?\w+| ?[^\w\s]")
#: Roles in :attr:`TokenBatch.roles`
PROMPT, COMPLETION, PADDING = "P", "C", "."


def _text(text, name: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{name} must hold at least one word")
    return text


class WordTokenizer:
    """A word-level tokenizer: ids 0, 1 and 2 are ``<pad>``, ``<bos>`` and ``<eos>``,
    then the pieces of ``corpus`` in the order they first appear."""

    def __init__(self, corpus=CORPUS):
        sentences = [_text(s, "corpus sentence") for s in v.sequence(corpus, "corpus")]
        if not sentences:
            raise ValueError("corpus must hold at least one sentence")
        self.vocab = [PAD, BOS, EOS]
        for sentence in sentences:
            for piece in _PIECE.findall(sentence):
                if piece not in self.vocab:
                    self.vocab.append(piece)
        self.id_of = {piece: i for i, piece in enumerate(self.vocab)}

    def encode(self, text) -> list[int]:
        """The ids of ``text``'s pieces; ``ValueError`` naming a piece the
        vocabulary lacks."""
        pieces = _PIECE.findall(_text(text, "text"))
        unknown = [p for p in pieces if p not in self.id_of]
        if unknown:
            raise ValueError(f"text has pieces outside the vocabulary: {unknown}")
        return [self.id_of[p] for p in pieces]

    def pieces(self, ids) -> list[str]:
        """The pieces of ``ids`` (a 1-D sequence of ids)."""
        arr = v.integer_array(ids, "ids", ndim=1)
        if arr.min() < 0 or arr.max() >= len(self.vocab):
            raise ValueError(f"ids must lie in [0, {len(self.vocab)})")
        return [self.vocab[i] for i in arr]


def _require_tokenizer(tokenizer):
    if not isinstance(tokenizer, WordTokenizer):
        raise TypeError(
            f"tokenizer must be a WordTokenizer, got {type(tokenizer).__name__}"
        )


def bigram_logprobs(tokenizer, corpus=CORPUS, alpha=0.1):
    """``table[a, b] = log P(b | a)`` (V, V): the bigram counts of ``corpus`` (each
    sentence as ``<bos>`` pieces ``<eos>``) with add-``alpha`` smoothing,
    ``(count(a, b) + alpha) / (count(a) + alpha V)``. Every row sums to 1 in
    probability; ``<pad>`` is never counted, so it keeps only the smoothing."""
    _require_tokenizer(tokenizer)
    alpha = v.scalar(alpha, "alpha", positive=True)
    n = len(tokenizer.vocab)
    counts = np.zeros((n, n))
    bos, eos = tokenizer.id_of[BOS], tokenizer.id_of[EOS]
    for sentence in v.sequence(corpus, "corpus"):
        ids = [bos, *tokenizer.encode(sentence), eos]
        np.add.at(counts, (ids[:-1], ids[1:]), 1.0)
    smoothed = counts + alpha
    return np.log(smoothed / smoothed.sum(axis=1, keepdims=True))


class TokenBatch(NamedTuple):
    """One prompt and its answers as a trainer batches them, shape (B, T): ``ids``
    (int), ``roles`` (``"P"``, ``"C"`` or ``"."``) and ``mask`` (1.0 on the
    completion, ``<eos>`` included; 0.0 on the prompt and the padding)."""

    ids: np.ndarray
    roles: np.ndarray
    mask: np.ndarray


def encode_batch(tokenizer, prompt, completions) -> TokenBatch:
    """Rows ``<bos> prompt completion <eos>``, padded with ``<pad>`` to the longest;
    one row per completion."""
    _require_tokenizer(tokenizer)
    head = [tokenizer.id_of[BOS], *tokenizer.encode(_text(prompt, "prompt"))]
    completions = v.sequence(completions, "completions")
    if not completions:
        raise ValueError("completions must hold at least one answer")
    tails = [
        [*tokenizer.encode(_text(c, "completion")), tokenizer.id_of[EOS]]
        for c in completions
    ]
    width = len(head) + max(len(t) for t in tails)
    ids = np.full((len(tails), width), tokenizer.id_of[PAD], dtype=np.int64)
    roles = np.full((len(tails), width), PADDING)
    for i, tail in enumerate(tails):
        ids[i, : len(head) + len(tail)] = head + tail
        roles[i, : len(head)] = PROMPT
        roles[i, len(head) : len(head) + len(tail)] = COMPLETION
    return TokenBatch(ids, roles, (roles == COMPLETION).astype(np.float64))
