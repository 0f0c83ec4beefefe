"""Explorables: the framework (``explorable``: the spec and its static slider figure;
``widgets``: the live ipywidgets UI), one module per explorable (``clip_platform``,
``zero_std``, ``group_advantage``, ``dpo_margin``, ``kl_estimator``, ``bandit``,
``memory_ledger``, ``length_norm``, ``difficulty``, ``dpo_dynamics``, ``clip_reuse``,
``kl_variance``, ``token_level``, ``cost_explorer``), their NumPy data (``explorables``;
the memory ledger's in ``memory_data``), the index by name (``registry``) and the
chapter diagrams (``diagrams``). Builds on the reference and TRL layers."""
