"""Every explorable with a static figure and a live widget, by name: :data:`EXPLORABLES`
(the specs), :data:`FIGURES` (``name -> *_figure``) and :data:`WIDGETS`
(``name -> *_widget``).

Chapters 1-5's seven (clip platforms to the memory ledger) come first, then chapters
6-10's four (length normalisation, difficulty weighting, DPO dynamics, reusing a
generation batch). Each lives in its own module.
"""

from __future__ import annotations

from . import (
    bandit,
    clip_platform,
    clip_reuse,
    difficulty,
    dpo_dynamics,
    dpo_margin,
    group_advantage,
    kl_estimator,
    length_norm,
    memory_ledger,
    zero_std,
)

__all__ = ["EXPLORABLES", "FIGURES", "WIDGETS"]

EXPLORABLES = {
    "clip_platform": clip_platform.CLIP,
    "zero_std": zero_std.ZERO_STD,
    "group_advantage": group_advantage.GROUP_ADVANTAGE,
    "dpo": dpo_margin.DPO,
    "kl_estimator": kl_estimator.KL,
    "bandit": bandit.BANDIT,
    "memory_ledger": memory_ledger.MEMORY,
    "length_norm": length_norm.LENGTH_NORM,
    "difficulty": difficulty.DIFFICULTY,
    "dpo_dynamics": dpo_dynamics.DPO_DYNAMICS,
    "clip_reuse": clip_reuse.CLIP_REUSE,
}
FIGURES = {
    "clip_platform": clip_platform.clip_platform_figure,
    "zero_std": zero_std.zero_std_figure,
    "group_advantage": group_advantage.group_advantage_figure,
    "dpo": dpo_margin.dpo_figure,
    "kl_estimator": kl_estimator.kl_estimator_figure,
    "bandit": bandit.bandit_figure,
    "memory_ledger": memory_ledger.memory_ledger_figure,
    "length_norm": length_norm.length_norm_figure,
    "difficulty": difficulty.difficulty_figure,
    "dpo_dynamics": dpo_dynamics.dpo_dynamics_figure,
    "clip_reuse": clip_reuse.clip_reuse_figure,
}
WIDGETS = {
    "clip_platform": clip_platform.clip_platform_widget,
    "zero_std": zero_std.zero_std_widget,
    "group_advantage": group_advantage.group_advantage_widget,
    "dpo": dpo_margin.dpo_widget,
    "kl_estimator": kl_estimator.kl_estimator_widget,
    "bandit": bandit.bandit_widget,
    "memory_ledger": memory_ledger.memory_ledger_widget,
    "length_norm": length_norm.length_norm_widget,
    "difficulty": difficulty.difficulty_widget,
    "dpo_dynamics": dpo_dynamics.dpo_dynamics_widget,
    "clip_reuse": clip_reuse.clip_reuse_widget,
}
