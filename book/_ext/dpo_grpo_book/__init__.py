"""Build-time glue for the book's HTML: a Sphinx extension plus a myst-nb MIME renderer
for plotly figures.

Build tooling, not part of the student package: it lives in ``book/_ext/`` as its own
small distribution (``dpo-grpo-book``, installed by the Makefile), loaded only by the
book build (``_config.yml``: ``sphinx.extra_extensions: [dpo_grpo_book]``; the MIME
renderer is registered as the ``myst_nb.mime_renderers`` entry point in
``book/_ext/pyproject.toml``). It imports :mod:`dpo_grpo`; the package never imports it.

What it does, so that the built site works with no network at read time (opened from
disk or a local server):

1. **Vendored JavaScript.** At ``builder-inited`` it copies into
   ``_build/html/_static/vendor/``: ``plotly/plotly.min.js`` from the installed
   ``plotly`` package, and from ``node_modules/`` (installed by ``npm ci`` from the
   repository's ``package.json`` / ``package-lock.json``; ``make book`` runs it) MathJax
   3 (``mathjax/``), RequireJS (``requirejs/require.js``) and the Jupyter widgets HTML
   manager (``html-manager/embed-amd.js`` and its fonts). ``_config.yml`` points
   ``mathjax_path`` and ``nb_ipywidgets_js`` at these files; the build fails if one of
   them is a remote URL or missing. (Nothing is put in a source ``_static/`` folder:
   Jupyter Book 1 would add every ``*.js`` found there to every page.)
2. **Plotly without plotly.js in every page.** :class:`PlotlyMimeRenderer` renders each
   ``application/vnd.plotly.v1+json`` output as a ``<div>`` plus a ``Plotly.newPlot``
   call (no plotly.js inside, no MathJax CDN tag, a deterministic div id) and registers
   ``_static/vendor/plotly/plotly.min.js`` once on that page only. Kernels therefore
   only need to emit the plotly mimetype (``PLOTLY_RENDERER=plotly_mimetype``, the
   Makefile's setting); Jupyter and Colab keep their own renderers.
3. **Duplicate inline scripts.** Sphinx 7.4 writes an inline ``<script>`` twice when an
   extension adds it after the builder is initialised (the builder stores it with
   filename ``None``, ``prepare_writing`` re-adds it from the registry with filename
   ``''``, and the two do not compare equal). sphinx-thebe adds
   ``const THEBE_JS_URL = ...`` that way on every page (whatever
   ``launch_buttons.thebe`` says), so every page logged
   ``Identifier 'THEBE_JS_URL' has already been declared``. An ``html-page-context``
   handler drops the exact duplicates. (The other stock console error,
   ``Got invalid theme mode``, is fixed in ``_config.yml`` by
   ``html_theme_options.default_mode``.)
4. **Launch buttons open the reader edition.** sphinx-book-theme points its Colab and
   Binder buttons at the page's source notebook on ``repository.branch``: MyST that
   Colab shows as raw text. An ``html-page-context`` handler (after the theme's) points
   them at the reader edition on the ``notebooks`` branch that the Pages workflow
   publishes (``scripts/reader_edition.py``): ``.../blob/notebooks/<name>.ipynb`` for
   Colab, ``.../v2/gh/OWNER/REPO/notebooks?urlpath=lab/tree/<name>.ipynb`` for Binder
   (JupyterLab). The Chinese edition sets ``book_reader_prefix: zh/``
   (``.../blob/notebooks/zh/<name>.ipynb``).
5. **Language switch.** ``book_language_switch: {label: 中文, root: zh/}`` puts a header
   link to the same page in the other edition (the Chinese site is built into
   ``_build/html/zh/``; ``scripts/zh_edition.py``).
6. **A CJK web font.** ``book_cjk_web_font: true`` (``_config.yml``; the Chinese
   edition's copy of it, ``scripts/zh_edition.py``, keeps it) serves Noto Sans CJK SC,
   the
   font the matplotlib figures use (:func:`dpo_grpo.i18n.cjk_font_file`, from the
   mplfonts package), cut down to the characters the site's pages hold: when the pages
   are written, :func:`write_cjk_subset` collects every CJK character of them (figure
   text included) and writes one WOFF2 file with only those glyphs (about 300 KB for
   1,100 characters of the Chinese site; a few KB for the English site's 中文
   switch; against several MB for the whole font), declared as
   ``Noto Sans SC`` with exactly their ``unicode-range`` and ``font-display: swap`` (the
   text is drawn at once, in the fallback font, until it loads). A style sheet puts it
   after the Latin system fonts for the text and headings. The plotly figures name it
   first (``dpo_grpo.i18n.CJK_FONT_FAMILY``), so the pages and the figures draw Chinese
   with the same served font whatever fonts the reader's system has; bold is
   synthesised by the browser.
7. **Answers on the page, no kernel.** A page with numeric or multiple-choice exercises
   embeds their entries of the hashed self-check key (hints and messages in the page's
   language) and loads ``static/exercises.js``, which answers them under their answer
   cells with the verdict and the words of ``dpo_grpo.exercises.check``
   (:mod:`dpo_grpo_book.exercises`).
8. **The theme's words in the page's language.** In a build in another language (the
   Chinese edition, ``language: zh_CN``), the theme's labels, tooltips and footer come
   from the book's catalogs (``i18n/zh/theme/``), looked in before the theme's own
   (:mod:`dpo_grpo_book.theme_i18n`). An English build is left as it is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from dpo_grpo.interactive.explorable import PLOTLY_CONFIG, plotly_fragment  # noqa: F401 (re-exported for tests)

from . import exercises, theme_i18n

EXTENSION = "dpo_grpo_book"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
VENDOR = "vendor"  # below _static/ in the output
PLOTLY_JS = f"{VENDOR}/plotly/plotly.min.js"
#: plotly.js with only the cartesian trace types (scatter, bar, heatmap, ...: every
#: figure of the book), from npm at the version plotly.py bundles: 1.5 MB against the
#: full bundle's 4.8 MB. book.js loads it after the text is drawn.
PLOTLY_PACKAGE = "plotly.js-cartesian-dist-min"
PLOTLY_BUNDLE = "plotly-cartesian.min.js"
#: The book's own style sheet and script (``static/``), on every page.
STATIC = Path(__file__).resolve().parent / "static"
BOOK_CSS, BOOK_JS = "book.css", "book.js"
#: pydata-sphinx-theme's script that swaps icons for SVG (1.5 MB): its style sheet
#: already draws the same icons from Font Awesome's web fonts, so the script is dropped
#: from every page (:func:`drop_icon_script`).
ICON_SCRIPT = "_static/scripts/fontawesome.js"
#: The header's download button serves the reader edition of the page's notebook
#: (numbers filled in, no MyST: ``scripts/reader_edition.py``), which
#: ``scripts/build_book.py`` writes into this folder of the site.
READER_FOLDER = "_notebooks"
DOWNLOAD_NOTEBOOK = {"en": "Download the notebook", "zh": "下载笔记本"}

#: (package folder in node_modules, files or folders to copy, destination below
#: _static/vendor/)
NODE_ASSETS = (
    (
        "mathjax",
        (
            "es5/tex-mml-chtml.js",
            "es5/input",
            "es5/output/chtml",
            "es5/output/chtml.js",
            "es5/ui",
            "es5/a11y",
            "es5/adaptors",
            "LICENSE",
        ),
        "mathjax",
    ),
    (
        "requirejs",
        ("require.js",),
        "requirejs",
    ),  # its MIT licence is in the file header
    # fonts: woff2/woff only (what every current browser picks first from the manager's
    # @font-face rules)
    (
        "@jupyter-widgets/html-manager",
        (
            "dist/embed-amd.js",
            "dist/*.woff2",
            "dist/*.woff",
            "dist/embed.js.LICENSE.txt",
        ),
        "html-manager",
    ),
)

#: The site's CJK web font (``book_cjk_web_font``): its family name, file and style
#: sheet below _static/
CJK_WEB_FAMILY = "Noto Sans SC"
CJK_FONT_DIR = f"{VENDOR}/cjk"
CJK_FONT_FILE = f"{CJK_FONT_DIR}/book-cjk.woff2"
CJK_FONT_SHEET = f"{CJK_FONT_DIR}/book-cjk.css"
#: The characters the subset keeps: Han, CJK punctuation and full-width forms (Latin
#: text keeps the system's fonts).
CJK_CHARACTERS = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")
#: The served CJK font first: its unicode-range holds only the site's CJK characters, so
#: Latin text still takes the system's fonts after it. (After them, Chromium on Linux
#: draws a CJK character in Arial's stand-in, Liberation Sans, as a box.) Text,
#: headings, code and widget labels.
CJK_FONT_STACK = (
    '"Noto Sans SC", -apple-system, BlinkMacSystemFont, "Segoe UI", "Helvetica Neue", '
    "Arial, sans-serif"
)
CJK_MONO_STACK = (
    '"Noto Sans SC", ui-monospace, "Cascadia Code", "Source Code Pro", Menlo, '
    'Consolas, "DejaVu Sans Mono", monospace'
)
CJK_FONT_CSS = (
    ":root {\n"
    f"  --pst-font-family-base: {CJK_FONT_STACK};\n"
    f"  --pst-font-family-heading: {CJK_FONT_STACK};\n"
    f"  --pst-font-family-monospace: {CJK_MONO_STACK};\n"
    f"  --jp-widgets-font-family: {CJK_FONT_STACK};\n"
    "}\n"
)


# --------------------------------------------------------------------------------------
# Plotly figure -> HTML fragment (also used by the tests to measure page sizes)
# --------------------------------------------------------------------------------------


class PlotlyMimeRenderer:
    """myst-nb MIME renderer plugin: plotly figures in HTML builds of this book (see the
    module docstring)."""

    mime_priority_overrides = [
        (name, PLOTLY_MIME, 5) for name in ("html", "dirhtml", "singlehtml")
    ]

    @staticmethod
    def handle_mime(renderer, data, inline):
        if data.mime_type != PLOTLY_MIME:
            return None
        env = renderer.renderer.sphinx_env
        app = (
            None
            if env is None
            else (getattr(env, "_app", None) or getattr(env, "app", None))
        )
        if (
            app is None
            or EXTENSION not in app.extensions
            or getattr(app.builder, "format", None) != "html"
        ):
            return None  # another project, or not HTML: leave it to myst-nb
        from docutils import nodes

        content = (
            data.content if isinstance(data.content, dict) else json.loads(data.string)
        )
        slug = "".join(ch if ch.isalnum() else "-" for ch in env.docname)
        div_id = f"plotly-{slug}-{data.cell_index}-{data.output_index}"
        html = plotly_fragment(content, div_id=div_id)
        return [
            nodes.raw(
                text=html,
                format="html",
                classes=["output", "text_html", "plotly-figure"],
            )
        ]


# --------------------------------------------------------------------------------------
# Sphinx extension
# --------------------------------------------------------------------------------------


def _copy(src: Path, dst: Path) -> None:
    """Copy a file or a folder, skipping files whose size and mtime already match."""
    if src.is_dir():
        for path in src.rglob("*"):
            if path.is_file() and path.suffix != ".map":
                _copy(path, dst / path.relative_to(src))
        return
    if (
        dst.exists()
        and dst.stat().st_size == src.stat().st_size
        and int(dst.stat().st_mtime) == int(src.stat().st_mtime)
    ):
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)


def vendor_assets(outdir, node_modules) -> Path:
    """Copy every vendored file into ``outdir/_static/vendor``; return that folder."""
    from sphinx.errors import ExtensionError

    import plotly
    import plotly.offline

    target = Path(outdir) / "_static" / VENDOR
    node_modules = Path(node_modules)
    bundle = node_modules / PLOTLY_PACKAGE
    want = plotly.offline.get_plotlyjs_version()
    try:
        got = json.loads((bundle / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        got = None
    if got != want:
        raise ExtensionError(
            f"{bundle}: plotly.js {got or 'is missing'}, but plotly "
            f"{plotly.__version__} writes figures for plotly.js {want}. Pin "
            f"{PLOTLY_PACKAGE}@{want} in "
            "package.json and run `npm install` (then `npm ci`; `make book` does it)."
        )
    _copy(bundle / PLOTLY_BUNDLE, target / "plotly" / "plotly.min.js")
    _copy(bundle / "LICENSE", target / "plotly" / "LICENSE")
    for package, members, dest in NODE_ASSETS:
        root = node_modules / package
        if not root.is_dir():
            raise ExtensionError(
                f"{root} is missing: the book serves its JavaScript locally. Run `npm "
                "ci` in the repository root (`make book` does it) to install "
                "package-lock.json's packages."
            )
        for member in members:
            matches = sorted(root.glob(member)) if "*" in member else [root / member]
            for src in matches:
                if not src.exists():
                    raise ExtensionError(
                        f"{src} is missing from node_modules (re-run `npm ci`)"
                    )
                rel = src.relative_to(root)
                rel = (
                    Path(*rel.parts[1:])
                    if rel.parts[0] in ("es5", "dist") and len(rel.parts) > 1
                    else rel
                )
                _copy(src, target / dest / rel)
    return target


def unicode_ranges(codepoints) -> str:
    """CSS ``unicode-range`` of a set of code points: ``U+4E00-4E02, U+4E8C``."""
    points, ranges = sorted(set(codepoints)), []
    for cp in points:
        if ranges and cp == ranges[-1][1] + 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return ", ".join(f"U+{a:X}" if a == b else f"U+{a:X}-{b:X}" for a, b in ranges)


def site_cjk_characters(outdir) -> set[str]:
    """Every CJK character (:data:`CJK_CHARACTERS`) of the site's pages and of its
    translated theme strings."""
    found = set()
    outdir = Path(outdir)
    # another edition built inside this one (the Chinese site in zh/) is not this site
    nested = {d.parent for d in outdir.glob("*/**/_static") if d.is_dir()}
    pages = [
        p for p in outdir.rglob("*.html") if not any(n in p.parents for n in nested)
    ]
    for path in [*pages, outdir / "_static" / "translations.js"]:
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            # JSON in the page (widget state) may spell a character as \uXXXX
            text += "".join(
                chr(int(h, 16)) for h in re.findall(r"\\u([0-9a-fA-F]{4})", text)
            )
            found |= set(CJK_CHARACTERS.findall(text))
    return found


def write_cjk_subset(outdir) -> tuple[int, int]:
    """Write :data:`CJK_FONT_FILE` (the CJK font cut down to the site's characters) and
    its style sheet :data:`CJK_FONT_SHEET`; return (characters, bytes of the font)."""
    from fontTools import subset

    from dpo_grpo.i18n import cjk_font_file

    characters = site_cjk_characters(outdir)
    options = subset.Options()
    options.flavor = "woff2"
    options.hinting = False
    options.layout_features = ["*"]
    font = subset.load_font(cjk_font_file(), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(c) for c in characters])
    subsetter.subset(font)
    target = Path(outdir) / "_static" / CJK_FONT_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    subset.save_font(font, str(target), options)
    face = (
        "@font-face {\n"
        f'  font-family: "{CJK_WEB_FAMILY}";\n'
        "  font-style: normal;\n"
        "  font-weight: 400;\n"
        "  font-display: swap;\n"
        f'  src: url("{Path(CJK_FONT_FILE).name}") format("woff2");\n'
        f"  unicode-range: {unicode_ranges(ord(c) for c in characters) or 'U+4E00'};\n"
        "}\n"
    )
    (Path(outdir) / "_static" / CJK_FONT_SHEET).write_text(
        face + CJK_FONT_CSS, encoding="utf-8"
    )
    return len(characters), target.stat().st_size


#: Font Awesome's web fonts, as pydata-sphinx-theme's style sheet loads them (below
#: _static/); :func:`subset_icon_fonts` cuts them down to the icons the site shows.
ICON_FONTS = tuple(
    f"vendor/fontawesome/webfonts/fa-{name}.woff2"
    for name in ("solid-900", "regular-400", "brands-400")
)
_ICON_RULE = re.compile(r"([^{}]*)\{([^{}]*)\}")
_ICON_CLASS_SELECTOR = re.compile(r"(?:\s*\.(fa-[a-z0-9-]+):before\s*,?)+")
_ICON_CONTENT = re.compile(r'content:\s*"\\([0-9a-fA-F]{2,5})\s*"')
_PRIVATE_USE = re.compile(r"[\ue000-\uf8ff]")
_ICON_NAME = re.compile(r"\bfa-[a-z0-9-]+")


def icon_codepoints(outdir) -> set[int]:
    """The icon code points the site can show: those of every ``fa-*`` class named in
    its pages and scripts (mapped through the ``.fa-NAME:before`` rules of its style
    sheets), and every icon the style sheets draw themselves (admonitions, links,
    toggles)."""
    outdir = Path(outdir)
    by_class, always = {}, set()
    for sheet in (outdir / "_static").rglob("*.css"):
        for selector, body in _ICON_RULE.findall(sheet.read_text(encoding="utf-8")):
            content = _ICON_CONTENT.search(body)
            if _ICON_CLASS_SELECTOR.fullmatch(selector):
                if content:
                    for name in re.findall(r"\.(fa-[a-z0-9-]+):before", selector):
                        by_class[name] = int(content.group(1), 16)
                continue
            if content:
                always.add(int(content.group(1), 16))
            always |= {ord(c) for c in _PRIVATE_USE.findall(body)}
    named = set()
    # the themes' scripts; not the icon script (never loaded: drop_icon_script) nor the
    # vendored libraries (the widget manager bundles Font Awesome 4's names and font)
    scripts = [
        js
        for js in (outdir / "_static").rglob("*.js")
        if js != outdir / ICON_SCRIPT and VENDOR not in js.relative_to(outdir).parts
    ]
    for path in [*outdir.rglob("*.html"), *scripts]:
        text = path.read_text(encoding="utf-8", errors="replace")
        named |= set(_ICON_NAME.findall(text))
    return always | {by_class[n] for n in named if n in by_class}


def subset_icon_fonts(outdir) -> int:
    """Cut Font Awesome's web fonts (:data:`ICON_FONTS`, 300 KB on every page) down to
    :func:`icon_codepoints`, in place; return their new total size in bytes."""
    from fontTools import subset

    codepoints, total = icon_codepoints(outdir), 0
    options = subset.Options()
    options.flavor = "woff2"
    for name in ICON_FONTS:
        path = Path(outdir) / "_static" / name
        if not path.is_file():
            continue
        font = subset.load_font(str(path), options)
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=sorted(codepoints))
        subsetter.subset(font)
        subset.save_font(font, str(path), options)
        total += path.stat().st_size
    return total


def _check_local(app, url, what):
    from sphinx.errors import ExtensionError

    if "://" in url or url.startswith("//"):
        raise ExtensionError(
            f"{what} = {url!r} loads from the network; the book must work offline. "
            f"Point it at a file below _static/{VENDOR}/ (see {EXTENSION})."
        )
    if not (Path(app.outdir) / "_static" / url).is_file():
        raise ExtensionError(
            f"{what} = {url!r}: _static/{url} does not exist after vendoring"
        )


def _check_mime_renderer():
    """The plotly renderer is found through its entry point; without it myst-nb would
    drop every figure (the book silences ``mystnb.unknown_mime_type``), so fail loudly
    instead."""
    from importlib.metadata import entry_points

    from sphinx.errors import ExtensionError

    values = [ep.value for ep in entry_points(group="myst_nb.mime_renderers")]
    if f"{__name__}:PlotlyMimeRenderer" not in values:
        raise ExtensionError(
            "the dpo_grpo plotly MIME renderer is not registered: reinstall the "
            "package (`pip install --no-deps -e .`; `make book` does it when "
            "pyproject.toml changes)"
        )


def _on_builder_inited(app):
    if getattr(app.builder, "format", None) != "html":
        return
    _check_mime_renderer()
    node_modules = app.config.book_assets_node_modules or os.path.join(
        app.confdir, "node_modules"
    )
    vendor_assets(app.outdir, node_modules)
    if app.config.book_cjk_web_font:
        # written when the pages are (write_cjk_subset); declared on every page now
        app.add_css_file(CJK_FONT_SHEET)
    _check_local(app, app.config.mathjax_path, "mathjax_path")
    for url in getattr(app.config, "nb_ipywidgets_js", {}) or {}:
        _check_local(app, url, "nb_ipywidgets_js")


def _script_key(js):
    attrs = getattr(js, "attributes", {}) or {}
    return (
        getattr(js, "filename", js) or "",
        getattr(js, "priority", None),
        tuple(sorted(attrs.items())),
    )


#: The tag that tells book.js a page embeds widget state, and where third-party widget
#: modules would be looked up (the manager's ``data-jupyter-widgets-cdn``).
WIDGETS_META = '<meta name="book-widgets" content="{cdn}">'


def page_scripts(app, pagename, templatename, context, doctree):
    """Per page, after every other extension: the widget manager (RequireJS and
    ``embed-amd.js``, 3.6 MB) leaves the page's scripts and book.js loads it when a
    widget nears the screen (a ``<meta name="book-widgets">`` marks the page); then
    duplicate scripts are dropped."""
    import html

    files = context.get("script_files")
    if not isinstance(files, list):
        return
    widget_files = set(getattr(app.config, "nb_ipywidgets_js", {}) or {})
    widgets = [
        js
        for js in files
        if any((getattr(js, "filename", None) or "").endswith(f) for f in widget_files)
    ]
    if widgets:
        attributes = {}
        for js in widgets:
            attributes.update(getattr(js, "attributes", {}) or {})
        files[:] = [js for js in files if js not in widgets]
        cdn = attributes.get("data-jupyter-widgets-cdn", "")
        context["metatags"] = context.get("metatags", "") + WIDGETS_META.format(
            cdn=html.escape(cdn, quote=True)
        )
    dedupe_scripts(files)


def dedupe_scripts(files):
    """Drop exact duplicate ``<script>`` entries in place (Sphinx 7.4 writes late inline
    scripts twice; see above)."""
    seen, unique = set(), []
    for js in files:
        key = _script_key(js)
        if key not in seen:
            seen.add(key)
            unique.append(js)
    files[:] = unique


READER_BRANCH = "notebooks"


def reader_launch_buttons(
    header_buttons, pagename: str, repository_url: str, prefix: str = ""
) -> int:
    """Point the Colab/Binder launch buttons of ``pagename`` at its reader notebook
    (``prefix``: the folder of the edition on the reader branch, ``"zh/"`` for the
    Chinese one); return how many changed."""
    import re

    m = re.match(
        r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?$", repository_url or ""
    )
    if not m:
        return 0
    owner_repo, name, changed = (
        f"{m.group(1)}/{m.group(2)}",
        pagename.rsplit("/", 1)[-1],
        0,
    )
    for group in header_buttons or []:
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            url = button.get("url", "")
            if "/github/" in url and "colab" in url:
                base = url.split("/github/", 1)[0]
                button["url"] = (
                    f"{base}/github/{owner_repo}/blob/{READER_BRANCH}/{prefix}{name}.ipynb"
                )
                changed += 1
            elif "/v2/gh/" in url:
                base = url.split("/v2/gh/", 1)[0]
                button["url"] = (
                    f"{base}/v2/gh/{owner_repo}/{READER_BRANCH}?urlpath=lab/tree/{prefix}{name}.ipynb"
                )
                changed += 1
    return changed


def _launch_buttons(app, pagename, templatename, context, doctree):
    repository_url = (app.config.html_theme_options or {}).get("repository_url", "")
    reader_launch_buttons(
        context.get("header_buttons"),
        pagename,
        repository_url,
        app.config.book_reader_prefix,
    )


def language_switch_url(pagename: str, root: str) -> str:
    """The same page in the other edition: ``root`` is that edition's site root seen
    from this one's (``"zh/"`` from the English site, ``"../"`` from the Chinese one,
    which is built into ``_build/html/zh/``)."""
    return "../" * pagename.count("/") + root + pagename + ".html"


def language_switch(header_buttons, pagename: str, switch: dict) -> bool:
    """Put a link to ``pagename`` in the other edition first among the header buttons;
    False if none is set."""
    if not switch or header_buttons is None:
        return False
    header_buttons.insert(
        0,
        {
            "type": "link",
            "url": language_switch_url(pagename, switch["root"]),
            "tooltip": switch["label"],
            "text": switch["label"],
            "icon": "fas fa-language",
            "label": "language-switch",
        },
    )
    return True


def _language_switch(app, pagename, templatename, context, doctree):
    language_switch(
        context.get("header_buttons"), pagename, app.config.book_language_switch
    )


def reader_download(header_buttons, url: str, text: str) -> bool:
    """Point the header's ``.ipynb`` download at ``url`` (the page's reader notebook);
    False if the page has none (a Markdown page)."""
    for group in header_buttons or []:
        if group.get("label") != "download-buttons":
            continue
        for button in group.get("buttons", []):
            if button.get("label") == "download-source-button" and str(
                button.get("url", "")
            ).endswith(".ipynb"):
                button["url"], button["tooltip"] = url, text
                return True
    return False


def _reader_download(app, pagename, templatename, context, doctree):
    name = pagename.rsplit("/", 1)[-1]
    language = "zh" if str(app.config.language or "").startswith("zh") else "en"
    reader_download(
        context.get("header_buttons"),
        context["pathto"](f"{READER_FOLDER}/{name}.ipynb", 1),
        DOWNLOAD_NOTEBOOK[language],
    )


def _configure(app, config):
    """Before the theme reads them: no pydata navbar (sphinx-book-theme draws its own
    article header; the navbar's hidden copy of the sidebar toggle is the one
    pydata-sphinx-theme 0.17 binds, leaving the visible one dead on phones), and the
    book's style sheet and script."""
    options = config.html_theme_options
    for key in ("navbar_start", "navbar_center", "navbar_end", "navbar_persistent"):
        options[key] = []
    config.html_static_path = [*config.html_static_path, str(STATIC)]
    # without an icon every browser asks for /favicon.ico, a 404 in the console
    if not config.html_favicon:
        config.html_favicon = str(STATIC / "favicon.svg")


def drop_icon_script(html: str) -> str:
    """``html`` without the ``<script>`` that loads :data:`ICON_SCRIPT`."""
    import re

    return re.sub(
        r'[ \t]*<script[^>]*src="[^"]*' + re.escape(ICON_SCRIPT) + r'[^"]*"[^>]*>'
        r"</script>\n?",
        "",
        html,
    )


def lazy_images(html: str) -> str:
    """``html`` with every ``<img>`` that does not say how to load marked
    ``loading="lazy"``: a figure below the first screen is fetched as the reader
    scrolls towards it, not with the page."""
    import re

    return re.sub(r"<img(?![^>]*\bloading=)", '<img loading="lazy"', html)


def _finish_pages(app, exception):
    if exception is not None or getattr(app.builder, "format", None) != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        lean = lazy_images(drop_icon_script(text))
        if lean != text:
            page.write_text(lean, encoding="utf-8")
    from sphinx.util import logging

    size = subset_icon_fonts(app.outdir)
    logging.getLogger(__name__).info(f"icon fonts: {size / 1024:.0f} KB")
    if app.config.book_cjk_web_font:
        n, size = write_cjk_subset(app.outdir)
        logging.getLogger(__name__).info(
            f"CJK web font: {n} characters, {size / 1024:.0f} KB"
        )


#: Jupyter Book's own extensions that do not declare parallel reading safe, though they
#: are: multitoc numbering patches a method of Sphinx's toctree collector when the
#: builder starts (before the reading processes fork) and numbers sections in the main
#: process afterwards; the LaTeX extension acts only in LaTeX builds. Declared here so
#: that ``scripts/build_book.py`` can read (execute) the chapters in parallel.
PARALLEL_SAFE_UNDECLARED = ("sphinx_multitoc_numbering", "sphinx_jupyterbook_latex")


def _declare_parallel_safe(app):
    for name in PARALLEL_SAFE_UNDECLARED:
        extension = app.extensions.get(name)
        if extension is not None and extension.parallel_read_safe is None:
            extension.parallel_read_safe = True


def setup(app):
    app.add_config_value("book_assets_node_modules", "", "env", types=[str])
    # The Chinese edition (scripts/zh_edition.py): the header link to the other
    # edition's page, and the folder of this edition's notebooks on the reader branch
    # (the launch buttons)
    app.add_config_value("book_language_switch", {}, "html", types=[dict])
    app.add_config_value("book_reader_prefix", "", "html", types=[str])
    app.add_config_value("book_cjk_web_font", False, "html", types=[bool])
    app.connect("config-inited", _configure)
    app.connect("config-inited", theme_i18n.setup_language)
    app.connect("builder-inited", _declare_parallel_safe)
    app.connect("builder-inited", _on_builder_inited)
    app.connect("build-finished", _finish_pages)
    app.add_css_file(BOOK_CSS)
    app.add_js_file(BOOK_JS, defer="defer")
    app.connect("html-page-context", page_scripts, priority=900)
    # after sphinx-book-theme's (501)
    app.connect("html-page-context", _launch_buttons, priority=600)
    app.connect("html-page-context", _language_switch, priority=600)
    app.connect("html-page-context", _reader_download, priority=600)
    # before page_scripts (900), which drops duplicate scripts
    app.connect("html-page-context", exercises.embed_page_key, priority=600)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
