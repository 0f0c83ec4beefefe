"""The article's formulas as short NumPy functions, one per equation, each shown in the
chapter that derives it.

Layer 1 of the package: imports nothing from ``dpo_grpo`` except the argument checks in
``dpo_grpo._validation``.
"""
