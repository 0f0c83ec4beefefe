"""The Chinese edition's matplotlib font (:mod:`dpo_grpo.i18n`): Noto Sans CJK SC from
the mplfonts package, never from the OS, a clear error where the package is missing,
and the glyph check that fails a figure which would draw a character as a box."""

from __future__ import annotations

import ast
import importlib.resources
import os
import sys
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
from dpo_grpo import i18n
from fontTools.ttLib import TTFont  # a dependency of matplotlib
from matplotlib import font_manager, rcParams
from matplotlib.figure import Figure

PACKAGE = Path(i18n.__file__).parent
#: a Thai letter: Noto Sans CJK SC and DejaVu Sans have no glyph for it
THAI = "ก"


@pytest.fixture(autouse=True)
def _fonts_restored():
    saved = list(rcParams["font.sans-serif"])
    yield
    rcParams["font.sans-serif"] = saved
    plt.close("all")
    font_manager.fontManager._findfont_cached.cache_clear()


def _figure(text: str) -> Figure:
    fig = Figure(figsize=(3, 1))
    fig.text(0.05, 0.5, text)
    return fig


def test_the_cjk_font_is_the_mplfonts_file():
    path = Path(i18n.cjk_font_file())
    assert path == Path(
        importlib.resources.files("mplfonts") / "fonts" / "NotoSansCJKsc-Regular.otf"
    )
    assert path.is_file()


def test_the_font_has_every_han_character_of_the_catalog():
    cmap = TTFont(i18n.cjk_font_file(), lazy=True).getBestCmap()
    used = {c for text in i18n.catalog("zh").values() for c in text if ord(c) > 0x2E7F}
    assert used and not {c for c in used if ord(c) not in cmap}


def test_chinese_is_drawn_with_the_package_font_on_a_machine_without_one(
    monkeypatch,
):
    # a machine whose only fonts are matplotlib's own (DejaVu, no Han glyph)
    bundled = [
        f
        for f in font_manager.fontManager.ttflist
        if f.fname.startswith(matplotlib.get_data_path())
    ]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", bundled)
    font_manager.fontManager._findfont_cached.cache_clear()
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    family = i18n.use_cjk_matplotlib_font()
    assert family == "Noto Sans CJK SC"
    assert rcParams["font.sans-serif"][0] == family
    found = font_manager.findfont(
        font_manager.FontProperties(family=family), fallback_to_default=False
    )
    assert Path(found) == Path(i18n.cjk_font_file())
    i18n.check_glyphs(_figure("价值网络 $V_\\phi(s_t)$ 与优势"))


def test_in_english_no_font_is_needed(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    monkeypatch.setitem(sys.modules, "mplfonts", None)
    assert i18n.use_cjk_matplotlib_font() is None


def test_without_mplfonts_chinese_figures_say_what_to_install(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    monkeypatch.setitem(sys.modules, "mplfonts", None)  # import mplfonts fails
    with pytest.raises(ImportError, match=r"pip install mplfonts.*dpo-grpo\[zh\]"):
        i18n.use_cjk_matplotlib_font()


def test_the_thai_letter_is_missing_from_the_fonts():
    for path in (
        i18n.cjk_font_file(),
        os.path.join(matplotlib.get_data_path(), "fonts", "ttf", "DejaVuSans.ttf"),
    ):
        assert ord(THAI) not in TTFont(path, lazy=True).getBestCmap(), path


@pytest.mark.parametrize("text", [f"价值网络 {THAI}", f"价值网络 $V$ {THAI}"])
def test_the_glyph_check_names_a_missing_character_and_its_text(monkeypatch, text):
    # plain text (matplotlib warns) and mathtext (matplotlib logs)
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    i18n.use_cjk_matplotlib_font()
    fig, ax = plt.subplots(figsize=(3, 1))
    ax.set_title(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # drawn already, as a figure is after tight_layout: matplotlib keeps the
        # canvas's renderer and its text measures, and warns no more
        fig.canvas.draw()
    with pytest.raises(ValueError, match=f"'{THAI}'.*{text.replace('$', '.')}"):
        i18n.check_glyphs(fig)


def test_the_glyph_check_hears_mathtext_with_logging_turned_off(monkeypatch):
    """A process that turned logging off (``logging.disable``, a quiet level for
    matplotlib) still gets the check; its logging is as it was afterwards."""
    import logging

    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    i18n.use_cjk_matplotlib_font()
    logger = logging.getLogger("matplotlib.mathtext")
    monkeypatch.setattr(logger, "level", logging.ERROR)
    logging.disable(logging.WARNING)
    try:
        with pytest.raises(ValueError, match=f"'{THAI}'"):
            i18n.check_glyphs(_figure(f"价值网络 $V$ {THAI}"))
        assert logging.root.manager.disable == logging.WARNING
        assert logger.level == logging.ERROR
    finally:
        logging.disable(logging.NOTSET)


def test_the_glyph_check_passes_chinese_and_returns_the_figure(monkeypatch):
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    i18n.use_cjk_matplotlib_font()
    fig = _figure("参考模型 $\\pi_{ref}$：裁剪 ε = 0.2")
    assert i18n.check_glyphs(fig) is fig


def test_the_glyph_check_names_a_bad_argument():
    with pytest.raises(TypeError, match="fig must be a matplotlib Figure"):
        i18n.check_glyphs(plt.gca())


def test_the_glyph_check_fails_chinese_without_the_cjk_font(monkeypatch):
    # matplotlib's default fonts, whatever an earlier test or the OS registered
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    rcParams["font.sans-serif"] = matplotlib.rcParamsDefault["font.sans-serif"]
    rcParams["font.family"] = matplotlib.rcParamsDefault["font.family"]
    font_manager.fontManager._findfont_cached.cache_clear()
    with pytest.raises(ValueError, match="'价'"):
        i18n.check_glyphs(_figure("价值网络"))


def _calls(tree: ast.AST, name: str) -> int:
    return sum(
        isinstance(n, ast.Call) and getattr(n.func, "id", None) == name
        for n in ast.walk(tree)
    )


def test_every_module_that_draws_in_chinese_checks_its_glyphs():
    users = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if path.name != "i18n.py" and _calls(tree, "use_cjk_matplotlib_font"):
            users[path.relative_to(PACKAGE).as_posix()] = _calls(tree, "check_glyphs")
    assert set(users) == {
        "lab/figures.py",
        "interactive/diagrams.py",
        "chapters/papers.py",
        "chapters/pipeline.py",
    }
    assert all(users.values()), users
