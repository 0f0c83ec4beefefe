"""The explorables of chapters 6-10, registered like :mod:`dpo_grpo.interactive.figures`' seven:
length normalisation, difficulty weighting, DPO dynamics and reusing a generation batch."""

from __future__ import annotations

from . import clip_reuse, difficulty, dpo_dynamics, length_norm

EXPLORABLES = {
    "length_norm": length_norm.LENGTH_NORM,
    "difficulty": difficulty.DIFFICULTY,
    "dpo_dynamics": dpo_dynamics.DPO_DYNAMICS,
    "clip_reuse": clip_reuse.CLIP_REUSE,
}
FIGURES = {
    "length_norm": length_norm.length_norm_figure,
    "difficulty": difficulty.difficulty_figure,
    "dpo_dynamics": dpo_dynamics.dpo_dynamics_figure,
    "clip_reuse": clip_reuse.clip_reuse_figure,
}
WIDGETS = {
    "length_norm": length_norm.length_norm_widget,
    "difficulty": difficulty.difficulty_widget,
    "dpo_dynamics": dpo_dynamics.dpo_dynamics_widget,
    "clip_reuse": clip_reuse.clip_reuse_widget,
}
