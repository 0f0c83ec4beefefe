"""Build the reader edition: the chapter notebooks as plain Jupyter/Colab notebooks,
with no MyST left.

    python scripts/reader_edition.py [--executed _build/jupyter_execute] \\
        [--out _build/notebooks]

(``make notebooks``). For every notebook in ``book/``:

- ``{glue:text}`key:fmt``` / ``{glue}`` / ``{glue:md}`` become the values of an executed
  build: myst-nb's ``<name>.glue.json`` or the glue outputs of the executed notebook in
  ``--executed``; a notebook without them is executed here with nbclient. Formatting is
  myst-nb's own (``format_plain_text``), so the numbers equal the book's.
- ``{glue:figure}`` becomes the glued image (PNG/SVG inlined) and its caption as "Figure
  N.".
- ``{cite}`` becomes author-year text linked to the paper (``book/references.bib``: url,
  doi or arXiv id).
- ``{numref}``/``{ref}``/``{doc}`` and links to ``.md`` pages become links to the online
  book; links to another notebook become its reader edition's Colab URL (with an anchor:
  the online book's section, which Colab lacks).
- ``:::{exercise}``/``:::{solution}``, admonitions and ``(label)=`` targets become plain
  Markdown; code cells tagged ``solution``/``hide-cell``/``hide-input`` are collapsed
  (Colab: ``#@title`` + ``cellView: form``; JupyterLab/Notebook 7:
  ``jupyter.source_hidden``); a solution cell runs silently (``%%capture`` first, which
  IPython requires of a cell magic; its title says to delete that line to see the
  output), so that "Run all" prints no answer while later cells still get its names;
  the live-widget cells lose ``skip-execution``; the cells
  tagged ``publish`` (``glue`` calls the site runs unseen) are dropped, their numbers
  being filled in already. The set-up cell (tagged ``colab-setup``, hidden on the site)
  stays the first code cell.
- Outputs are cleared; a header cell links the online chapter and the Colab button; the
  notebook's metadata ``dpo_grpo`` says ``{"edition": "reader", "lang": ...}`` (the
  student and graded editions, ``python -m dpo_grpo.exercises student``, are made from
  this edition alone).

``--lang zh`` writes the Chinese reader edition (``make notebooks`` writes both) from
the Chinese edition's source (``_build/zh_src/book``, ``scripts/zh_edition.py``) and its
executed build (``_build/zh/_build/jupyter_execute``) into ``_build/notebooks/zh/``: the
words this script adds (figure, exercise, solution, note, the header cell) are Chinese,
and its links go to the Chinese site (``.../zh/book/<name>.html``) and notebooks
(``.../notebooks/zh/``).

The book's URL and the Colab URLs derive from ``repository.url`` in ``_config.yml``
(GitHub Pages: ``https://OWNER.github.io/REPO/``; Colab:
``.../github/OWNER/REPO/blob/notebooks/<name>.ipynb``, the branch the Pages workflow
publishes). :func:`leftover_myst` lists any role or directive left; the build fails on
one.
"""

from __future__ import annotations

import argparse
import ast
import base64
import html
import json
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
READER_BRANCH = "notebooks"
COLAB = "https://colab.research.google.com/github"

ROLE = re.compile(r"\{(?P<name>[a-zA-Z][\w:\-]*)\}`(?P<body>[^`]*)`")
DIRECTIVE_OPEN = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:\-]+)\}[ \t]*(?P<arg>.*)$"
)
TARGET = re.compile(r"^\((?P<label>[\w\-:.]+)\)=[ \t]*$", re.M)
EQ_LABEL = re.compile(r"\$\$[ \t]*\((?P<label>[\w\-:.]+)\)[ \t]*$", re.M)
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<href>[^)\s]+)\)")
ADMONITIONS = {
    "note",
    "tip",
    "warning",
    "important",
    "caution",
    "attention",
    "danger",
    "error",
    "hint",
    "seealso",
    "admonition",
}
#: Cells that only publish numbers for the site (myst-nb ``glue``), hidden there by
#: ``remove-cell``: dropped here.
PUBLISH_TAG = "publish"
#: The first line of a solution cell in the reader edition: it runs without printing.
SILENT = "%%capture\n"
COLLAPSED_TAGS = {
    "solution": "Solution",
    "hide-cell": "Hidden code",
    "hide-input": "Code",
}
#: The words this script writes into a reader notebook, per edition (``--lang``).
WORDS = {
    "en": {
        "Figure": "Figure",
        "Exercise": "Exercise",
        "Solution": "Solution",
        "Hidden code": "Hidden code",
        "Code": "Code",
        "click to show": " (click to show)",
        "double-click": " (double-click to show the code)",
        "runs silently": (
            " (double-click to show the code; it runs silently: delete its first "
            "line, %%capture, to see its output)"
        ),
        "header": (
            "Reader edition of *{title}*, generated from [the online book]({page}) "
            "with its computed numbers filled in ([open in Colab]({colab})). Run the "
            "first code cell first."
        ),
    },
    "zh": {
        "Figure": "图",
        "Exercise": "练习",
        "Solution": "答案",
        "Hidden code": "隐藏的代码",
        "Code": "代码",
        "click to show": "（点击展开）",
        "double-click": "（双击显示代码）",
        "runs silently": (
            "（双击显示代码；它静默运行：删去第一行 %%capture 即可看到输出）"
        ),
        "header": (
            "*{title}* 的读者版：由[在线版]({page})生成，计算出的数字已经填入（[在 "
            "Colab 中打开]({colab})）。请先运行第一个代码单元。"
        ),
        "note": "注",
        "tip": "提示",
        "hint": "提示",
        "warning": "警告",
        "important": "重要",
        "caution": "小心",
        "attention": "注意",
        "danger": "危险",
        "error": "错误",
        "seealso": "另见",
    },
}
LANGUAGES = tuple(WORDS)


def word(lang: str, key: str) -> str:
    """The word ``key`` in edition ``lang`` (English where the edition has none)."""
    if lang not in WORDS:
        raise ValueError(f"lang: expected one of {LANGUAGES}, got {lang!r}")
    return WORDS[lang].get(key, WORDS["en"].get(key, key))


# --------------------------------------------------------------------------------------
# URLs (one definition: repository.url in _config.yml)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Urls:
    repository: str
    #: the edition's folder on the site and on the reader branch: "" (English) or "zh/"
    prefix: str = ""

    @classmethod
    def from_config(cls, root: Path = ROOT, prefix: str = "") -> "Urls":
        cfg = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
        return cls(cfg["repository"]["url"].rstrip("/"), prefix)

    @property
    def owner_repo(self) -> str:
        m = re.match(
            r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?$", self.repository
        )
        if not m:
            raise ValueError(
                "repository.url: expected https://github.com/OWNER/REPO, got "
                f"{self.repository!r}"
            )
        return f"{m.group(1)}/{m.group(2)}"

    @property
    def book(self) -> str:
        owner, repo = self.owner_repo.split("/")
        return f"https://{owner.lower()}.github.io/{repo}"

    def page(self, stem: str, anchor: str = "") -> str:
        return f"{self.book}/{self.prefix}book/{stem}.html" + (
            f"#{anchor}" if anchor else ""
        )

    def colab(self, stem: str) -> str:
        return (
            f"{COLAB}/{self.owner_repo}/blob/{READER_BRANCH}/{self.prefix}{stem}.ipynb"
        )


# --------------------------------------------------------------------------------------
# Bibliography: author-year text and a link
# --------------------------------------------------------------------------------------


def parse_bib(text: str) -> dict[str, dict[str, str]]:
    """A small BibTeX reader for ``book/references.bib`` (brace-delimited fields)."""
    entries = {}
    for m in re.finditer(r"@(\w+)\s*\{\s*([^,\s]+)\s*,", text):
        i, depth, start = m.end(), 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body, fields, j = text[start : i - 1], {}, 0
        for f in re.finditer(r"(\w+)\s*=\s*", body):
            if f.start() < j:
                continue
            k = f.end()
            if body[k] == "{":
                d, k0 = 0, k
                while True:
                    d += {"{": 1, "}": -1}.get(body[k], 0)
                    k += 1
                    if d == 0:
                        break
                value = body[k0 + 1 : k - 1]
            elif body[k] == '"':
                k0 = k
                k = body.index('"', k + 1) + 1
                value = body[k0 + 1 : k - 1]
            else:
                k0 = k
                while k < len(body) and body[k] not in ",\n":
                    k += 1
                value = body[k0:k].strip()
            fields[f.group(1).lower()] = re.sub(r"\s+", " ", value).strip()
            j = k
        entries[m.group(2)] = fields
    return entries


def _last_names(authors: str) -> list[str]:
    names = []
    for a in re.split(r"\s+and\s+", authors):
        a = a.strip()
        if a.startswith("{") and a.endswith("}"):
            names.append(a[1:-1])
        elif "," in a:
            names.append(a.split(",")[0].strip())
        else:
            names.append(a.split()[-1])
    return [n.replace("{", "").replace("}", "") for n in names]


def cite_text(entry: dict[str, str]) -> str:
    names = _last_names(entry.get("author", entry.get("editor", "Anonymous")))
    who = (
        names[0]
        if len(names) == 1
        else f"{names[0]} and {names[1]}"
        if len(names) == 2
        else f"{names[0]} et al."
    )
    return f"{who}, {entry.get('year', 'n.d.')}"


def cite_url(entry: dict[str, str]) -> str | None:
    if entry.get("url"):
        return entry["url"]
    if entry.get("doi"):
        return "https://doi.org/" + entry["doi"]
    for f in ("eprint", "journal", "note", "howpublished"):
        m = re.search(r"(?:arXiv:)?(\d{4}\.\d{4,5})", entry.get(f, ""))
        if m and (f == "eprint" or "arxiv" in entry.get(f, "").lower()):
            return "https://arxiv.org/abs/" + m.group(1)
    return None


# --------------------------------------------------------------------------------------
# Glue values from an executed build
# --------------------------------------------------------------------------------------


def _glue_from_outputs(nb) -> dict[str, dict]:
    data = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            meta = out.get("metadata", {}).get("scrapbook")
            if meta:
                n = len(meta.get("mime_prefix", ""))
                data[meta["name"]] = {k[n:]: v for k, v in out.get("data", {}).items()}
    return data


def load_glue(
    stem: str,
    executed: Path | None,
    *,
    execute: bool = True,
    timeout: int = 600,
    book: Path = BOOK,
) -> dict[str, dict]:
    """The glued MIME bundles of ``book/<stem>.ipynb``: from ``executed`` if there, else
    by executing it."""
    if executed is not None:
        glue_json = executed / "book" / f"{stem}.glue.json"
        if glue_json.exists():
            raw = json.loads(glue_json.read_text(encoding="utf-8"))
            return {k: dict(v["data"]) for k, v in raw.items()}
        done = executed / "book" / f"{stem}.ipynb"
        if done.exists():
            return _glue_from_outputs(nbformat.read(done, as_version=4))
    if not execute:
        return {}
    import os

    import nbclient

    os.environ.setdefault("PLOTLY_RENDERER", "plotly_mimetype")
    nb = nbformat.read(book / f"{stem}.ipynb", as_version=4)
    nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(book)}},
    ).execute()
    return _glue_from_outputs(nb)


def glue_text(bundle: dict, fmt: str) -> str:
    # the book build's own formatting
    from myst_nb.core.variables import (
        format_plain_text,
    )

    return format_plain_text(bundle["text/plain"], fmt)


# --------------------------------------------------------------------------------------
# Labels of the whole book (for {numref}/{ref})
# --------------------------------------------------------------------------------------


def _markdown_sources(path: Path) -> list[str]:
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return [c.source for c in nb.cells if c.cell_type == "markdown"]
    return [path.read_text(encoding="utf-8")]


def collect_labels(book: Path = BOOK) -> dict[str, tuple[str, str]]:
    """label -> (page stem, title) for ``(label)=`` targets (title: the next heading)
    and ``:name:`` options."""
    labels = {}
    for path in sorted(book.glob("*.ipynb")) + sorted(book.glob("*.md")):
        for src in _markdown_sources(path):
            for m in TARGET.finditer(src):
                heading = re.search(r"^#+\s+(.+)$", src[m.end() :], re.M)
                labels[m.group("label")] = (
                    path.stem,
                    heading.group(1).strip() if heading else m.group("label"),
                )
            for m in re.finditer(r"^[ \t]*:name:[ \t]*(\S+)", src, re.M):
                labels[m.group(1)] = (path.stem, m.group(1))
    return labels


# --------------------------------------------------------------------------------------
# Markdown conversion
# --------------------------------------------------------------------------------------


@dataclass
class Context:
    stem: str
    glue: dict[str, dict]
    bib: dict[str, dict[str, str]]
    labels: dict[str, tuple[str, str]]
    urls: Urls
    # label -> number on this page
    figures: dict[str, int] = field(default_factory=dict)
    # stems that have a reader notebook
    notebooks: set[str] = field(default_factory=set)
    # the edition: the words this script adds (WORDS)
    lang: str = "en"


class ReaderEditionError(ValueError):
    pass


def _split_title(body: str) -> tuple[str | None, str]:
    m = re.match(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$", body, re.S)
    return (m.group("title"), m.group("target")) if m else (None, body)


def _role(m: re.Match, ctx: Context) -> str:
    name, body = m.group("name"), m.group("body")
    if name in ("glue", "glue:text", "glue:md", "glue:any"):
        key, fmt = (body.rsplit(":", 1) + [""])[:2] if ":" in body else (body, "")
        if name == "glue:md":
            key, fmt = body.split(":", 1)[0], ""
        if "::" in key:
            raise ReaderEditionError(
                f"{ctx.stem}: glue from another document is not supported: {body!r}"
            )
        if key not in ctx.glue:
            raise ReaderEditionError(
                f"{ctx.stem}: no glued value {key!r} in the executed notebook"
            )
        bundle = ctx.glue[key]
        if name == "glue:md":
            return bundle.get("text/markdown", glue_text(bundle, ""))
        return glue_text(bundle, fmt or "")
    if name.startswith("cite"):
        parts = []
        for key in (k.strip() for k in body.split(",")):
            if key not in ctx.bib:
                raise ReaderEditionError(
                    f"{ctx.stem}: citation {key!r} is not in references.bib"
                )
            text, url = (
                cite_text(ctx.bib[key]),
                cite_url(ctx.bib[key]) or ctx.urls.page("references"),
            )
            parts.append(f"[{text}]({url})")
        if name == "cite:t":
            return "; ".join(parts)
        return "(" + "; ".join(parts) + ")"
    if name in ("numref", "ref", "numref:any"):
        title, label = _split_title(body)
        if label not in ctx.labels:
            raise ReaderEditionError(f"{ctx.stem}: unknown label {label!r}")
        stem, heading = ctx.labels[label]
        if title is None:
            if label in ctx.figures and stem == ctx.stem:
                title = f"{word(ctx.lang, 'Figure')} {ctx.figures[label]}"
            else:
                title = word(ctx.lang, "Figure") if name == "numref" else heading
        title = title.replace("%s", str(ctx.figures.get(label, ""))).replace(
            "{number}", str(ctx.figures.get(label, ""))
        )
        return f"[{title}]({ctx.urls.page(stem, label)})"
    if name == "doc":
        title, target = _split_title(body)
        stem = Path(target).stem
        return f"[{title or stem}]({_page_link(stem, '', ctx)})"
    if name in ("math", "eq"):
        return f"${body}$" if name == "math" else body
    raise ReaderEditionError(f"{ctx.stem}: no conversion for role {{{name}}}")


def _page_link(stem: str, anchor: str, ctx: Context) -> str:
    if stem in ctx.notebooks and not anchor:
        return ctx.urls.colab(stem)
    return ctx.urls.page(stem, anchor)


def _link(m: re.Match, ctx: Context) -> str:
    href = m.group("href")
    if re.match(r"^[a-z]+:", href) or href.startswith("#"):
        return m.group(0)
    path, _, anchor = href.partition("#")
    if Path(path).suffix in (".md", ".ipynb"):
        return f"[{m.group('text')}]({_page_link(Path(path).stem, anchor, ctx)})"
    return m.group(0)


def _figure(name: str, arg: str, options: dict, body: str, ctx: Context) -> str:
    key = arg.strip()
    if key not in ctx.glue:
        raise ReaderEditionError(f"{ctx.stem}: no glued figure {key!r}")
    bundle = ctx.glue[key]
    label = options.get("name")
    number = len(ctx.figures) + 1
    if label:
        ctx.figures[label] = number
    alt = html.escape(options.get("alt") or f"Figure {number}", quote=True)
    if "image/png" in bundle:
        img = (
            f'<img src="data:image/png;base64,{bundle["image/png"].strip()}" '
            f'alt="{alt}">'
        )
    elif "image/svg+xml" in bundle:
        svg = bundle["image/svg+xml"]
        svg = "".join(svg) if isinstance(svg, list) else svg
        img = (
            "<img "
            'src="data:image/svg+xml;base64,'
            f'{base64.b64encode(svg.encode()).decode()}" '
            f'alt="{alt}">'
        )
    else:
        raise ReaderEditionError(f"{ctx.stem}: glued figure {key!r} has no PNG/SVG")
    caption = convert_markdown(body.strip(), ctx) if ctx.lang != "en" else body.strip()
    return f"{img}\n\n**{word(ctx.lang, 'Figure')} {number}.** {caption}".rstrip()


def _literalinclude(arg: str, options: dict, ctx: Context) -> str:
    path = (BOOK / arg.strip()).resolve()
    source = path.read_text(encoding="utf-8")
    if "pyobject" in options:
        tree = ast.parse(source)
        node = next(
            (
                n
                for n in ast.walk(tree)
                if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                and n.name == options["pyobject"]
            ),
            None,
        )
        if node is None:
            raise ReaderEditionError(
                f"{ctx.stem}: {options['pyobject']!r} not found in {arg}"
            )
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        source = "\n".join(source.splitlines()[start - 1 : node.end_lineno])
    return (
        f"```{options.get('language', 'python')}\n"
        f"{textwrap.dedent(source).rstrip()}\n```"
    )


def _directive(name: str, arg: str, options: dict, body: str, ctx: Context) -> str:
    if name == "glue:figure":
        return _figure(name, arg, options, body, ctx)
    if name in ("exercise", "solution"):
        title = word(ctx.lang, "Exercise" if name == "exercise" else "Solution")
        if arg.strip() and name == "exercise":
            title += f": {arg.strip()}"
        text = convert_markdown(body, ctx).strip()
        if name == "solution":
            return (
                f"<details><summary><b>{title}</b>"
                f"{word(ctx.lang, 'click to show')}</summary>"
                f"\n\n{text}\n\n</details>"
            )
        return f"**{title}.** {text}"
    if name in ADMONITIONS:
        title = (
            arg.strip()
            if name == "admonition"
            else (arg.strip() or WORDS[ctx.lang].get(name, name.capitalize()))
        )
        text = convert_markdown(body, ctx).strip()
        return "\n".join(
            "> " + line if line else ">" for line in f"**{title}.** {text}".splitlines()
        )
    if name in ("math",):
        return f"$$\n{body.strip()}\n$$"
    if name in ("code", "code-block", "sourcecode"):
        return f"```{arg.strip()}\n{body.rstrip()}\n```"
    if name == "literalinclude":
        return _literalinclude(arg, options, ctx)
    if name in ("figure", "image"):
        alt = options.get("alt", "")
        return (
            f"![{alt}]({arg.strip()})\n\n{convert_markdown(body, ctx).strip()}".rstrip()
        )
    raise ReaderEditionError(f"{ctx.stem}: no conversion for directive {{{name}}}")


def _convert_directives(text: str, ctx: Context) -> str:
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        m = DIRECTIVE_OPEN.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        fence, indent = m.group("fence"), m.group("indent")
        close = re.compile(
            rf"^{re.escape(indent)}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$"
        )
        j, depth = i + 1, 0
        while j < len(lines):
            inner = DIRECTIVE_OPEN.match(lines[j])
            if inner and inner.group("fence") == fence:
                depth += 1
            elif close.match(lines[j]):
                if depth == 0:
                    break
                depth -= 1
            j += 1
        if j == len(lines):
            raise ReaderEditionError(
                f"{ctx.stem}: unclosed directive {{{m.group('name')}}}"
            )
        body_lines, options = lines[i + 1 : j], {}
        while body_lines and re.match(r"^[ \t]*:[\w\-]+:", body_lines[0]):
            k, _, v = body_lines.pop(0).strip()[1:].partition(":")
            options[k] = v.strip()
        while body_lines and re.match(
            r"^---\s*$", body_lines[0] or ""
        ):  # YAML options block
            end = body_lines.index("---", 1)
            options.update(yaml.safe_load("\n".join(body_lines[1:end])) or {})
            body_lines = body_lines[end + 1 :]
        out.append(
            _directive(
                m.group("name"), m.group("arg"), options, "\n".join(body_lines), ctx
            )
        )
        i = j + 1
    return "\n".join(out)


def convert_markdown(text: str, ctx: Context) -> str:
    text = _convert_directives(text, ctx)
    text = TARGET.sub("", text)
    text = EQ_LABEL.sub("$$", text)
    text = ROLE.sub(lambda m: _role(m, ctx), text)
    text = LINK.sub(lambda m: _link(m, ctx), text)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def leftover_myst(text: str) -> list[str]:
    """MyST left in a Markdown string: roles, directives, ``(label)=`` targets, labelled
    equations."""
    found = [m.group(0) for m in ROLE.finditer(text)]
    found += [
        m.group(0) for line in text.split("\n") if (m := DIRECTIVE_OPEN.match(line))
    ]
    found += [m.group(0) for m in TARGET.finditer(text)]
    found += [m.group(0) for m in EQ_LABEL.finditer(text)]
    found += re.findall(r"\{\{[^}]*\}\}", text)
    return found


# --------------------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------------------


def collapse(cell, title: str, lang: str = "en", *, silent: bool = False) -> None:
    """Collapse a code cell in Colab (form) and JupyterLab/Notebook 7 (source_hidden);
    it still runs. ``silent``: it runs without showing any output (a solution: what it
    prints is the answer), its title saying how to see the output."""
    src = cell.source
    if not src.startswith(("#@title", SILENT)):
        hint = word(lang, "runs silently" if silent else "double-click")
        cell.source = f"#@title {title}{hint}\n" + src
    if silent and not cell.source.startswith(SILENT):
        if src.lstrip().startswith("%%"):
            raise ReaderEditionError(
                f"a solution cell cannot start with a magic of its own: {src[:80]!r}"
            )
        # IPython runs a cell magic only from a cell's first line: the title follows
        cell.source = SILENT + cell.source
    cell.metadata["cellView"] = "form"
    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True


def convert_notebook(nb, ctx: Context):
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    cells = []
    for cell in nb.cells:
        tags = list(cell.metadata.get("tags", []))
        if cell.cell_type == "markdown":
            cell.source = convert_markdown(cell.source, ctx)
            cell.pop("attachments", None) if not cell.get("attachments") else None
        elif cell.cell_type == "code":
            if (
                PUBLISH_TAG in tags
            ):  # glue() for the site; its numbers are already filled in above
                continue
            cell.outputs, cell.execution_count = [], None
            for tag, title in COLLAPSED_TAGS.items():
                if tag in tags:
                    collapse(
                        cell,
                        word(ctx.lang, title),
                        ctx.lang,
                        silent=tag == "solution",
                    )
                    break
            if "hide-output" in tags:
                cell.metadata.setdefault("jupyter", {})["outputs_hidden"] = True
            # book-build tags mean nothing here: the live widgets run, nothing is
            # removed
            tags = [
                t
                for t in tags
                if t
                not in (
                    "skip-execution",
                    "remove-cell",
                    "remove-input",
                    "remove-output",
                )
            ]
            if tags:
                cell.metadata["tags"] = tags
            else:
                cell.metadata.pop("tags", None)
        cells.append(cell)
    title = next(
        (
            re.sub(r"^#+\s*", "", line)
            for c in cells
            if c.cell_type == "markdown"
            for line in c.source.splitlines()
            if line.startswith("#")
        ),
        ctx.stem,
    )
    header = nbformat.v4.new_markdown_cell(
        word(ctx.lang, "header").format(
            title=title, page=ctx.urls.page(ctx.stem), colab=ctx.urls.colab(ctx.stem)
        )
    )
    header["id"] = "reader-edition-header"
    nb.cells = [header] + cells
    nb.metadata.pop("widgets", None)
    nb.metadata["colab"] = {"provenance": [], "name": f"{ctx.stem}.ipynb"}
    # python -m dpo_grpo.exercises student makes the handouts from this edition only
    nb.metadata["dpo_grpo"] = {"edition": "reader", "lang": ctx.lang}
    problems = [
        f"{ctx.stem}: {x!r}"
        for c in nb.cells
        if c.cell_type == "markdown"
        for x in leftover_myst(c.source)
    ]
    if problems:
        raise ReaderEditionError(
            "MyST left in the reader edition: " + "; ".join(problems[:10])
        )
    return nb


BINDER_REQUIREMENTS = (
    "# repo2docker (Binder) environment of the reader edition (written by "
    "scripts/reader_edition.py); zh: the CJK font of the Chinese notebooks' figures\n"
    """--extra-index-url https://download.pytorch.org/whl/cpu
torch=={torch}
dpo-grpo[jupyter,zh] @ git+{url}@{branch}
"""
)


def binder_requirements(urls: Urls, branch: str = "main", torch: str = "2.13.0") -> str:
    return BINDER_REQUIREMENTS.format(url=urls.repository, branch=branch, torch=torch)


#: The Chinese edition (``--lang zh``): its source (scripts/zh_edition.py), executed
#: build and output.
ZH_DEFAULTS = {
    "book": ROOT / "_build" / "zh_src" / "book",
    "executed": ROOT / "_build" / "zh" / "_build" / "jupyter_execute",
    "out": ROOT / "_build" / "notebooks" / "zh",
    "prefix": "zh/",
}


def build(
    out: Path,
    executed: Path | None = None,
    *,
    execute: bool = True,
    stems=None,
    book: Path = BOOK,
    lang: str = "en",
) -> list[Path]:
    """Write the reader notebooks of ``book`` (the English ``book/``, or the Chinese
    edition's source with ``lang="zh"``) into ``out``."""
    word(lang, "Figure")  # a clear error for an unknown lang
    prefix = ZH_DEFAULTS["prefix"] if lang == "zh" else ""
    urls, bib = (
        Urls.from_config(prefix=prefix),
        parse_bib((BOOK / "references.bib").read_text(encoding="utf-8")),
    )
    if lang == "en":  # one Binder environment for the branch, at its top
        (out / "binder").mkdir(parents=True, exist_ok=True)
        (out / "binder" / "requirements.txt").write_text(
            binder_requirements(urls), encoding="utf-8"
        )
    labels, notebooks = collect_labels(book), {p.stem for p in book.glob("*.ipynb")}
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for stem in sorted(stems or notebooks):
        nb = nbformat.read(book / f"{stem}.ipynb", as_version=4)
        ctx = Context(
            stem,
            load_glue(stem, executed, execute=execute, book=book),
            bib,
            labels,
            urls,
            notebooks=notebooks,
            lang=lang,
        )
        reader = convert_notebook(nb, ctx)
        path = out / f"{stem}.ipynb"
        path.write_text(
            json.dumps(reader, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        written.append(path)
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--executed",
        type=Path,
        default=None,
        help=(
            "myst-nb's executed notebooks (make book; default _build/jupyter_execute, "
            "with --lang zh _build/zh/_build/jupyter_execute); missing ones are "
            "executed here"
        ),
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default _build/notebooks (with --lang zh: _build/notebooks/zh)",
    )
    ap.add_argument(
        "--lang",
        choices=LANGUAGES,
        default="en",
        help=(
            "zh: the Chinese edition, from _build/zh_src/book (scripts/zh_edition.py "
            "generate)"
        ),
    )
    ap.add_argument(
        "--no-execute", action="store_true", help="fail instead of executing a notebook"
    )
    ap.add_argument(
        "stems", nargs="*", help="notebook names without .ipynb (default: all of book/)"
    )
    a = ap.parse_args(argv)
    zh = a.lang == "zh"
    executed = a.executed or (
        ZH_DEFAULTS["executed"] if zh else ROOT / "_build" / "jupyter_execute"
    )
    out = a.out or (ZH_DEFAULTS["out"] if zh else ROOT / "_build" / "notebooks")
    book = ZH_DEFAULTS["book"] if zh else BOOK
    try:
        for p in build(
            out,
            executed,
            execute=not a.no_execute,
            stems=a.stems or None,
            book=book,
            lang=a.lang,
        ):
            print("wrote", p.relative_to(ROOT) if p.is_relative_to(ROOT) else p)
    except ReaderEditionError as exc:
        print("reader edition:", exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
