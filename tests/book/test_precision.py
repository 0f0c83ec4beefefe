"""Numbers at the precision they mean (issue #43, item 4).

A reader should not have to skip noise: a difference of ``2.8e-17`` or ``0.0e+00`` in
the prose or in a printed output says "these agree to rounding", which one line per page
says better ("all 12 checks agree to 1e-12"), and a raw float such as
``0.08000000000000003`` shows digits nobody means. On every notebook page of both
editions of the build (the executed notebooks, the prose with its glued numbers filled
in as the site formats them, and every output the site shows), this test fails on

- a rounding-level number: one in scientific notation below ``1e-12`` (exponent -13 or
  lower) or with a zero mantissa (``0.0e+00``);
- a raw float: a decimal number with 15 or more significant digits.

An agreement line ("agree to 1e-12") is above that level and passes. Pages that still
fail are listed in ``KNOWN`` with who fixes them; the list only shrinks
(``test_known_pages_still_fail``).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import reader_edition  # scripts/ (tests/conftest.py puts it on sys.path)
import zh_catalog

STEMS = [p.stem for p in zh_catalog.toc_pages() if p.suffix == ".ipynb"]
#: edition -> its executed notebooks below the build (tests/book/test_executed.py)
EXECUTED = {
    "en": Path("jupyter_execute"),
    "zh": Path("zh") / "_build" / "jupyter_execute",
}
#: Pages that still print rounding-level numbers or raw floats, each with who fixes it:
#: "lead" (chapters 6-10 and the other pages), "helper 1-3b" (chapters 1 to 3b).
KNOWN = {
    "appendix_benchmarks": "lead",
    "lab_tiny_grpo": "lead",
}

_EDGE = r"(?<![\w.])"
_END = r"(?![\w]|\.\d)"
#: below 1e-12, or a zero mantissa in scientific notation
ROUNDING = re.compile(
    _EDGE + r"(?:[-+]?\d+(?:\.\d+)?[eE]-(?:1[3-9]|[2-9]\d|\d{3,})"
    r"|[-+]?0(?:\.0+)?[eE][-+]?\d+)" + _END
)
DECIMAL = re.compile(_EDGE + r"[-+]?\d+\.\d+(?:[eE][-+]?\d+)?" + _END)
RAW_DIGITS = 15
GLUE = re.compile(r"\{glue(?::text|:any)?\}`(?P<key>[^`:]+)(?::(?P<fmt>[^`]*))?`")
HTML_NOISE = re.compile(r"<script.*?</script>|<style.*?</style>|<[^>]+>", re.DOTALL)
#: what a page shows of a cell's output, in myst-nb's order of preference
SHOWN = ("text/html", "text/markdown", "text/plain")


def significant_digits(number: str) -> int:
    mantissa = re.split("[eE]", number.lstrip("+-"))[0]
    return len(mantissa.replace(".", "").lstrip("0"))


def noise(text: str) -> list[str]:
    """The rounding-level numbers and raw floats in ``text``."""
    found = [m.group(0) for m in ROUNDING.finditer(text)]
    return found + [
        m.group(0)
        for m in DECIMAL.finditer(text)
        if significant_digits(m.group(0)) >= RAW_DIGITS and m.group(0) not in found
    ]


def prose(nb, glue: dict) -> str:
    """The Markdown of ``nb`` with each glued number as the site formats it."""

    def number(m):
        bundle = glue.get(m.group("key"))
        if bundle is None or "text/plain" not in bundle:
            return m.group(0)
        return reader_edition.glue_text(bundle, m.group("fmt") or "")

    return "\n".join(
        GLUE.sub(number, c.source) for c in nb.cells if c.cell_type == "markdown"
    )


def outputs(nb) -> str:
    """The text of every output the site shows (figures and widgets left out)."""
    shown = []
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or {"remove-cell", "remove-output"} & set(tags):
            continue
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                shown.append(out.text)
                continue
            data = out.get("data", {})
            if any(k.startswith("image/") or "json" in k for k in data):
                continue  # a figure, a plotly figure or a widget
            kind = next((k for k in SHOWN if k in data), None)
            if kind is not None:
                text = data[kind]
                shown.append(HTML_NOISE.sub(" ", text) if kind == "text/html" else text)
    return "\n".join(shown)


def page_noise(executed: Path, stem: str) -> dict[str, list[str]]:
    """``{"prose": [...], "outputs": [...]}`` for one executed page."""
    nb = nbformat.read(executed / "book" / f"{stem}.ipynb", as_version=4)
    glue = reader_edition.load_glue(stem, executed, execute=False)
    return {"prose": noise(prose(nb, glue)), "outputs": noise(outputs(nb))}


def test_noise_finds_rounding_and_raw_floats_and_keeps_meant_numbers():
    text = (
        "difference 0.0e+00, gap 2.8e-17 and -1.4e-13; logit: 0.08000000000000003. "
        "All 12 checks agree to 1e-12; loss 0.6931, 1.2e+00, 3.5e-05, step 1e-4, "
        "float32 gap 6.0e-08, seed 1234567890123456"
    )
    assert noise(text) == ["0.0e+00", "2.8e-17", "-1.4e-13", "0.08000000000000003"]
    assert significant_digits("-0.0012345678901234567") == 17


def test_prose_fills_glued_numbers_as_the_site_formats_them():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("gap {glue:text}`g:.1e`, {glue}`h`")]
    glue = {"g": {"text/plain": "2.7755575615628914e-17"}, "h": {"text/plain": "0.5"}}
    assert prose(nb, glue) == "gap 2.8e-17, 0.5"


def test_outputs_skip_hidden_cells_and_figures():
    shown = nbformat.v4.new_code_cell("print(x)")
    shown.outputs = [
        nbformat.v4.new_output("stream", text="0.30000000000000004\n"),
        nbformat.v4.new_output("display_data", data={"text/html": "<td>1e-20</td>"}),
        nbformat.v4.new_output(
            "display_data", data={"image/png": "", "text/plain": "1e-20"}
        ),
    ]
    hidden = nbformat.v4.new_code_cell("glue()", metadata={"tags": ["remove-cell"]})
    hidden.outputs = [nbformat.v4.new_output("stream", text="1e-20")]
    nb = nbformat.v4.new_notebook()
    nb.cells = [shown, hidden]
    assert noise(outputs(nb)) == ["1e-20", "0.30000000000000004"]


@pytest.mark.parametrize("edition", sorted(EXECUTED))
@pytest.mark.parametrize("stem", [s for s in STEMS if s not in KNOWN])
def test_page_prints_numbers_at_the_precision_they_mean(built_book, edition, stem):
    found = page_noise(built_book / EXECUTED[edition], stem)
    assert found == {"prose": [], "outputs": []}, (
        f"{edition}: print an agreement line ('all N checks agree to 1e-12') instead "
        "of rounding-level numbers, and round printed floats"
    )


@pytest.mark.parametrize("edition", sorted(EXECUTED))
@pytest.mark.parametrize("stem", sorted(KNOWN))
def test_known_pages_still_fail(built_book, edition, stem):
    found = page_noise(built_book / EXECUTED[edition], stem)
    assert found["prose"] or found["outputs"], (
        f"{stem} ({edition}) prints no rounding-level number or raw float any more: "
        "remove it from KNOWN"
    )
