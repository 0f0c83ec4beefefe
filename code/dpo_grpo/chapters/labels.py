"""The reader's words for the English keys of the reference layer: the memory ledger's
components (:func:`~dpo_grpo.reference.memory.algorithm_ledger`,
:func:`~dpo_grpo.reference.memory.training_state_ledger`) and the clip regions
(:func:`~dpo_grpo.reference.grpo.clip_region`).

The keys stay English, since code compares them (``ledger["policy (trainable)"]``,
``regions == "platform"``); a page prints :func:`ledger_label` and :func:`region_label`
of them, which are the keys themselves in English and Chinese under
``DPO_GRPO_LANG=zh`` (:mod:`dpo_grpo.i18n`).
"""

from __future__ import annotations

import re

from ..i18n import N_, tr

__all__ = ["LEDGER_MODELS", "REGIONS", "ledger_label", "region_label"]

#: the models of :func:`~dpo_grpo.reference.memory.algorithm_ledger`: key -> label
LEDGER_MODELS = {
    "policy (trainable)": N_("policy (trainable)"),
    "critic (trainable)": N_("critic (trainable)"),
    "reference (frozen)": N_("reference (frozen)"),
    "reward model (frozen)": N_("reward model (frozen)"),
}
#: the regions of :func:`~dpo_grpo.reference.grpo.clip_region`: key -> label
REGIONS = {
    "inside": N_("inside"),
    "platform": N_("platform"),
    "wrong_direction": N_("wrong_direction"),
}
_STATE = re.compile(r"(weights|gradients|master weights|(\w+) states) \((\w+)\)")


def ledger_label(name: str) -> str:
    """A memory-ledger key in the reader's language: a model of ``algorithm_ledger``
    (``"policy (trainable)"``) or a component of ``training_state_ledger``
    (``"weights (bf16)"``, ``"adamw states (fp32)"``). Raises ValueError for any other
    text."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if name in LEDGER_MODELS:
        return tr(LEDGER_MODELS[name])
    match = _STATE.fullmatch(name)
    if match is None:
        raise ValueError(f"name must be a memory-ledger key, got {name!r}")
    kind, optimizer, dtype = match.groups()
    if kind == "weights":
        return tr("weights ({dtype})", dtype=dtype)
    if kind == "gradients":
        return tr("gradients ({dtype})", dtype=dtype)
    if kind == "master weights":
        return tr("master weights ({dtype})", dtype=dtype)
    return tr("{optimizer} states ({dtype})", optimizer=optimizer, dtype=dtype)


def region_label(region) -> str:
    """A clip region of ``clip_region`` (``"inside"``, ``"platform"``,
    ``"wrong_direction"``) in the reader's language."""
    region = str(region)
    if region not in REGIONS:
        raise ValueError(f"region must be one of {', '.join(REGIONS)}, got {region!r}")
    return tr(REGIONS[region])
