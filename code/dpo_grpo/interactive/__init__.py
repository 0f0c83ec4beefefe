"""Explorables: the data behind each one (``explorables``), kernel-free plotly figures with sliders (``figures``),
live ipywidgets (``widgets``) and the chapter diagrams (``diagrams``). Builds on the reference and TRL layers."""
