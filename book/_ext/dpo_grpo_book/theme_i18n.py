"""The theme's words in the language of the build (the Chinese edition; issue #45).

Sphinx, pydata-sphinx-theme and sphinx-book-theme mark their words as gettext
messages, and Sphinx translates them from message catalogs: its own and the themes'
(the ``sphinx`` domain), and sphinx-book-theme's (the ``booktheme`` domain). The
book's catalogs of both domains (``i18n/zh/theme/``) sit in the Chinese source's
``locale_dirs`` (``scripts/zh_edition.py``). For the ``sphinx`` domain Sphinx compiles
and loads them itself, before its own catalog. For ``booktheme`` the book does the same
here, when the configuration is read (:func:`setup_language`):

1. :func:`compile_catalogs` compiles the ``booktheme.po`` of ``locale_dirs`` (Sphinx's
   own helper, with babel);
2. :func:`put_first` makes them the first catalogs the domain looks in. Sphinx adds a
   catalog registered after the theme's only as a fallback, so the theme's zh_CN
   (列印成 PDF) would win; the theme's stays behind the book's, for what the book's
   lacks.

Some of the words have no message in their source; they are reached the library's way,
and translated from the ``booktheme`` catalog too:

- :func:`translate_config`: two configuration values that the theme shows, the search
  box text (``html_theme_options.search_bar_text``, which Jupyter Book sets) and the
  ``author`` of the footer;
- :data:`TEMPLATES`: copies of sphinx-book-theme's templates with literal labels
  (``Toggle primary sidebar``, ``Toggle secondary sidebar``, the ``Main`` and ``Page``
  navigation labels), each label marked ``{{ translate('…') }}``, put in front of the
  theme's through ``templates_path``;
- :func:`visit_hidden_cell`: myst-nb writes the ``aria-label`` of a hidden cell's toggle
  as a literal in its HTML visitor, and its default labels ("Show code cell output")
  from English words; the book registers its own visitor for that node (Sphinx's
  ``add_node(..., override=True)``), which translates the labels and then calls
  myst-nb's.

Nothing here runs for an English build: the English site is unchanged.
"""

from __future__ import annotations

import html
from pathlib import Path

#: sphinx-book-theme's gettext domain
DOMAIN = "booktheme"
#: copies of sphinx-book-theme's templates whose labels are marked for translation (the
#: theme's folders: ``layout.html``, ``components/``)
TEMPLATES = Path(__file__).resolve().parent / "templates"
#: myst-nb's label of a hidden cell's toggle (``myst_nb.sphinx_.visit_HideCellInput``)
HIDDEN_LABEL = "Toggle hidden content"


def is_translated(language: str | None) -> bool:
    return bool(language) and not str(language).startswith("en")


def compile_catalogs(srcdir, locale_dirs, language: str) -> list[str]:
    """Compile every ``booktheme.po`` of ``locale_dirs`` (relative to ``srcdir``) for
    ``language`` that is newer than its ``.mo``; return the ``.mo`` files."""
    from sphinx.util.i18n import CatalogRepository

    written = []
    repo = CatalogRepository(str(srcdir), list(locale_dirs), language, "utf-8")
    for catalog in repo.catalogs:
        if catalog.domain == DOMAIN:
            if catalog.is_outdated():
                catalog.write_mo(language)
            written.append(catalog.mo_path)
    return written


def put_first(locale_dirs, language: str) -> bool:
    """Make the catalogs of :data:`DOMAIN` in ``locale_dirs`` (absolute) the first that
    the domain's messages are looked up in; the ones registered before them (the
    theme's) become their fallback. False if none was found."""
    from sphinx import locale

    key = ("general", DOMAIN)
    theirs = locale.translators.pop(key, None)
    translator, found = locale.init(list(locale_dirs), language, DOMAIN)
    if theirs is not None:
        if found:
            translator.add_fallback(theirs)
        else:
            locale.translators[key] = theirs
    return found


def translate_config(config) -> None:
    """The configuration values the theme shows without translating them, translated
    from :data:`DOMAIN`."""
    from sphinx.locale import get_translation

    _ = get_translation(DOMAIN)
    options = config.html_theme_options
    if options.get("search_bar_text"):
        options["search_bar_text"] = str(_(options["search_bar_text"]))
    if config.author:
        config.author = str(_(config.author))


def visit_hidden_cell(self, node) -> None:
    """myst-nb's HTML visitor of a hidden cell, with its labels translated."""
    from myst_nb.sphinx_ import visit_HideCellInput
    from sphinx.locale import get_translation

    _ = get_translation(DOMAIN)
    for key in ("prompt_show", "prompt_hide"):
        node[key] = str(_(node[key]))
    start = len(self.body)
    visit_HideCellInput(self, node)
    english = f'aria-label="{HIDDEN_LABEL}"'
    label = f'aria-label="{html.escape(str(_(HIDDEN_LABEL)), quote=True)}"'
    self.body[start:] = [part.replace(english, label) for part in self.body[start:]]


def setup_language(app, config) -> None:
    """``config-inited``: for a build in another language than English, the theme's
    words from the book's catalogs (see the module docstring)."""
    if not is_translated(config.language):
        return
    from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput
    from sphinx.util import logging

    compile_catalogs(app.srcdir, config.locale_dirs, config.language)
    dirs = [str(Path(app.srcdir) / d) for d in config.locale_dirs]
    if not put_first(dirs, config.language):
        logging.getLogger(__name__).warning(
            f"no {DOMAIN}.po for {config.language} in locale_dirs {config.locale_dirs}:"
            " the theme's words keep the theme's translation (scripts/zh_edition.py)"
        )
    translate_config(config)
    # the theme's components are found by their bare names (the themes put their
    # components/ folders in templates_path); the layout by its own
    ours = [str(TEMPLATES), str(TEMPLATES / "components")]
    config.templates_path = [*ours, *config.templates_path]
    app.add_node(
        HideCodeCellNode,
        override=True,
        html=(visit_hidden_cell, depart_HideCellInput),
    )
