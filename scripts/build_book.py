"""Build the book (``make book``): ``jupyter-book build`` with Sphinx reading, and so
executing, the chapters in parallel, one process per CPU (``BOOK_JOBS`` overrides).

Jupyter Book 1's command line has no ``--jobs``; its ``build_sphinx`` takes one, and
myst-nb, sphinx-exercise, sphinx-togglebutton, sphinxcontrib-bibtex and this book's
extension are all parallel-read safe. Each chapter is still executed exactly once, in a
fresh kernel, as in a serial build.

    python scripts/build_book.py [jupyter-book build options,
        default: . --all -W -n --keep-going]
    python scripts/build_book.py --zh [--pages STEM,...] [options,
        default: --all -W -n --keep-going]
    python scripts/build_book.py --both

``--both`` (``make book``) builds the two editions side by side: the Chinese one in a
second process, its log in ``_build/zh/build.log``, printed when it ends. Each edition
alone leaves a core idle while its longest chapter (the lab) runs last; side by side
they fill each other's gaps. The exit status is the English build's, else the Chinese
one's. Then the two sites become one: the Chinese pages load the English site's
``_static/`` files wherever theirs are the same bytes (:func:`share_static`; only the
Chinese edition's own files stay in ``zh/_static/``).

After each edition, its reader notebooks (``scripts/reader_edition.py``: numbers filled
in, no MyST) go into the site's ``_notebooks/`` folder, which the download button of
every page serves.

``--zh`` builds the Chinese edition: ``scripts/zh_edition.py`` writes its source into
``_build/zh_src/``, jupyter-book builds it into ``_build/zh/``
with ``DPO_GRPO_LANG=zh`` in the kernels' environment (figures, widgets and ``check`` in
Chinese; strings without a translation are recorded in ``_build/zh/i18n_misses.txt``,
emptied at the start), and its HTML is copied to ``_build/html/zh/``, so that the two
sites are one tree and each page's language switch is a relative link. ``--pages``
builds only those pages (and the root): a translator's quick look, with links to the
other pages left dangling (drop ``-W``).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from jupyter_book import sphinx
from jupyter_book.cli import main as cli

DEFAULT_ARGS = [".", "--all", "-W", "-n", "--keep-going"]
ZH_DEFAULT_ARGS = ["--all", "-W", "-n", "--keep-going"]
ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
#: the record of untranslated strings in the Chinese build folder
MISSES_NAME = "i18n_misses.txt"


def jobs() -> int:
    value = os.environ.get("BOOK_JOBS", "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"BOOK_JOBS: expected a positive integer, got {value!r}")
        return int(value)
    return os.cpu_count() or 1


def build(args: list[str]) -> int:
    # One thread per kernel (torch, MKL, OpenBLAS read it): the kernels of both editions
    # run side by side, and a multi-threaded reduction's last bits change with the
    # machine's load (the lab's float64 log-prob check gave 0, 4.4e-16 or 8.9e-16 for
    # the same inputs on a loaded machine), so a second execution would not give the
    # same numbers. These models are too small for a second thread to help.
    os.environ["OMP_NUM_THREADS"] = "1"
    # the CLI imports build_sphinx from jupyter_book.sphinx when it runs: give it the
    # jobs there
    sphinx.build_sphinx = functools.partial(sphinx.build_sphinx, jobs=jobs())
    return cli.main(["build", *args], standalone_mode=False) or 0


#: The folder of the site that holds each page's reader notebook (the download button
#: of book/_ext/dpo_grpo_book serves it).
READER_FOLDER = "_notebooks"


def write_reader_notebooks(lang: str) -> list[Path]:
    """The reader edition of ``lang``'s executed build into its site's
    :data:`READER_FOLDER` (no execution: the numbers come from the build)."""
    import reader_edition

    if lang == "zh":
        site = BUILD / "html" / "zh"
        return reader_edition.build(
            site / READER_FOLDER,
            reader_edition.ZH_DEFAULTS["executed"],
            execute=False,
            book=reader_edition.ZH_DEFAULTS["book"],
            lang="zh",
        )
    return reader_edition.build(
        BUILD / "html" / READER_FOLDER, BUILD / "jupyter_execute", execute=False
    )


_STATIC_LINK = re.compile(r'((?:href|src)=")((?:\.\./)*)_static/([^"?#]+)')


def share_static(site: Path, prefix: str = "zh/") -> int:
    """Make the edition in ``site / prefix`` load the files of ``site / "_static"``
    that its own ``_static`` holds byte for byte: delete its copies and point its pages
    one folder up. Returns the number of files removed."""
    import filecmp

    own, shared = site / prefix / "_static", site / "_static"
    removed = 0
    for path in sorted(own.rglob("*")):
        twin = shared / path.relative_to(own)
        if path.is_file() and twin.is_file() and filecmp.cmp(path, twin, shallow=False):
            path.unlink()
            removed += 1
    for folder in sorted(own.rglob("*"), reverse=True):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()

    for page in (site / prefix).rglob("*.html"):
        depth = len(page.relative_to(site / prefix).parts) - 1

        def relink(m: re.Match) -> str:
            attribute, ups, rest = m.groups()
            if (
                ups.count("../") != depth  # not this edition's _static (or shared)
                or (own / rest).exists()
                or not (shared / rest).exists()
            ):
                return m.group(0)
            return f"{attribute}{ups}../_static/{rest}"

        text = page.read_text(encoding="utf-8")
        linked = _STATIC_LINK.sub(relink, text)
        if linked != text:
            page.write_text(linked, encoding="utf-8")
    return removed


def build_zh(
    args: list[str], pages: list[str] | None = None, share: bool = True
) -> int:
    """The Chinese edition (see the module docstring)."""
    import zh_edition

    english = zh_edition.generate(zh_edition.OUT, only=pages)
    untranslated = {stem: n for stem, n in english.items() if n}
    if untranslated:
        print(
            f"Chinese edition: {len(untranslated)} pages keep English blocks: "
            + ", ".join(f"{stem} ({n})" for stem, n in untranslated.items())
        )
    os.environ["DPO_GRPO_LANG"] = "zh"  # the kernels inherit it
    out = BUILD / "zh"
    # every English string a kernel's tr() finds no translation for (dpo_grpo.i18n);
    # tests/book require it empty
    out.mkdir(parents=True, exist_ok=True)
    (out / MISSES_NAME).write_text("", encoding="utf-8")
    os.environ["DPO_GRPO_I18N_MISSES"] = str(out / MISSES_NAME)
    rc = build([str(zh_edition.OUT), "--path-output", str(out), *args])
    site, target = out / "_build" / "html", BUILD / "html" / zh_edition.SITE_PREFIX
    if site.is_dir():
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(site, target)
        if pages is None:
            write_reader_notebooks("zh")
            if share and (BUILD / "html" / "_static").is_dir():
                share_static(BUILD / "html")  # `make book-zh` after `make book`
    return rc


def build_both() -> int:
    """Both editions at once, each with its default arguments (see the module
    docstring)."""
    log_path = BUILD / "zh" / "build.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as log:
        chinese = subprocess.Popen(
            [sys.executable, __file__, "--zh", "--no-share"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        english = build(DEFAULT_ARGS)
        if (BUILD / "html" / "book").is_dir():
            write_reader_notebooks("en")
        chinese_rc = chinese.wait()
    print("\nThe Chinese edition's build (" + str(log_path) + "):")
    print(log_path.read_text(encoding="utf-8"))
    if (BUILD / "html" / "zh" / "_static").is_dir():
        removed = share_static(BUILD / "html")
        print(f"The Chinese site loads {removed} files from the English _static/.")
    return english or chinese_rc


def main(argv: list[str]) -> int:
    if argv == ["--both"]:
        return build_both()
    if argv[:1] == ["--zh"]:
        argv, pages, share = argv[1:], None, True
        if argv[:1] == ["--no-share"]:  # --both shares once both editions are built
            argv, share = argv[1:], False
        if argv[:1] == ["--pages"]:
            pages, argv = argv[1].split(","), argv[2:]
        return build_zh(argv or ZH_DEFAULT_ARGS, pages, share)
    return build(argv or DEFAULT_ARGS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
