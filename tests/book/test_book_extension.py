"""The book's build tooling on small inputs: the page rewrites of the Sphinx extension
(``book/_ext/dpo_grpo_book``) and the steps of ``scripts/build_book.py`` that join the
two editions. The built site itself is checked in tests/browser/test_reader_walk.py and
tests/book/test_built_pages.py."""

from __future__ import annotations

import pytest

import build_book
from dpo_grpo_book import (
    ICON_SCRIPT,
    drop_icon_script,
    icon_codepoints,
    lazy_images,
    reader_download,
    unicode_ranges,
)


def test_images_load_lazily_unless_they_say_otherwise():
    html = '<p><img src="a.png" alt="a"/><img loading="eager" src="b.png"/></p>'
    out = lazy_images(html)
    assert '<img loading="lazy" src="a.png"' in out
    assert out.count("loading=") == 2 and 'loading="eager" src="b.png"' in out
    assert lazy_images(out) == out


def test_the_icon_script_is_dropped_and_nothing_else():
    html = (
        f'  <script defer src="../{ICON_SCRIPT}?digest=1"></script>\n'
        '<script src="../_static/book.js"></script>\n'
    )
    assert drop_icon_script(html) == '<script src="../_static/book.js"></script>\n'


def test_unicode_ranges_join_neighbours():
    assert unicode_ranges([0x4E00, 0x4E01, 0x4E02, 0x4E8C]) == "U+4E00-4E02, U+4E8C"
    assert unicode_ranges([]) == ""


def test_icon_fonts_keep_the_icons_pages_name_and_style_sheets_draw(tmp_path):
    static = tmp_path / "_static"
    (static / "styles").mkdir(parents=True)
    (static / "styles" / "theme.css").write_text(
        '.fa-bars:before{content:"\\f0c9"}.fa-rocket:before{content:"\\f135"}'
        '.admonition-title:after{content:"\\f05a"}',
        encoding="utf-8",
    )
    (tmp_path / "page.html").write_text('<i class="fa-solid fa-bars"></i>')
    # a vendored library's icon names are not the site's
    (static / "vendor").mkdir()
    (static / "vendor" / "lib.js").write_text('"fa-rocket"')
    assert icon_codepoints(tmp_path) == {0xF0C9, 0xF05A}


def test_the_download_button_serves_the_reader_notebook():
    buttons = [
        {
            "label": "download-buttons",
            "buttons": [
                {"label": "download-source-button", "url": "../_sources/a.ipynb"},
                {"label": "download-pdf-button"},
            ],
        }
    ]
    assert reader_download(buttons, "../_notebooks/a.ipynb", "Download the notebook")
    assert buttons[0]["buttons"][0]["url"] == "../_notebooks/a.ipynb"
    assert not reader_download([], "x", "y")


def test_the_chinese_site_loads_identical_files_from_the_english_one(tmp_path):
    for edition in ("", "zh/"):
        static = tmp_path / edition / "_static"
        static.mkdir(parents=True)
        (static / "same.js").write_text("same")
        (static / "own.js").write_text(f"own {edition}")
        (tmp_path / edition / "book").mkdir()
        (tmp_path / edition / "book" / "page.html").write_text(
            '<script src="../_static/same.js"></script>'
            '<script src="../_static/own.js"></script>'
        )
    assert build_book.share_static(tmp_path) == 1
    page = (tmp_path / "zh" / "book" / "page.html").read_text()
    assert 'src="../../_static/same.js"' in page and 'src="../_static/own.js"' in page
    assert not (tmp_path / "zh" / "_static" / "same.js").exists()
    # a second pass changes nothing (the shared link is not moved up again)
    assert build_book.share_static(tmp_path) == 0
    assert (tmp_path / "zh" / "book" / "page.html").read_text() == page


def test_rendering_executes_nothing_again():
    config = build_book.executed_config({"execute": {"execute_notebooks": "force"}})
    assert config["execute"]["execute_notebooks"] == "off"
    assert config["sphinx"]["config"]["book_assets_node_modules"].endswith(
        "node_modules"
    )


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_book_jobs_must_be_a_positive_integer(monkeypatch, value):
    monkeypatch.setenv("BOOK_JOBS", value)
    with pytest.raises(ValueError, match="BOOK_JOBS"):
        build_book.jobs()
