"""Build the book (``make book``): every chapter of each edition executed once by nbmake
(``pytest --nbmake --overwrite``, one worker per CPU), then rendered by ``jupyter-book
build`` without executing anything again.

Jupyter Book renders the notebooks nbmake wrote (``execute_notebooks: "off"``): its
glue values, figures and widget state are the ones nbmake's kernels produced. The
English book is executed in a copy, ``_executed/en/`` (the book's ``_config.yml`` with
execution off, ``_toc.yml``, ``book/``), so that ``book/`` stays free of outputs; the
Chinese one in a copy of its generated source, ``_executed/zh/`` (``_build/zh_src/``,
``scripts/zh_edition.py``). (nbmake skips notebooks below a folder named ``_build``.)
A failing chapter stops the build with pytest's report of the cell. To check one chapter
while editing it: ``pytest --nbmake book/04_code.ipynb`` (README, "Writing or revising a
chapter").

    python scripts/build_book.py [jupyter-book build options,
        default: --all -W -n --keep-going]
    python scripts/build_book.py --zh [--pages STEM,...] [options,
        default: --all -W -n --keep-going]
    python scripts/build_book.py --both

``--both`` (``make book``) executes the chapters of both editions in one nbmake run
(the workers take notebooks of either edition, so no core idles while one edition's
longest chapter, the lab, runs last), then renders the two side by side, the Chinese
one in a second process, its log in ``_build/zh/build.log``, printed when it ends. The
exit status is nbmake's if a chapter failed, else the English render's, else the
Chinese one's. Then the two sites become one: the Chinese pages load the English site's
``_static/`` files wherever theirs are the same bytes (:func:`share_static`; only the
Chinese edition's own files stay in ``zh/_static/``).

After each edition, its reader notebooks (``scripts/reader_edition.py``: numbers filled
in, no MyST) go into the site's ``_notebooks/`` folder, which the download button of
every page serves.

``--zh`` builds the Chinese edition: ``scripts/zh_edition.py`` writes its source into
``_build/zh_src/``, nbmake executes it (its set-up cells set ``DPO_GRPO_LANG=zh``, so
figures, widgets and ``check`` speak Chinese; strings without a translation are
recorded in ``_build/zh/i18n_misses.txt``, emptied at the start), jupyter-book renders
it into ``_build/zh/``, and its HTML is copied to ``_build/html/zh/``, so that the two
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

import yaml
from jupyter_book import sphinx
from jupyter_book.cli import main as cli

DEFAULT_ARGS = ["--all", "-W", "-n", "--keep-going"]
ZH_DEFAULT_ARGS = DEFAULT_ARGS
ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
#: The two editions as nbmake executes them and Jupyter Book renders them (outside
#: _build/: nbmake skips every notebook below a folder of that name).
EXECUTED = ROOT / "_executed" / "en"
ZH_EXECUTED = ROOT / "_executed" / "zh"
#: the record of untranslated strings in the Chinese build folder
MISSES_NAME = "i18n_misses.txt"


def jobs() -> int:
    value = os.environ.get("BOOK_JOBS", "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"BOOK_JOBS: expected a positive integer, got {value!r}")
        return int(value)
    return os.cpu_count() or 1


def executed_config(config: dict) -> dict:
    """A ``_config.yml`` for rendering notebooks nbmake has executed: execution off,
    and the book's ``node_modules`` (its vendored JavaScript) found from any folder."""
    config = yaml.safe_load(yaml.safe_dump(config))
    config.setdefault("execute", {})["execute_notebooks"] = "off"
    sphinx_config = config.setdefault("sphinx", {}).setdefault("config", {})
    sphinx_config.setdefault("book_assets_node_modules", str(ROOT / "node_modules"))
    return config


def write_config(project: Path, config: dict) -> None:
    (project / "_config.yml").write_text(
        yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8"
    )


def prepare_english() -> Path:
    """:data:`EXECUTED`: ``book/`` (its build tooling aside), ``_toc.yml`` and the
    book's ``_config.yml`` with execution off."""
    shutil.rmtree(EXECUTED, ignore_errors=True)
    shutil.copytree(
        ROOT / "book", EXECUTED / "book", ignore=shutil.ignore_patterns("_ext")
    )
    shutil.copy(ROOT / "_toc.yml", EXECUTED / "_toc.yml")
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    write_config(EXECUTED, executed_config(config))
    return EXECUTED


def prepare_chinese(pages: list[str] | None = None) -> Path:
    """:data:`ZH_EXECUTED`: a copy of ``_build/zh_src/`` (``scripts/zh_edition.py``),
    its ``_config.yml`` with execution off; the record of untranslated strings
    emptied."""
    import zh_edition

    english = zh_edition.generate(zh_edition.OUT, only=pages)
    untranslated = {stem: n for stem, n in english.items() if n}
    if untranslated:
        print(
            f"Chinese edition: {len(untranslated)} pages keep English blocks: "
            + ", ".join(f"{stem} ({n})" for stem, n in untranslated.items())
        )
    shutil.rmtree(ZH_EXECUTED, ignore_errors=True)
    shutil.copytree(zh_edition.OUT, ZH_EXECUTED)
    config = yaml.safe_load((ZH_EXECUTED / "_config.yml").read_text(encoding="utf-8"))
    write_config(ZH_EXECUTED, executed_config(config))
    # every English string a kernel's tr() finds no translation for (dpo_grpo.i18n);
    # tests/book require it empty
    (BUILD / "zh").mkdir(parents=True, exist_ok=True)
    (BUILD / "zh" / MISSES_NAME).write_text("", encoding="utf-8")
    return ZH_EXECUTED


#: nbmake's JUnit report of the last run (read by tests/book/test_executed.py); the
#: Chinese edition built alone writes its own below ``_build/zh/``
NBMAKE_REPORT = "nbmake-report.xml"


def execute(notebooks: list[Path], report: Path) -> int:
    """Run each notebook once with nbmake, writing its outputs into it
    (``--overwrite``), on :func:`jobs` pytest-xdist workers, and its JUnit report to
    ``report``; pytest's exit status."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    timeout = int((config.get("execute") or {}).get("timeout", 300))
    env = {
        **os.environ,
        # One thread per kernel (torch, MKL, OpenBLAS read it): kernels run side by
        # side, and a multi-threaded reduction's last bits change with the machine's
        # load (the lab's float64 log-prob check gave 0, 4.4e-16 or 8.9e-16 for the
        # same inputs on a loaded machine). These models are too small for a second
        # thread to help.
        "OMP_NUM_THREADS": "1",
        # the Chinese kernels record what tr() cannot translate (their set-up cells set
        # DPO_GRPO_LANG=zh; English kernels record nothing)
        "DPO_GRPO_I18N_MISSES": str(BUILD / "zh" / MISSES_NAME),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--nbmake",
        "--overwrite",
        f"--nbmake-timeout={timeout}",
        "-n",
        str(min(jobs(), len(notebooks))),
        "-p",
        "no:cacheprovider",
        "-q",
        "--durations=5",
        f"--junitxml={report}",
        *map(str, notebooks),
    ]
    print("executing", len(notebooks), "notebooks:", " ".join(command[2:9]), flush=True)
    return subprocess.run(command, check=False, cwd=ROOT, env=env).returncode


def render(project: Path, path_output: Path, args: list[str]) -> int:
    """``jupyter-book build`` of ``project`` into ``path_output/_build`` (its notebooks
    already executed), reading the pages in parallel."""
    # the CLI imports build_sphinx from jupyter_book.sphinx when it runs: give it the
    # jobs there
    sphinx.build_sphinx = functools.partial(sphinx.build_sphinx, jobs=jobs())
    command = ["build", str(project), "--path-output", str(path_output), *args]
    return cli.main(command, standalone_mode=False) or 0


def build(args: list[str]) -> int:
    """The English edition alone: execute, render into ``_build/html/``."""
    project = prepare_english()
    rc = execute(sorted(project.glob("book/*.ipynb")), BUILD / NBMAKE_REPORT)
    if rc:
        return rc
    rc = render(project, ROOT, args)
    if (BUILD / "html" / "book").is_dir():
        write_reader_notebooks("en")
    return rc


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

        def relink(m: re.Match, depth: int = depth) -> str:
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
    args: list[str],
    pages: list[str] | None = None,
    share: bool = True,
    executed: bool = False,
) -> int:
    """The Chinese edition (see the module docstring); ``executed``: its source is
    prepared and executed already (``--both``)."""
    import zh_edition

    if not executed:
        project = prepare_chinese(pages)
        rc = execute(sorted(project.glob("book/*.ipynb")), BUILD / "zh" / NBMAKE_REPORT)
        if rc:
            return rc
    out = BUILD / "zh"
    rc = render(ZH_EXECUTED, out, args)
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
    """Both editions: one nbmake run over every chapter of both, then the two rendered
    side by side (see the module docstring)."""
    english, chinese = prepare_english(), prepare_chinese()
    rc = execute(
        sorted(english.glob("book/*.ipynb")) + sorted(chinese.glob("book/*.ipynb")),
        BUILD / NBMAKE_REPORT,
    )
    if rc:
        return rc
    log_path = BUILD / "zh" / "build.log"
    with open(log_path, "w", encoding="utf-8") as log:
        chinese_render = subprocess.Popen(
            [sys.executable, __file__, "--zh", "--executed"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        english_rc = render(english, ROOT, DEFAULT_ARGS)
        if (BUILD / "html" / "book").is_dir():
            write_reader_notebooks("en")
        chinese_rc = chinese_render.wait()
    print("\nThe Chinese edition's build (" + str(log_path) + "):")
    print(log_path.read_text(encoding="utf-8"))
    if (BUILD / "html" / "zh" / "_static").is_dir():
        removed = share_static(BUILD / "html")
        print(f"The Chinese site loads {removed} files from the English _static/.")
    return english_rc or chinese_rc


def main(argv: list[str]) -> int:
    if argv == ["--both"]:
        return build_both()
    if argv[:1] == ["--zh"]:
        argv, pages = argv[1:], None
        # --both: executed already; it shares _static/ once both editions are built
        executed = argv[:1] == ["--executed"]
        if executed:
            argv = argv[1:]
        if argv[:1] == ["--pages"]:
            pages, argv = argv[1].split(","), argv[2:]
        return build_zh(
            argv or ZH_DEFAULT_ARGS, pages, share=not executed, executed=executed
        )
    return build(argv or DEFAULT_ARGS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
