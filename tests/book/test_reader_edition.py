"""The reader edition (scripts/reader_edition.py, `make notebooks`): no MyST left,
values and links as the book's."""

import base64
import re
from collections import defaultdict
from pathlib import Path

import nbformat
import pytest

import reader_edition as re_  # scripts/ (tests/conftest.py puts it on sys.path)

ROOT = Path(__file__).resolve().parents[2]

PNG = base64.b64encode(b"\x89PNG fake").decode()
URLS = re_.Urls("https://github.com/Some-Fork/the-book")


def _ctx(glue=None, stem="03_derivations"):
    bib = re_.parse_bib((ROOT / "book" / "references.bib").read_text(encoding="utf-8"))
    return re_.Context(
        stem,
        {} if glue is None else glue,
        bib,
        re_.collect_labels(),
        URLS,
        notebooks={p.stem for p in (ROOT / "book").glob("*.ipynb")},
    )


def test_urls_derive_from_the_repository_url():
    assert URLS.book == "https://some-fork.github.io/the-book"
    assert URLS.colab("04_code") == (
        "https://colab.research.google.com/github/Some-Fork/the-book/blob/notebooks/"
        "04_code.ipynb"
    )
    with pytest.raises(ValueError, match="repository.url"):
        re_.Urls("https://gitlab.com/x").owner_repo


def test_glue_roles_take_the_executed_value_in_the_book_format():
    ctx = _ctx(
        {
            "a": {"text/plain": "0.123456"},
            "n": {"text/plain": "7"},
            "m": {"text/plain": "'x'", "text/markdown": "**x**"},
        }
    )
    out = re_.convert_markdown(
        "A {glue:text}`a:.4f`, {glue:text}`n:d`, {glue}`n`, {glue:md}`m`.", ctx
    )
    assert out == "A 0.1235, 7, 7, **x**."
    with pytest.raises(re_.ReaderEditionError, match="no glued value 'b'"):
        re_.convert_markdown("{glue:text}`b:.2f`", ctx)


def test_citations_are_author_year_links():
    out = re_.convert_markdown(
        "GRPO {cite}`shao2024deepseekmath,rafailov2023dpo`.", _ctx()
    )
    assert out == (
        "GRPO ([Shao et al., 2024](https://arxiv.org/abs/2402.03300); "
        "[Rafailov et al., 2023](https://arxiv.org/abs/2305.18290))."
    )
    with pytest.raises(re_.ReaderEditionError, match="not in references.bib"):
        re_.convert_markdown("{cite}`nobody2099`", _ctx())


def test_references_and_links_go_to_the_online_book_or_colab():
    ctx = _ctx()
    out = re_.convert_markdown(
        "See {ref}`section 3.5 <ch03-grpo-ppo>`, [ch. 4](04_code.ipynb), "
        "[sec](04_code.ipynb#x), [about](about.md) and [web](https://x.org/a.md).",
        ctx,
    )
    assert out == (
        "See [section 3.5](https://some-fork.github.io/the-book/book/"
        "03b_grpo_derivations.html#ch03-grpo-ppo), "
        "[ch. 4](https://colab.research.google.com/github/Some-Fork/the-book/blob/"
        "notebooks/04_code.ipynb), "
        "[sec](https://some-fork.github.io/the-book/book/04_code.html#x), "
        "[about](https://some-fork.github.io/the-book/book/about.html) and "
        "[web](https://x.org/a.md)."
    )


def test_figures_numbered_and_referenced():
    ctx = _ctx(
        {"f": {"text/plain": "<Figure>", "image/png": PNG}}, stem="03b_grpo_derivations"
    )
    out = re_.convert_markdown(
        "```{glue:figure} f\n:name: fig-ch03-groups\n\nThe caption.\n```\n\n"
        "As {numref}`fig-ch03-groups` shows.",
        ctx,
    )
    assert out.startswith(f'<img src="data:image/png;base64,{PNG}"')
    assert "**Figure 1.** The caption." in out
    assert (
        "As [Figure 1](https://some-fork.github.io/the-book/book/"
        "03b_grpo_derivations.html#fig-ch03-groups) shows." in out
    )


def test_a_glued_figures_alt_text_reaches_the_reader_edition():
    ctx = _ctx({"f": {"text/plain": "<Figure>", "image/png": PNG}})
    out = re_.convert_markdown(
        '```{glue:figure} f\n:alt: Two bars, "A" above B\n\nThe caption.\n```', ctx
    )
    assert 'alt="Two bars, &quot;A&quot; above B"' in out
    plain = re_.convert_markdown("```{glue:figure} f\n\nNo alt.\n```", _ctx(ctx.glue))
    assert 'alt="Figure 1"' in plain


def test_directives_become_plain_markdown():
    src = (
        ":::{exercise} Two groups\n:label: ex-1\nCompute {glue:text}`a:.1f`.\n:::\n\n"
        "::::{solution} ex-1\n:::{note}\nInner.\n:::\n::::\n\n(some-label)=\n"
        "## Heading\n\n$$x=1$$ (eq-one)"
    )
    out = re_.convert_markdown(src, _ctx({"a": {"text/plain": "2.0"}}))
    assert "**Exercise: Two groups.** Compute 2.0." in out
    assert "<details><summary><b>Solution</b>" in out and "> **Note.** Inner." in out
    assert "## Heading" in out and "$$x=1$$" in out
    assert re_.leftover_myst(out) == []
    with pytest.raises(re_.ReaderEditionError, match="no conversion for directive"):
        re_.convert_markdown("```{mermaid}\na\n```", _ctx())


@pytest.mark.parametrize(
    "text",
    [
        "{glue:text}`a`",
        "x {cite:p}`k`",
        "```{note}\nx\n```",
        ":::{tip}\n:::",
        "(lbl)=",
        "$$a$$ (eq)",
        "{{ sub }}",
        "{numref}`f`",
    ],
)
def test_leftover_myst_finds_each_construct(text):
    assert re_.leftover_myst(text)


def test_solution_cells_collapse_in_colab_and_jupyterlab():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# T"),
        nbformat.v4.new_code_cell(
            "x = 1", metadata={"tags": ["solution", "hide-cell"]}
        ),
        nbformat.v4.new_code_cell(
            "w()", metadata={"tags": ["remove-cell", "skip-execution"]}
        ),
        nbformat.v4.new_code_cell(
            'glue("x", x)', metadata={"tags": ["remove-cell", "publish"]}
        ),
    ]
    out = re_.convert_notebook(nb, _ctx(stem="t"))
    header, title, sol, live = out.cells  # the publishing cell is dropped
    assert URLS.colab("t") in header.source and URLS.page("t") in header.source
    # a solution runs silently (%%capture, which must be the first line) under its title
    assert sol.source.startswith("%%capture\n#@title Solution")
    assert sol.source.endswith("\nx = 1")
    assert (
        sol.metadata["cellView"] == "form"
        and sol.metadata["jupyter"]["source_hidden"] is True
    )
    assert "tags" not in live.metadata  # the live widget runs in the reader edition


def test_run_all_prints_no_solution():
    """'Run all' in the reader edition runs each solution cell without printing what it
    prints (the answer the exercise asks for), and later cells still get its names; the
    title of the cell says how to see its output, in each edition's words."""
    import nbclient

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell("# T"),
        nbformat.v4.new_code_cell("answer = None\nprint('your answer:', answer)"),
        nbformat.v4.new_code_cell(
            "from IPython.display import display\n\nsolution = 0.4727\n"
            "print('the answer:', solution)\ndisplay(solution)\nsolution",
            metadata={"tags": ["solution", "hide-cell"]},
        ),
        nbformat.v4.new_code_cell("print(solution > 0)"),
    ]
    out = re_.convert_notebook(nb, _ctx(stem="t"))
    nbclient.NotebookClient(out, timeout=120, kernel_name="python3").execute()
    exercise, solution, later = (c for c in out.cells if c.cell_type == "code")
    assert exercise.outputs[0]["text"] == "your answer: None\n"
    assert solution.outputs == []
    assert later.outputs[0]["text"] == "True\n"
    for lang in re_.LANGUAGES:
        ctx = _ctx(stem="t")
        ctx.lang = lang
        title = re_.convert_notebook(nb, ctx).cells[3].source.split("\n")[1]
        assert title.startswith(f"#@title {re_.word(lang, 'Solution')}")
        assert "%%capture" in title, title


@pytest.mark.parametrize(
    "path", sorted((ROOT / "book").glob("*.ipynb")), ids=lambda p: p.stem
)
def test_every_chapter_converts_with_no_myst_left(path):
    """Every construct the chapters use has a conversion (stand-in glue values; the
    Colab test uses real ones)."""

    class AnyKey(defaultdict):
        def __contains__(self, key):
            return True

    glue = AnyKey(
        lambda: {"text/plain": "1.5", "text/markdown": "md", "image/png": PNG}
    )
    nb = nbformat.read(path, as_version=4)
    out = re_.convert_notebook(nb, _ctx(glue, stem=path.stem))
    source_cells = {c.id: c for c in nb.cells}
    for cell in out.cells:
        if cell.cell_type == "markdown":
            assert re_.leftover_myst(cell.source) == [], cell.source[:200]
            for href in re.findall(
                r"\]\(([^)\s]+)\)", cell.source
            ):  # no relative link to a page
                assert href.startswith(("https://", "http://", "#")), href
        else:
            assert not cell.outputs and "skip-execution" not in cell.metadata.get(
                "tags", []
            )
            tags = set(source_cells[cell.id].metadata.get("tags", []))
            if {"solution", "hide-cell"} & tags:
                assert cell.metadata.get("cellView") == "form"
            if "solution" in tags:
                # %%capture comes first: a solution that starts with a magic of its
                # own would break
                assert not source_cells[cell.id].source.startswith("%%")
                assert cell.source.startswith("%%capture\n#@title "), cell.source[:80]
    dropped = [c.source for c in nb.cells if "publish" in c.metadata.get("tags", [])]
    assert not [c for c in out.cells if c.cell_type == "code" and c.source in dropped]


def test_launch_buttons_point_at_the_reader_edition():
    from dpo_grpo_book import reader_launch_buttons

    buttons = [
        {
            "label": "launch-buttons",
            "buttons": [
                {
                    "text": "Binder",
                    "url": "https://mybinder.org/v2/gh/Some-Fork/the-book/main?urlpath=lab/tree/book/04_code.ipynb",
                },
                {
                    "text": "Colab",
                    "url": "https://colab.research.google.com/github/Some-Fork/the-book/blob/main/book/04_code.ipynb",
                },
            ],
        }
    ]
    assert (
        reader_launch_buttons(
            buttons, "book/04_code", "https://github.com/Some-Fork/the-book"
        )
        == 2
    )
    binder, colab = buttons[0]["buttons"]
    assert colab["url"] == URLS.colab("04_code")
    assert (
        binder["url"]
        == "https://mybinder.org/v2/gh/Some-Fork/the-book/notebooks?urlpath=lab/tree/04_code.ipynb"
    )


def test_binder_environment_installs_the_package_from_the_configured_repository():
    text = re_.binder_requirements(URLS)
    # zh: the Chinese notebooks' figures need the CJK font (mplfonts)
    assert (
        "dpo-grpo[jupyter,zh] @ git+https://github.com/Some-Fork/the-book@main" in text
    )
    assert "torch==2.13.0" in text and "whl/cpu" in text
    assert "torch==2.13.0" in (ROOT / "requirements.txt").read_text()
