"""The package's user-facing text in the reader's language: English (the default) or
Chinese (中文版).

The language is the environment variable ``DPO_GRPO_LANG`` (``"en"`` or ``"zh"``), read
at each call, so a notebook's set-up cell can choose it before or after
``import dpo_grpo``. :func:`tr` returns the translation of an English figure title, axis
title, legend name, widget label or ``check`` message, filled with its computed numbers
by :meth:`str.format`: ``tr("clip ε = {eps:.2f}", eps=0.2)``. Without fields the text
comes back as it is, so a plotly hovertemplate's ``%{x}`` needs no escaping.

The Chinese catalog is ``data/i18n/zh.json`` (English text -> Chinese text), shipped in
the wheel. A string with no Chinese entry falls back to English rather than break a
reader's notebook; ``tests/package/test_i18n.py`` fails on such a string, and on catalog
entries that no code uses any more. A string that reaches ``tr`` at run time without an
entry (one a test cannot see: built from data, or passed by a notebook) is appended,
once per process, to the file the environment variable ``DPO_GRPO_I18N_MISSES`` names,
if it is set; the Chinese book build sets it and requires the file to stay empty. A
string with nothing to translate is no miss (:func:`needs_translation`: symbols such as
``β`` or ``G``, acronyms such as ``GRPO``, code names such as ``num_iterations``).
Strings defined before the language is known (module-level labels) are marked with
:func:`N_` where they are written and translated with :func:`tr` where they are shown.

:func:`plotly_font` and :func:`use_cjk_matplotlib_font` give figures a font with Chinese
glyphs when the language is ``"zh"``; :func:`pad` lines up text tables whose cells hold
Chinese (two columns a character).
"""

from __future__ import annotations

import functools
import json
import os
import re
import unicodedata
from pathlib import Path

__all__ = [
    "CJK_FONT_FAMILY",
    "LANGUAGES",
    "LANG_ENV",
    "MISSES_ENV",
    "N_",
    "catalog",
    "display_width",
    "language",
    "needs_translation",
    "pad",
    "plotly_font",
    "tr",
    "use_cjk_matplotlib_font",
]

#: The environment variable that chooses the language.
LANG_ENV = "DPO_GRPO_LANG"
#: The environment variable naming the file where untranslated strings are recorded (one
#: per line).
MISSES_ENV = "DPO_GRPO_I18N_MISSES"
#: The languages the package speaks.
LANGUAGES = ("en", "zh")
#: The font stack of Chinese figures: the web font the Chinese site serves (Noto Sans
#: SC), then the CJK fonts a reader's system has (Linux, Windows, macOS).
CJK_FONT_FAMILY = (
    "Noto Sans SC, Noto Sans CJK SC, Microsoft YaHei, PingFang SC, "
    "WenQuanYi Micro Hei, sans-serif"
)
#: The CJK font files matplotlib can read (Debian's fonts-noto-cjk, then other common
#: places); the first that exists is used.
CJK_FONT_FILES = (
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/google-noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/System/Library/Fonts/PingFang.ttc",
    "C:/Windows/Fonts/msyh.ttc",
)
_CATALOG_DIR = Path(__file__).resolve().parent / "data" / "i18n"
_ENGLISH_WORD = re.compile(r"[a-z]{3,}")
_IDENTIFIER = re.compile(r"[A-Za-z]\w*_\w*")
_HAN = re.compile(r"[\u4e00-\u9fff]")
#: the misses this process has recorded already
_RECORDED: set[str] = set()


def language() -> str:
    """The reader's language, ``"en"`` or ``"zh"``: the environment variable
    ``DPO_GRPO_LANG`` (default ``"en"``)."""
    value = os.environ.get(LANG_ENV, "").strip() or "en"
    if value not in LANGUAGES:
        raise ValueError(
            f"environment variable {LANG_ENV} must be one of {', '.join(LANGUAGES)}, "
            f"got {value!r}"
        )
    return value


@functools.lru_cache(maxsize=None)
def catalog(lang: str = "zh") -> dict[str, str]:
    """The translations into ``lang`` (English text -> translated text), read once from
    ``data/i18n/<lang>.json``."""
    if lang not in LANGUAGES or lang == "en":
        raise ValueError(
            f"lang must be a translated language ({', '.join(LANGUAGES[1:])}), got "
            f"{lang!r}"
        )
    with open(_CATALOG_DIR / f"{lang}.json", encoding="utf-8") as fh:
        return json.load(fh)


def needs_translation(text: str, /) -> bool:
    """Whether ``text`` has English to translate: a lowercase word of three letters or
    more, not one code name with an underscore (``num_iterations``), no Chinese yet (a
    text translated where it was built). Symbols (``β``, ``G``, ``lr``) and acronyms
    (``GRPO``) read the same in every language."""
    return (
        bool(_ENGLISH_WORD.search(text))
        and not _IDENTIFIER.fullmatch(text)
        and not _HAN.search(text)
    )


def N_(text: str, /) -> str:
    """Mark ``text`` for the catalog where it is defined and return it unchanged
    (gettext's convention); the code that shows it passes it through :func:`tr`."""
    return text


def tr(text: str, /, **fields) -> str:
    """``text`` (an English UI string) in the current language, then
    ``.format(**fields)`` when fields are given.

    A string the catalog lacks falls back to English (recorded as a miss when it
    :func:`needs_translation`); so does a translation whose fields do not format.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    lang = language()
    out = text if lang == "en" else catalog(lang).get(text, text)
    if lang != "en" and text not in catalog(lang) and needs_translation(text):
        _record_miss(text)
    if not fields:
        return out
    try:
        return out.format(**fields)
    except (KeyError, IndexError, ValueError):
        if out is text:
            raise
        return text.format(**fields)


def display_width(text: str) -> int:
    """The columns ``text`` takes in a monospaced font: two for a wide character (a
    Chinese one: East Asian width W or F), one for any other."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, width: int, align: str = "<") -> str:
    """``text`` padded with spaces to ``width`` columns of a monospaced font, aligned
    left (``"<"``), right (``">"``) or centred (``"^"``). ``f"{text:<10}"`` counts
    characters, so a Chinese header would sit off its column; this counts columns
    (:func:`display_width`). A text wider than ``width`` comes back as it is."""
    if isinstance(width, bool) or not isinstance(width, int) or width < 0:
        raise ValueError(f"width must be an int >= 0, got {width!r}")
    if align not in ("<", ">", "^"):
        raise ValueError(f"align must be '<', '>' or '^', got {align!r}")
    gap = max(0, width - display_width(text))
    left = {"<": 0, ">": gap, "^": gap // 2}[align]
    return " " * left + text + " " * (gap - left)


def _record_miss(text: str) -> None:
    """Append ``text`` to the file :data:`MISSES_ENV` names (once per process; line
    breaks written as ``\\n``)."""
    path = os.environ.get(MISSES_ENV, "").strip()
    if not path or text in _RECORDED:
        return
    _RECORDED.add(text)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text.replace("\\", "\\\\").replace("\n", "\\n") + "\n")


def plotly_font() -> dict:
    """The ``layout.font`` additions of a figure in the current language: a CJK font
    stack in Chinese, else none."""
    return {"family": CJK_FONT_FAMILY} if language() == "zh" else {}


def use_cjk_matplotlib_font() -> str | None:
    """In Chinese, register the first CJK font file found (:data:`CJK_FONT_FILES`) with
    matplotlib and put its family first in ``font.sans-serif``; returns the family name,
    or ``None`` in English or when no file exists (matplotlib then warns about missing
    glyphs)."""
    if language() != "zh":
        return None
    path = next((p for p in CJK_FONT_FILES if os.path.exists(p)), None)
    if path is None:
        return None
    from matplotlib import rcParams

    family = _register_font(path)
    if family not in rcParams["font.sans-serif"]:
        rcParams["font.sans-serif"] = [family, *rcParams["font.sans-serif"]]
    return family


@functools.lru_cache(maxsize=None)
def _register_font(path: str) -> str:
    from matplotlib import font_manager

    font_manager.fontManager.addfont(path)
    # a collection (.ttc) holds several faces: prefer the Simplified Chinese one
    names = [f.name for f in font_manager.fontManager.ttflist if f.fname == path]
    return next((n for n in names if n.endswith(" SC")), None) or (
        names[0] if names else font_manager.FontProperties(fname=path).get_name()
    )
