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
:func:`N_` where they are written and translated with :func:`tr` where they are shown;
:func:`translate` does what :func:`tr` does for a language its caller names (the book's
build, writing a page of the Chinese edition).

:func:`plotly_font` and :func:`use_cjk_matplotlib_font` give figures a font with Chinese
glyphs when the language is ``"zh"`` (matplotlib's: Noto Sans CJK SC from the mplfonts
package, the ``zh`` extra); :func:`check_glyphs` fails a matplotlib figure that would
draw a character as a box; :func:`pad` lines up text tables whose cells hold Chinese
(two columns a character). :func:`large_count` writes a large count in the reader's
units (English millions, Chinese 万).
"""

from __future__ import annotations

import functools
import json
import logging
import math
import numbers
import os
import re
import unicodedata
import warnings
from decimal import Decimal
from importlib import resources
from pathlib import Path

__all__ = [
    "CJK_FONT_FAMILY",
    "LANGUAGES",
    "LANG_ENV",
    "MISSES_ENV",
    "N_",
    "catalog",
    "check_glyphs",
    "cjk_font_file",
    "display_width",
    "language",
    "large_count",
    "needs_translation",
    "pad",
    "plotly_font",
    "tr",
    "translate",
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
#: The CJK font of matplotlib figures: a file of the mplfonts package (PyPI), installed
#: with the book's ``zh`` extra, so that every machine has it (Colab included).
CJK_FONT_PACKAGE = "mplfonts"
CJK_FONT_RESOURCE = ("fonts", "NotoSansCJKsc-Regular.otf")
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
    return translate(text, language(), **fields)


def translate(text: str, lang: str, /, **fields) -> str:
    """:func:`tr` into ``lang`` (one of :data:`LANGUAGES`) whatever the environment
    says: for code that writes another language than its own process speaks (the
    book's build writes each edition's pages in that edition's language)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {', '.join(LANGUAGES)}, got {lang!r}")
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


def large_count(n, digits: int = 1, lang: str | None = None) -> str:
    """The count ``n`` in the reader's units for large numbers (``lang``, default
    :func:`language`): English in millions, or billions from 1,000 million, with
    ``digits`` decimals (``"16.8 million"``, ``"7.0 billion"``); Chinese in 万, or 亿
    from 1 亿, at the English value's precision (``"1,680 万"``, ``"70 亿"``). The
    Chinese is the English rounded value, written in other units: both editions say the
    same number."""
    if isinstance(n, bool) or not isinstance(n, numbers.Real):
        raise TypeError(f"n must be a real number, got {type(n).__name__}")
    if not math.isfinite(n) or n < 0:
        raise ValueError(f"n must be a finite count >= 0, got {n!r}")
    if isinstance(digits, bool) or not isinstance(digits, int) or digits < 0:
        raise ValueError(f"digits must be an int >= 0, got {digits!r}")
    lang = language() if lang is None else lang
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {', '.join(LANGUAGES)}, got {lang!r}")
    # the English value as printed (str.format's rounding), then the count it stands for
    power, word = 6, "million"
    if float(f"{n / 10**power:.{digits}f}") >= 1000:
        power, word = 9, "billion"
    shown = f"{n / 10**power:,.{digits}f}"
    if lang == "en":
        return f"{shown} {word}"
    count = Decimal(shown.replace(",", "")).scaleb(power)
    zh_power, unit = (8, "亿") if count >= 10**8 else (4, "万")
    decimals = max(0, zh_power - (power - digits))
    return f"{count.scaleb(-zh_power):,.{decimals}f} {unit}"


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


def cjk_font_file() -> str:
    """The path of the CJK font of matplotlib figures, Noto Sans CJK SC, inside the
    mplfonts package (never a font of the OS). Raises ImportError, saying what to
    install, when the package or its font is missing."""
    hint = (
        f"the Chinese edition's figures need the {CJK_FONT_PACKAGE} package (its font "
        f"Noto Sans CJK SC): pip install {CJK_FONT_PACKAGE}, or pip install "
        '"dpo-grpo[zh]"'
    )
    try:
        path = resources.files(CJK_FONT_PACKAGE).joinpath(*CJK_FONT_RESOURCE)
    except ImportError as err:
        raise ImportError(hint) from err
    if not path.is_file():
        raise ImportError(f"{hint} ({'/'.join(CJK_FONT_RESOURCE)} is missing)")
    return str(path)


def use_cjk_matplotlib_font() -> str | None:
    """In Chinese, register the CJK font (:func:`cjk_font_file`) with matplotlib and put
    its family first in ``font.sans-serif``; returns the family name (``None`` in
    English). Raises ImportError when the mplfonts package is missing."""
    if language() != "zh":
        return None
    from matplotlib import font_manager, rcParams

    path = cjk_font_file()
    if not any(f.fname == path for f in font_manager.fontManager.ttflist):
        font_manager.fontManager.addfont(path)
    family = font_manager.FontProperties(fname=path).get_name()
    if rcParams["font.sans-serif"][:1] != [family]:
        rcParams["font.sans-serif"] = [
            family,
            *(f for f in rcParams["font.sans-serif"] if f != family),
        ]
    return family


#: matplotlib's word for a character it draws as a box: a warning for text, a log line
#: (logger ``matplotlib.mathtext``) for text with ``$math$``
_MISSING_GLYPH = re.compile(r"Glyph (\d+) \(.*\) missing from font\(s\) (.*)\.$")
_MATHTEXT_MISSING = "does not have a glyph"


class _MissingGlyphs(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.found: list[tuple[str, str]] = []  # (character, fonts)

    def emit(self, record):
        if _MATHTEXT_MISSING in str(record.msg) and len(record.args or ()) == 3:
            font, _, codepoint = record.args
            self.found.append((chr(codepoint), f"mathtext's {font!r} font"))


def check_glyphs(fig):
    """Draw the matplotlib figure ``fig`` (on a new Agg renderer, discarded) and return
    it; raise ValueError, naming the character and the text it is in, if a character
    would be drawn as a box (matplotlib's "Glyph … missing from font(s)" warning, or
    mathtext's "does not have a glyph")."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.figure import Figure
    from matplotlib.mathtext import MathTextParser
    from matplotlib.text import Text

    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    # matplotlib warns when it measures a text, and keeps the measures per renderer;
    # mathtext logs when it parses, and caches its parses
    getattr(MathTextParser._parse_cached, "cache_clear", lambda: None)()
    width, height = (max(1, round(x)) for x in fig.bbox.size)
    mathtext, found = logging.getLogger("matplotlib.mathtext"), _MissingGlyphs()
    # the log line is the only sign of a missing math glyph: heard even where logging
    # was turned down (logging.disable, a quieter level), and only while drawing
    disabled, level = logging.root.manager.disable, mathtext.level
    logging.disable(logging.NOTSET)
    mathtext.setLevel(logging.WARNING)
    mathtext.addHandler(found)
    try:
        with warnings.catch_warnings(record=True) as caught:
            # also when given before (the figure may have been drawn already)
            warnings.filterwarnings("always", message=_MISSING_GLYPH.pattern)
            fig.draw(RendererAgg(width, height, fig.dpi))
    finally:
        mathtext.removeHandler(found)
        mathtext.setLevel(level)
        logging.disable(disabled)
    for w in caught:
        match = _MISSING_GLYPH.match(str(w.message))
        if match:
            found.found.append((chr(int(match[1])), match[2]))
        else:  # not ours: given as it would have been
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if not found.found:
        return fig
    char, fonts = found.found[0]
    texts = [t.get_text() for t in fig.findobj(Text) if char in t.get_text()]
    if fonts.startswith("mathtext"):  # a text with $math$ first
        texts.sort(key=lambda t: "$" not in t)
    where = f"the text {texts[0]!r}" if texts else "the figure"
    raise ValueError(
        f"{char!r} (U+{ord(char):04X}) in {where} would be drawn as a box: no glyph "
        f"in {fonts}"
    )
