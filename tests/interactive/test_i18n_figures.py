"""The explorables in the Chinese edition (DPO_GRPO_LANG=zh): titles, axes, legends,
hover text, slider and widget labels come out in Chinese with a CJK font stack; in
English they are unchanged."""

from __future__ import annotations

import re

import pytest
from dpo_grpo.i18n import CJK_FONT_FAMILY, needs_translation
from dpo_grpo.interactive import (
    clip_platform,
    cost_explorer,
    kl_variance,
    registry,
    token_level,
    zero_std,
)

HAN = re.compile(r"[\u4e00-\u9fff]")


def _texts(fig) -> dict:
    layout = fig.layout
    return {
        "xaxis3": layout.xaxis3.title.text,
        "subplot": layout.annotations[0].text,
        "legend": [t.name for t in fig.data if t.showlegend is not False][:3],
        "hover": fig.data[6].text[0],
        "slider": layout.sliders[0].currentvalue.prefix,
        "font": layout.font.family,
    }


def test_clip_platform_figure_in_english_is_unchanged(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    t = _texts(clip_platform.clip_platform_figure())
    assert t["xaxis3"] == "ratio ρ = π_θ / π_old"
    assert t["subplot"] == "A > 0 (a good answer): objective"
    assert t["legend"][0] == "A > 0 (per unit |A|)"
    assert t["hover"].startswith("answer 1 (r = 0.2)<br>ρ = 1.2840")
    assert t["slider"] == "clip radius ε_low = "
    assert t["font"] is None


def test_clip_platform_figure_in_chinese(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    t = _texts(clip_platform.clip_platform_figure())
    assert t["xaxis3"] == "概率比 ρ = π_θ / π_old"
    assert t["subplot"] == "A > 0（好回答）：目标"
    assert HAN.search(t["legend"][0])
    # the numbers are the same, the words Chinese
    assert t["hover"].startswith("回答 1（r = 0.2）<br>ρ = 1.2840")
    assert "裁剪后的目标" in t["hover"]
    assert t["slider"] == "裁剪半径 ε_low = "
    assert t["font"] == CJK_FONT_FAMILY


def test_switching_back_to_english_gives_the_english_figure(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    zh = zero_std.zero_std_figure().to_plotly_json()
    monkeypatch.setenv("DPO_GRPO_LANG", "en")
    en = zero_std.zero_std_figure().to_plotly_json()
    assert HAN.search(str(zh["layout"])) and not HAN.search(str(en["layout"]))
    assert [t["y"] for t in zh["data"]] == [t["y"] for t in en["data"]]


def test_cost_figure_in_chinese(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    fig = cost_explorer.cost_figure(model_sizes=(7e9,), answer_lens=(256,))
    assert fig.layout.title.text.startswith("一步：64 个")
    assert fig.layout.font.family == CJK_FONT_FAMILY
    assert HAN.search(fig.layout.updatemenus[0].buttons[0].label)


def test_widget_labels_in_chinese(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    w = clip_platform.clip_platform_widget()
    descriptions = [c.description for c in w.controls.values()]
    assert "裁剪半径 ε_low" in descriptions and "用 δ 封顶" in descriptions
    monkeypatch.setenv("DPO_GRPO_LANG", "en")
    w = clip_platform.clip_platform_widget()
    assert "clip radius ε_low" in [c.description for c in w.controls.values()]


#: math in a label, not English: subscripted or primed symbols (π_ref, y_w, log₁₀) and
#: the operators and superscripts written as words (log, exp, ref, old, min, max, clip)
MATH = re.compile(r"\w*[_₀-₉]\w*|\b(?:log|exp|ref|old|min|max|clip)\b")


def _labels(widget) -> list[str]:
    """The text a reader sees on a widget and everything inside it: descriptions,
    tooltips, button texts and a menu's labels (not the options of a menu whose
    labels are its values: dtype names, loss types, the code's own names)."""
    texts = []
    for key in ("description", "tooltip", "placeholder"):
        value = getattr(widget, key, None)
        if isinstance(value, str):
            texts.append(value)
    options = getattr(widget, "options", ())
    if any(isinstance(o, tuple) for o in options):
        texts += [label for label, _ in options]
    for child in getattr(widget, "children", ()):
        texts += _labels(child)
    return texts


LIVE = {
    **{f"registry.{name}": make for name, make in registry.WIDGETS.items()},
    "cost_explorer": cost_explorer.cost_explorer,
    "kl_variance": kl_variance.kl_variance_widget,
    "token_level": token_level.token_level_widget,
}


@pytest.mark.parametrize("name", sorted(LIVE))
def test_every_live_widget_label_is_chinese(monkeypatch, name):
    """No English word a Chinese reader would have to read on a live widget's controls
    (symbols, acronyms and TRL's option names stay: dpo_grpo.i18n.needs_translation)."""
    pytest.importorskip("ipywidgets")
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    ui = LIVE[name]()
    controls = list(getattr(ui, "controls", {}).values())
    labels = [text for w in controls for text in _labels(w)]
    assert labels, f"{name}: no controls found"
    english = [text for text in labels if needs_translation(MATH.sub(" ", text))]
    assert english == [], name


#: what a figure shows that is code, not English: TRL's loss types and metric names
#: (``rewards/chosen``), option settings (``scale_rewards="group"``)
CODE = re.compile(r"\b(?:grpo|bnpo|dapo|cispo|sapo|luspo|vespo)\b|\S+/\S+|\S+=\S+")


def _shown_text(fig) -> list[str]:
    """The text a reader sees on a plotly figure: titles, axis titles, annotations,
    legend entries, menu buttons, slider labels and the slider's value prefix."""
    spec = fig.to_plotly_json()
    layout = spec["layout"]
    texts = [t.get("name") for t in spec["data"] if t.get("showlegend", True)]
    texts.append((layout.get("title") or {}).get("text"))
    for key, axis in layout.items():
        if key.startswith(("xaxis", "yaxis")):
            texts.append((axis.get("title") or {}).get("text"))
    texts += [a.get("text") for a in layout.get("annotations", ())]
    for menu in layout.get("updatemenus", ()):
        texts += [b.get("label") for b in menu.get("buttons", ())]
    for slider in layout.get("sliders", ()):
        texts.append((slider.get("currentvalue") or {}).get("prefix"))
        texts += [s.get("label") for s in slider.get("steps", ())]
    return [t for t in texts if isinstance(t, str)]


@pytest.mark.parametrize("name", sorted(registry.FIGURES))
def test_every_explorable_figure_shows_chinese(monkeypatch, name):
    """No English word a Chinese reader would have to read on a static explorable: its
    titles, legends, menus and slider labels all pass through tr."""
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    texts = _shown_text(registry.FIGURES[name]())
    assert texts, f"{name}: no text found"
    english = [t for t in texts if needs_translation(MATH.sub(" ", CODE.sub(" ", t)))]
    assert english == [], name
