"""One home per computation (issue #43, item 2): a computation, a printed result or a
figure appears on one page of the book, and a page that needs it links to its home; two
exercises do not share an answer.

The tests read the English build's executed notebooks (``_build/jupyter_execute/book``,
the ``built_book`` fixture) and fail when

1. the same code cell (its source with whitespace normalised, at least 3 non-blank
   lines) is shown on two pages;
2. the same printed numbers appear in the output of cells on two pages: 3 consecutive
   numbers, each printed with at least 3 significant digits, that agree to the precision
   of the less precise print (an array, a row of a table, a ledger);
3. the same figure is shown on two pages: identical PNG bytes, or identical plotly data;
4. two numeric exercises of the registry share an answer: every value of one is, to the
   checker's tolerance, a value of the other.

Which pages count: every executed notebook of ``_toc.yml`` (the chapters, their second
pages, the labs, "Reading a TRL run" and the appendices) except ``explorables``, the
gallery that gathers the chapters' explorables by design, each under a link to its home.
The Markdown pages (front and back matter: notation, glossary, teaching, ...) hold no
computation. Only what a reader sees counts: code cells tagged ``remove-cell`` (set-up,
``glue`` publishing) or ``remove-input`` contribute no source, cells tagged
``remove-cell`` or ``remove-output`` no printed output; figures count wherever they are
shown, a ``{glue:figure}`` published by a hidden cell included.

Repeats that other pages still hold are listed in :data:`KNOWN_REPEATS`, each with the
page owner who removes it; ``test_known_repeats_still_occur`` fails when an entry no
longer occurs, so the list can only shrink."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import yaml
from testing_support import toc_files

ROOT = Path(__file__).resolve().parents[2]
#: executed notebooks of a page that are not a page's own computation: the gallery
NOT_COUNTED = {"explorables"}
MIN_CODE_LINES = 3
MIN_NUMBERS = 3
MIN_DIGITS = 3

#: Repeats the build still holds, as (kind, page, cell id) of the later showing (the
#: pages in the order of _toc.yml), with the owner of that page, who removes the entry
#: when the page links to the home instead.
LEAD = "lead: chapters 6-10, run page, lab"
KNOWN_REPEATS: dict[tuple, str] = {
    # not the same demo: the run page's own step has a group [1.5, 0.5, 0.5, 0.5],
    # which standardises to the numbers 05_production's ch05-10 prints for a group
    # of the same shape (its rewards with None counted as 0)
    ("output", "trl_reading_a_run", "log-9bfd8e"): LEAD,
}


def counted_pages() -> list[str]:
    """The stems of the notebook pages that count, in the order of ``_toc.yml``."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    stems = [Path(f).name for f in toc_files(toc)]
    return [
        s
        for s in stems
        if (ROOT / "book" / f"{s}.ipynb").exists() and s not in NOT_COUNTED
    ]


def _tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def normalised_source(source: str) -> str:
    """The cell's non-blank lines, each with its runs of whitespace made one space."""
    lines = (" ".join(line.split()) for line in source.splitlines())
    return "\n".join(line for line in lines if line)


_HTML_TAG = re.compile(r"<[^>]+>")


def output_text(output) -> str:
    """What a reader reads of one output: a stream, or the richest text of a display
    (Markdown, HTML without its tags, plain text); nothing for a figure's plain-text
    stand-in."""
    if output.get("output_type") == "stream":
        return output.get("text", "")
    data = output.get("data", {})
    if "text/markdown" in data:
        return data["text/markdown"]
    if "text/html" in data:
        return _HTML_TAG.sub(" ", data["text/html"])
    visual = ("image/png", "application/vnd.plotly.v1+json")
    if "text/plain" in data and not any(m in data for m in visual):
        return data["text/plain"]
    return ""


_NUMBER = re.compile(
    r"(?<![\w.])[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?"
)


def _significant_digits(token: str) -> int:
    mantissa = token.lower().split("e")[0].lstrip("+-−").replace(",", "")
    if "." not in mantissa:
        mantissa = mantissa.rstrip("0") or "0"
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits)


def _decimals(token: str) -> float:
    """The precision a printed number carries: half a unit of its last digit."""
    t = token.lower().replace(",", "").replace("−", "-")
    mantissa, _, exp = t.partition("e")
    places = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 0.5 * 10.0 ** (-places + (int(exp) if exp else 0))


def printed_numbers(text: str) -> list[tuple[float, float]]:
    """``(value, half a unit of its last digit)`` of every number printed with at least
    ``MIN_DIGITS`` significant digits, in order (the others, such as a table's row
    numbers, are left out)."""
    return [
        (float(m.group().replace(",", "").replace("−", "-")), _decimals(m.group()))
        for m in _NUMBER.finditer(text)
        if _significant_digits(m.group()) >= MIN_DIGITS
    ]


def _informative(value: float) -> bool:
    """More than a round number: ``MIN_DIGITS`` digits without the trailing zeros
    (1.000 and 0.5000 are not, 112.0 and 0.8661 are)."""
    return len(f"{abs(value):.12g}".replace(".", "").strip("0")) >= MIN_DIGITS


def number_runs(text: str) -> list[tuple[tuple[float, float], ...]]:
    """Every run of ``MIN_NUMBERS`` consecutive non-trivial printed numbers, one of
    them more than a round number."""
    nums = printed_numbers(text)
    runs = [nums[i : i + MIN_NUMBERS] for i in range(len(nums) - MIN_NUMBERS + 1)]
    return [tuple(r) for r in runs if any(_informative(v) for v, _ in r)]


def _run_key(run) -> tuple[str, ...]:
    return tuple(f"{v:.2g}" for v, _ in run)


def runs_agree(a, b) -> bool:
    """Two runs print the same numbers, to the precision of the less precise print."""
    return all(
        abs(va - vb) <= max(ha, hb) * (1 + 1e-9) for (va, ha), (vb, hb) in zip(a, b)
    )


def figure_keys(output) -> list[str]:
    """A digest of each figure an output shows: its PNG bytes, its plotly data."""
    data = output.get("data", {})
    keys = []
    if "image/png" in data:
        png = data["image/png"]
        raw = base64.b64decode(png if isinstance(png, str) else "".join(png))
        keys.append("png:" + hashlib.sha256(raw).hexdigest()[:16])
    plotly = data.get("application/vnd.plotly.v1+json")
    if plotly:
        blob = json.dumps(plotly.get("data"), sort_keys=True)
        keys.append("plotly:" + hashlib.sha256(blob.encode()).hexdigest()[:16])
    return keys


def page_items(stem: str, nb) -> dict[str, list]:
    """What a reader sees of one executed page: ``code`` (normalised source, cell
    id), ``runs`` (run of numbers, cell id), ``figures`` (digest, cell id)."""
    items: dict[str, list] = {"code": [], "runs": [], "figures": []}
    for cell in nb.cells:
        if cell.cell_type != "code" or "colab-setup" in _tags(cell):
            continue
        tags, cid = _tags(cell), cell.get("id", "?")
        source = normalised_source(cell.source)
        shown = not tags & {"remove-cell", "remove-input"}
        if shown and len(source.splitlines()) >= MIN_CODE_LINES:
            items["code"].append((source, cid))
        for output in cell.get("outputs", []):
            for key in figure_keys(output):
                items["figures"].append((key, cid))
            if tags & {"remove-cell", "remove-output"}:
                continue
            for run in number_runs(output_text(output)):
                items["runs"].append((run, cid))
    return items


def find_repeats(pages: dict[str, object]) -> dict[tuple, str]:
    """``{(kind, page, cell id): where it was shown first}`` over ``pages`` (stem ->
    executed notebook, in reading order): every code cell, printed run of numbers or
    figure that an earlier page already shows. A repeat within one page is not
    counted."""
    found: dict[tuple, str] = {}
    code: dict[str, tuple] = {}
    figures: dict[str, tuple] = {}
    runs: dict[tuple, list] = {}
    for stem, nb in pages.items():
        items = page_items(stem, nb)
        for src, cid in items["code"]:
            if src in code and code[src][0] != stem:
                found.setdefault(("code", stem, cid), f"{code[src]}: {src[:60]!r}")
        for k, cid in items["figures"]:
            if k in figures and figures[k][0] != stem:
                found.setdefault(("figure", stem, cid), f"{figures[k]}: {k}")
        for run, cid in items["runs"]:
            for run_a, home in runs.get(_run_key(run), []):
                if home[0] != stem and runs_agree(run, run_a):
                    shown = " ".join(f"{v:g}" for v, _ in run)
                    found.setdefault(("output", stem, cid), f"{home}: {shown}")
                    break
        for src, cid in items["code"]:
            code.setdefault(src, (stem, cid))
        for k, cid in items["figures"]:
            figures.setdefault(k, (stem, cid))
        for run, cid in items["runs"]:
            runs.setdefault(_run_key(run), []).append((run, (stem, cid)))
    return found


def shared_answers(exercises) -> dict[tuple, str]:
    """``{("answer", id, id): value}`` for the numeric exercises every value of whose
    answer is, to the larger of the two checkers' tolerances, a value of the other's."""
    numeric = {
        k: (np.ravel(np.asarray(e.solution(), float)), np.ravel(e.tolerance()))
        for k, e in exercises.items()
        if e.kind == "numeric"
    }
    found = {}
    for (ka, (va, ta)), (kb, (vb, tb)) in itertools.combinations(numeric.items(), 2):
        if va.size > vb.size:
            (ka, va, ta), (kb, vb, tb) = (kb, vb, tb), (ka, va, ta)
        tol = np.maximum(ta[:, None], tb[None, :])
        close = np.abs(va[:, None] - vb[None, :]) <= tol
        if close.any(axis=1).all():
            found[("answer", ka, kb)] = np.array2string(va, precision=6)
    return found


def _describe(repeats: dict[tuple, str]) -> str:
    return "\n".join(f"  {key}: {what}" for key, what in sorted(repeats.items()))


# --- the build ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def build_repeats(built_book) -> dict[tuple, str]:
    folder = built_book / "jupyter_execute" / "book"
    if not folder.is_dir():
        pytest.skip(f"no executed build in {folder} (make book)")
    pages = {}
    for stem in counted_pages():
        path = folder / f"{stem}.ipynb"
        assert path.is_file(), f"the build did not execute {stem}: {path} is missing"
        pages[stem] = nbformat.read(path, as_version=4)
    return find_repeats(pages)


@pytest.mark.parametrize("kind", ["code", "output", "figure"])
def test_nothing_is_shown_on_two_pages(build_repeats, kind):
    new = {
        k: v
        for k, v in build_repeats.items()
        if k[0] == kind and k not in KNOWN_REPEATS
    }
    assert not new, (
        f"the same {kind} is shown on two pages (keep it in one home and link to it "
        f"from the other; (kind, page, cell id): the page and cell that showed it "
        "first):\n" + _describe(new)
    )


def test_known_repeats_still_occur(build_repeats):
    gone = [k for k in KNOWN_REPEATS if k not in build_repeats]
    assert not gone, (
        "these KNOWN_REPEATS no longer occur: remove them from the list\n"
        + "\n".join(f"  {k}" for k in gone)
    )


def test_no_two_exercises_share_an_answer():
    from dpo_grpo.exercises.core import registry

    shared = {k: v for k, v in shared_answers(registry()).items()}
    assert not shared, (
        "exercises with the same answer (change one so that it asks something new):\n"
        + _describe(shared)
    )


# --- the detectors on small pages ----------------------------------------------------


def _page(*cells):
    nb = nbformat.v4.new_notebook()
    for i, (source, text, tags) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source, id=f"c{i}")
        cell.metadata["tags"] = list(tags)
        if text:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        nb.cells.append(cell)
    return nb


def test_a_repeated_cell_is_found_and_a_short_or_hidden_one_is_not():
    body = "x = 1\ny = 2\n\nprint(x + y)"
    a = _page((body, "", []), ("from m import f\n\nf()", "", []))
    b = _page(
        ("x  =  1\ny = 2\nprint(x + y)", "", []), ("from m import f\nf()", "", [])
    )
    c = _page((body, "", ["remove-cell"]))
    assert list(find_repeats({"a": a, "b": b})) == [("code", "b", "c0")]
    assert find_repeats({"a": a, "c": c}) == {}


def test_printed_numbers_repeat_to_the_precision_of_the_coarser_print():
    a = _page(("f()", "advantages [-1.2699  0.0237  1.317  -0.0704]", []))
    b = _page(("g()", "A = -1.269925 0.023719 1.316953 -0.070400", []))
    c = _page(("h()", "[-1.2699 0.0238 1.3170]", []))  # 0.0238 is not 0.0237
    d = _page(("k()", "rewards [0.2 0.8 1.4 0.6], 1.0e-13, 1.000 1.000 1.000", []))
    assert list(find_repeats({"a": a, "b": b})) == [("output", "b", "c0")]
    assert find_repeats({"a": a, "c": c}) == {}
    assert find_repeats({"d": d, "e": d}) == {}  # too few significant digits
    assert number_runs("112.0 GB, 14.0 GB, 1,024 tokens") == [
        ((112.0, 0.05), (14.0, 0.05), (1024.0, 0.5))
    ]
    table = _page(("t()", "answer ratio\n1 1.2840 -\n2 1.1052 +\n3 0.7788 +", []))
    array = _page(("u()", "ratio_first_token = [1.284  1.1052 0.7788 0.9048]", []))
    assert list(find_repeats({"t": table, "u": array})) == [("output", "u", "c0")]


def test_a_repeated_figure_is_found():
    png = base64.b64encode(b"\x89PNG same bytes").decode()
    pages = {}
    for stem in ("a", "b"):
        nb = _page(("glue('fig', fig)", "", ["remove-cell", "publish"]))
        nb.cells[0].outputs = [
            nbformat.v4.new_output("display_data", data={"image/png": png})
        ]
        pages[stem] = nb
    assert list(find_repeats(pages)) == [("figure", "b", "c0")]


def test_exercises_that_share_an_answer_are_found():
    class Ex:
        kind = "numeric"

        def __init__(self, value):
            self.value = np.asarray(value, float)

        def solution(self):
            return self.value

        def tolerance(self):
            return np.full(self.value.shape, 2.0**-10)

    found = shared_answers(
        {
            "02.2": Ex(1.219483),
            "03.7": Ex([-1.0319, 0.0938, 1.2194831, -0.2814]),
            "03.10": Ex([-1.7143, 0.0808, 1.6508, -0.2771]),
            "04.6": Ex([0.5231, -0.6772, 0.4313, -0.27713]),
        }
    )
    assert list(found) == [("answer", "02.2", "03.7")]


def test_every_counted_page_is_a_notebook_of_the_toc():
    pages = counted_pages()
    assert {"01_why", "03b_grpo_derivations", "lab_tiny_grpo"} <= set(pages)
    assert not NOT_COUNTED & set(pages)
