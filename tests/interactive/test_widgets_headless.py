"""Headless execution of the live-widget cells never waits for a timeout
(jupyter/nbclient#312).

The stall: a cell whose widgets capture a display with ``with output:`` makes nbclient
imitate a frontend by sending ``comm_msg`` on the kernel's shell socket from its IOPub
task while another task awaits ``execute_reply`` on the same socket; that receive then
sometimes wakes only at the cell timeout, and nbclient returns the cell as if nothing
happened. Measured here before the fix: 2 stalls in 10 runs of three widget cells. The
widgets now set their ``Output.outputs`` instead
(``dpo_grpo.interactive.widgets.display_data``). Both ways a UI shows its figure
(``widgets.live_figure_mode``: the ``Output``, or a plotly ``FigureWidget`` updated in
place) are run.

What runs: every cell of every chapter that builds a live widget (the cells tagged
``skip-execution`` that the book build skips and a reader runs), five times, through
nbclient with the widget mimicry on (the code path that stalls). Only these cells,
because the stall is per cell and needs widget output; the rest of each chapter is
executed by the book build. One kernel per mode runs every chapter's cells in turn, its
namespace emptied (``%reset -f``) before each chapter, so each chapter's cells still
run on their own (a kernel per chapter cost 26 kernel starts). A stalled cell is
detected by its lag: the time from the kernel's ``execute_reply`` (kernel clock, same
machine) to nbclient returning the cell. A healthy lag is milliseconds; a stall is the
whole timeout. The short ``TIMEOUT`` bounds the cost of a failure.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[2]
REPEATS = 5
TIMEOUT = 30  # seconds per cell; one widget cell takes < 1 s of CPU here
# seconds from the kernel's reply to nbclient returning the cell (a stall waits TIMEOUT)
MAX_LAG = 3.0


def _live_widget_cells(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    return [
        c.source
        for c in nb.cells
        if c.cell_type == "code"
        and "skip-execution" in c.metadata.get("tags", [])
        and "widget" in c.source
    ]


WIDGET_CHAPTERS = [
    p for p in sorted((ROOT / "book").glob("*.ipynb")) if _live_widget_cells(p)
]


def test_the_widget_chapters_are_found():
    names = {p.stem for p in WIDGET_CHAPTERS}
    assert {"06_costs_and_limits", "03b_grpo_derivations", "explorables"} <= names


class _TimedClient(nbclient.NotebookClient):
    """Records, per executed cell, the seconds from the kernel's execute_reply to the
    cell being returned (``lags``) and when it was returned (``done``, time.monotonic);
    ``started``: when the kernel was ready."""

    lags: list[float]
    done: list[float]
    started: float

    async def async_start_new_kernel_client(self):
        client = await super().async_start_new_kernel_client()
        self.started = time.monotonic()
        return client

    async def async_execute_cell(self, cell, cell_index, *args, **kwargs):
        cell = await super().async_execute_cell(cell, cell_index, *args, **kwargs)
        if cell.cell_type == "code":
            reply = datetime.fromisoformat(
                cell.metadata["execution"]["shell.execute_reply"].replace("Z", "+00:00")
            )
            self.lags.append(time.time() - reply.timestamp())
            self.done.append(time.monotonic())
        return cell


@pytest.mark.parametrize("mode", ["output", "figurewidget"])
def test_widget_cells_run_headless_repeatedly_without_a_stall(mode, monkeypatch):
    if mode == "figurewidget":
        pytest.importorskip("anywidget")
    monkeypatch.setenv("PLOTLY_RENDERER", "plotly_mimetype")
    monkeypatch.setenv("DPO_GRPO_LIVE_FIGURE", mode)  # the kernel inherits it
    nb = nbformat.v4.new_notebook(
        metadata={
            "kernelspec": {
                "name": "python3",
                "display_name": "Python 3",
                "language": "python",
            }
        }
    )
    chapter_of = []  # the chapter of each code cell, in order
    for path in WIDGET_CHAPTERS:
        cells = _live_widget_cells(path)
        sources = ["%reset -f", *(src for _ in range(REPEATS) for src in cells)]
        nb.cells += [nbformat.v4.new_code_cell(src) for src in sources]
        chapter_of += [path.name] * len(sources)
    client = _TimedClient(
        nb,
        timeout=TIMEOUT,
        kernel_name="python3",
        record_timing=True,
        resources={"metadata": {"path": str(ROOT)}},
    )
    client.lags, client.done = [], []
    client.execute()
    assert len(client.lags) == len(chapter_of)
    worst = max(range(len(chapter_of)), key=client.lags.__getitem__)
    assert client.lags[worst] < MAX_LAG, (
        f"{chapter_of[worst]}: a cell returned {client.lags[worst]:.1f} s after the "
        "kernel replied (stall)"
    )
    # each chapter's cells, from the end of the previous chapter's
    ends = {name: t for name, t in zip(chapter_of, client.done)}
    starts = [client.started, *list(ends.values())[:-1]]
    for (name, end), start in zip(ends.items(), starts):
        assert end - start < TIMEOUT * 2, f"{name}: {end - start:.0f} s"
    n_widget_cells = len(chapter_of) - len(WIDGET_CHAPTERS)  # less the resets
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    if mode == "output":
        # the widgets still show their figure: every Output holds one plotly display,
        # set without capture
        outputs = [
            m["state"]["outputs"]
            for m in state.values()
            if m["model_name"] == "OutputModel"
        ]
        assert len(outputs) == n_widget_cells
        for out in outputs:
            assert (
                len(out) == 1 and "application/vnd.plotly.v1+json" in out[0]["data"]
            ), out
    else:  # one FigureWidget per UI, holding the figure's traces
        figures = [m["state"] for m in state.values() if "_widget_data" in m["state"]]
        assert len(figures) == n_widget_cells
        assert all(f["_widget_data"] for f in figures)
