"""The handouts: the student edition and the graded edition, each notebook of the reader
edition with its ``solution`` cells removed and outputs cleared.

    python -m dpo_grpo.exercises student _build/notebooks _build/student [--graded]

They are made from the **reader edition** (``make notebooks`` writes it to
``_build/notebooks/``, the Chinese one to ``_build/notebooks/zh/``; the Pages workflow
publishes it on the ``notebooks`` branch), never from ``book/``: the chapters' sources
hold MyST (``{glue:text}`` numbers, ``{cite}``, cross-references) that Jupyter and Colab
show as raw text, where the reader edition has the numbers filled in and citations and
references as links. A folder of anything else is refused. Only notebooks are written:
nothing else of the input folder (the teachers' notes least of all) reaches the
students' folder. A notebook is read and written as JSON, so making a handout needs the
package alone (``pip install dpo-grpo``: numpy).

The *graded* edition (``graded=True``) also imports ``check`` from :mod:`.record`, which
records answers for the grader and gives no feedback: it consults no key, so it is no
oracle. Hand it out when marks count.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

SOLUTION_TAG = "solution"
SELF_CHECK_IMPORT = "from dpo_grpo.exercises import check"
GRADED_IMPORT = "from dpo_grpo.exercises.record import check"
#: The notebook metadata key the reader edition (scripts/reader_edition.py) writes:
#: ``{"edition": "reader", "lang": "en" | "zh"}``.
EDITION_KEY = "dpo_grpo"
#: The first cell of a reader notebook (it links the online book and the reader
#: edition in Colab, both with their solutions): replaced by the handout's own.
READER_HEADER_ID = "reader-edition-header"
HEADERS = {
    "en": {
        "student": (
            "Student edition of *{title}*: the exercises without their solutions. "
            "Run the first code cell first; `check(...)` says whether an answer is "
            "right."
        ),
        "graded": (
            "Graded edition of *{title}*: the exercises without their solutions. Run "
            "the first code cell first; `check(...)` records your answer for grading "
            "and does not say whether it is right."
        ),
    },
    "zh": {
        "student": (
            "*{title}* 的学生版：只有练习，没有解答。请先运行第一个代码单元；"
            "`check(...)` 会告诉你答案是否正确。"
        ),
        "graded": (
            "*{title}* 的评分版：只有练习，没有解答。请先运行第一个代码单元；"
            "`check(...)` 只记录你的答案以供评分，不告诉你是否正确。"
        ),
    },
}


class NotAReaderEdition(ValueError):
    """The input folder is not the reader edition (``make notebooks``)."""


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def strip_solutions(nb):
    """Return a copy of notebook ``nb`` (a dict, or an nbformat node) without solution
    cells and without outputs."""
    out = copy.deepcopy(nb)
    out["cells"] = [
        c
        for c in out["cells"]
        if SOLUTION_TAG not in c.get("metadata", {}).get("tags", [])
    ]
    for c in out["cells"]:
        if c["cell_type"] == "code":
            c["outputs"] = []
            c["execution_count"] = None
    return out


def without_self_check(nb):
    """``nb`` (changed in place and returned) with every import of the self-check
    ``check`` replaced by the graded edition's (:mod:`.record`)."""
    for c in nb["cells"]:
        if c["cell_type"] == "code" and SELF_CHECK_IMPORT in _source(c):
            lines = [
                GRADED_IMPORT if ln.strip() == SELF_CHECK_IMPORT else ln
                for ln in _source(c).split("\n")
            ]
            c["source"] = "\n".join(lines)
            if SELF_CHECK_IMPORT in c["source"]:
                raise ValueError(
                    "cannot replace an import of check in this cell: "
                    f"{c['source'][:200]!r}"
                )
    return nb


def reader_language(nb, path: Path | str = "notebook") -> str:
    """The language of reader-edition notebook ``nb``; :class:`NotAReaderEdition` if it
    is not one."""
    edition = nb.get("metadata", {}).get(EDITION_KEY, {})
    if edition.get("edition") != "reader" or edition.get("lang") not in HEADERS:
        raise NotAReaderEdition(
            f"{path} is not a notebook of the reader edition (the book's sources in "
            "book/ hold MyST, which Jupyter and Colab show as raw text): run `make "
            "notebooks` first and pass its folder, _build/notebooks (the Chinese "
            "edition: _build/notebooks/zh), or a checkout of the `notebooks` branch"
        )
    return edition["lang"]


def _title(nb, fallback: str) -> str:
    for c in nb["cells"]:
        if c["cell_type"] == "markdown" and c.get("id") != READER_HEADER_ID:
            m = re.search(r"^#+\s+(.+)$", _source(c), re.MULTILINE)
            if m:
                return m.group(1).strip()
    return fallback


def handout(nb, *, graded: bool = False, path: Path | str = "notebook"):
    """The student (or ``graded``) edition of reader-edition notebook ``nb`` (a dict
    read from JSON); :class:`NotAReaderEdition` if ``nb`` is not one."""
    lang = reader_language(nb, path)
    out = strip_solutions(nb)
    kind = "graded" if graded else "student"
    header = {
        "cell_type": "markdown",
        "id": f"{kind}-edition-header",
        "metadata": {},
        "source": HEADERS[lang][kind].format(title=_title(out, Path(path).stem)),
    }
    out["cells"] = [header] + [
        c for c in out["cells"] if c.get("id") != READER_HEADER_ID
    ]
    out["metadata"][EDITION_KEY] = {"edition": kind, "lang": lang}
    return without_self_check(out) if graded else out


def write_student_edition(reader_dir, out_dir, *, graded: bool = False) -> list[Path]:
    """Write the student edition of every notebook of the reader edition in
    ``reader_dir`` (``make notebooks``: ``_build/notebooks``) to ``out_dir``; return the
    written paths. ``graded``: the graded edition (no self-check key: see the module
    docstring). Nothing is written unless every notebook is of the reader edition."""
    if not isinstance(graded, bool):
        raise TypeError(f"graded must be a bool, got {type(graded).__name__}")
    reader_dir, out_dir = Path(reader_dir), Path(out_dir)
    if not reader_dir.is_dir():
        raise ValueError(
            f"reader_dir must be the folder of the reader edition (make notebooks: "
            f"_build/notebooks), got {reader_dir}"
        )
    paths = sorted(reader_dir.glob("*.ipynb"))
    if not paths:
        raise NotAReaderEdition(
            f"{reader_dir} holds no notebook: run `make notebooks` first and pass "
            "_build/notebooks (the Chinese edition: _build/notebooks/zh)"
        )
    handouts = {
        path.name: handout(
            json.loads(path.read_text(encoding="utf-8")), graded=graded, path=path
        )
        for path in paths
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, nb in handouts.items():
        target = out_dir / name
        target.write_text(
            json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        written.append(target)
    return written
