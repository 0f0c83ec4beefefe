"""Helpers the tests import by name (``from testing_support import run_checked``):
tests/conftest.py puts tests/ on ``sys.path`` (pytest runs in importlib mode, so test
files may share a basename across the layer folders)."""

import ast
import contextlib
import functools
import http.server
import os
import re
import subprocess
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

# the notebooks' dotted names, as scripts/code_stats.py reads them (scripts/ is on
# sys.path: conftest.py); re-exported for the tests
from code_stats import dotted_name as dotted_name
from code_stats import resolve_dotted as resolve_dotted

#: Headless Chromium for the browser tests (tests/browser/): Debian's package, which
#: .ci/run installs, started with the flags that keep it from reaching the network by
#: itself (no QUIC, component updates, sync or background requests).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def skip_without_chromium():
    """Skip the calling test module when Chromium or Playwright is missing; return
    ``playwright.sync_api``."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"Chromium is not installed at {CHROMIUM} (.ci/run installs it)",
            allow_module_level=True,
        )
    return pytest.importorskip("playwright.sync_api")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve_directory(directory):
    """Serve ``directory`` on 127.0.0.1 (a free port) for the block; yields its base
    URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def local_only_route(site: str, blocked: list):
    """A Playwright route handler that lets through requests to ``site`` (and
    data:/blob: URLs) and aborts every other, recording its URL in ``blocked``."""
    host = urlparse(site)

    def route(r):
        url = urlparse(r.request.url)
        if url.scheme in ("data", "blob") or (url.hostname, url.port) == (
            host.hostname,
            host.port,
        ):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    return route


def run_checked(cmd, **kw) -> subprocess.CompletedProcess:
    """Run ``cmd`` without this session's ``PYTHONPATH`` (``make test`` puts the
    checkout's wheel there, and a pip in another venv would take it for an installed
    package); on failure raise with the tail of its output."""
    kw.setdefault("env", {k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if result.returncode:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} failed:\n"
            f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        )
    return result


def read_pins(path) -> dict[str, str]:
    """``{name: version}`` of the ``name==version`` lines of a requirements file."""
    return dict(
        line.split("==")
        for line in Path(path).read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )


#: target token per prompt of the toy GRPO pipeline's verifier reward (6 prompts)
TOY_TARGETS = [1, 2, 3, 4, 1, 2]


def toy_reward_fns():
    """The toy pipeline's two reward functions: the verifier of :data:`TOY_TARGETS` and
    a length penalty."""
    from dpo_grpo.chapters import scoring

    return [scoring.target_token_reward(TOY_TARGETS), scoring.length_penalty()]


def toy_rollout(seed=0, theta=None, **kw):
    """``(theta, rollout)``: a random (6, 5, 5) logits table (unless ``theta`` is given)
    and 4 completions for each of prompts 1 and 4, sampled with ``seed``."""
    import numpy as np

    from dpo_grpo.chapters import rollout

    rng = np.random.default_rng(seed)
    th = rng.normal(0, 0.5, (6, 5, 5)) if theta is None else theta
    return th, rollout.sample_rollout(th, np.array([1, 4]), 4, rng, **kw)


def toc_files(node):
    """Every ``file:`` (and the ``root``) of a parsed ``_toc.yml``, in order."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("file", "root"):
                yield value
            else:
                yield from toc_files(value)
    elif isinstance(node, list):
        for item in node:
            yield from toc_files(item)


def record_chinese_misses(monkeypatch, tmp_path) -> Path:
    """Switch to Chinese (``DPO_GRPO_LANG=zh``) with ``tr()``'s record of untranslated
    strings on and empty; returns the record's path (absent while nothing is missed)."""
    from dpo_grpo import i18n

    misses = tmp_path / "misses.txt"
    monkeypatch.setattr(i18n, "_RECORDED", set())
    monkeypatch.setenv("DPO_GRPO_I18N_MISSES", str(misses))
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    return misses


def drawn_as_boxes(fig) -> list[str]:
    """What matplotlib says it drew as a box when ``fig`` is drawn on a new renderer
    (matplotlib warns when it first measures a text on a renderer): its "Glyph …
    missing from font(s)" warnings and mathtext's "does not have a glyph" log lines
    (checked apart from ``dpo_grpo.i18n.check_glyphs``, which the figures call)."""
    import logging
    import warnings

    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.mathtext import MathTextParser

    class Lines(logging.Handler):
        def __init__(self):
            super().__init__(logging.WARNING)
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    MathTextParser._parse_cached.cache_clear()  # a cached parse logs nothing
    log, lines = logging.getLogger("matplotlib.mathtext"), Lines()
    log.addHandler(lines)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig.draw(RendererAgg(*(round(x) for x in fig.bbox.size), fig.dpi))
    finally:
        log.removeHandler(lines)
    said = [str(w.message) for w in caught] + lines.lines
    return [s for s in said if "missing from font" in s or "not have a glyph" in s]


# --------------------------------------------------------------------------------------
# A notebook's code read statically: its imports and the package names they bind
# (tests/book/test_shown_is_run.py, tests/book/test_prose_names.py)
# --------------------------------------------------------------------------------------


def parse_cell(source: str):
    """The syntax tree of a code cell, its IPython magics and shell lines read as
    ``pass``; None for a cell that is not Python."""
    try:
        return ast.parse(re.sub(r"^([ \t]*)[%!].*$", r"\1pass", source, flags=re.M))
    except SyntaxError:
        return None


class ImportAliases:
    """A notebook's import aliases, learnt cell by cell: ``dg`` -> ``dpo_grpo``,
    ``dpo`` -> ``dpo_grpo.reference.dpo``, ..."""

    def __init__(self):
        self.alias: dict[str, str] = {}

    def learn(self, tree) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.alias[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.alias[a.asname or a.name] = f"{node.module}.{a.name}"

    def path(self, dotted: str) -> str | None:
        """The full dotted path of ``dotted`` (``dpo.dpo_loss``), or None when its head
        is no alias."""
        head, _, rest = dotted.partition(".")
        if head not in self.alias:
            return None
        return self.alias[head] + (f".{rest}" if rest else "")


def nbmake_runs(report) -> dict[str, list[str]]:
    """The notebooks of nbmake's JUnit report (``scripts/build_book.py``), as
    ``edition/stem`` (``en/04_code``), each with the outcomes of its runs (``passed``,
    ``failed``, ``skipped``). nbmake names a test by its notebook's path, dotted:
    ``_executed.en.book.04_code.ipynb``."""
    import xml.etree.ElementTree as ET

    runs: dict[str, list[str]] = {}
    for case in ET.parse(report).iter("testcase"):
        parts = case.get("classname", "").split(".")
        edition = parts[parts.index("book") - 1] if "book" in parts[1:] else "?"
        stem = case.get("name", "").removesuffix(".ipynb")
        failed = case.find("failure") is not None or case.find("error") is not None
        skipped = case.find("skipped") is not None
        runs.setdefault(f"{edition}/{stem}", []).append(
            "failed" if failed else "skipped" if skipped else "passed"
        )
    return runs


def literal_strings(root) -> dict[str, str]:
    """English text -> 'file:line' of every string literal passed as first argument to
    ``tr`` or ``N_`` in the Python files below the folder ``root``."""
    root = Path(root)
    found = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("tr", "N_")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.setdefault(
                    node.args[0].value, f"{path.relative_to(root)}:{node.lineno}"
                )
    return found


@functools.cache
def unisolated_grading() -> bool:
    """Whether this machine offers the grader only the ``basic`` sandbox (not root, no
    bubblewrap), where it refuses to grade unless told ``--unisolated``
    (``book/teaching.md``): the grading tests then pass that flag, as a teacher on such
    a machine would."""
    from dpo_grpo.exercises.sandbox import detect_mode

    return detect_mode() == "basic"


def grade_command(*args) -> list:
    """``python -m dpo_grpo.exercises grade ARGS`` (with ``--unisolated`` where
    :func:`unisolated_grading`)."""
    import sys

    flags = ["--unisolated"] if unisolated_grading() else []
    return [
        sys.executable,
        "-m",
        "dpo_grpo.exercises",
        "grade",
        *flags,
        *map(str, args),
    ]


#: the data folder of the checkout: what the package ships, and what a command that
#: reruns a benchmark or a sweep must leave alone unless told to write it
SHIPPED_DATA = Path(__file__).resolve().parents[1] / "code" / "dpo_grpo" / "data"


@contextlib.contextmanager
def files_kept(*folders):
    """Snapshot every file under ``folders`` (default :data:`SHIPPED_DATA` and the
    imported package's data folder; ``__pycache__`` aside); yield a function that
    lists, as sorted strings, the files written, added or removed since. On exit every
    file is put back as it was and the added ones are removed, so a test of a command
    that must not write there leaves the shipped data intact even when it fails."""
    import dpo_grpo.data

    folders = folders or (SHIPPED_DATA, Path(dpo_grpo.data.__file__).parent)
    roots = list(dict.fromkeys(Path(f).resolve() for f in folders))

    def files() -> dict:
        return {
            p: p.read_bytes()
            for root in roots
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }

    before = files()

    def changed() -> list:
        now = files()
        return sorted(
            str(p) for p in before.keys() | now.keys() if before.get(p) != now.get(p)
        )

    try:
        yield changed
    finally:
        for p in set(files()) - set(before):
            p.unlink()
        for p, data in before.items():
            if not p.is_file() or p.read_bytes() != data:
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(data)


# --------------------------------------------------------------------------------------
# GRPO batches and TRL's fixture cases, as every layer's loss tests read them
# (tests/reference, tests/trl_exact, tests/torch_ops, tests/package/test_layers.py)
# --------------------------------------------------------------------------------------

#: TRL 1.16.0's fixtures as the package ships them (scripts/make_trl_fixtures.py)
TRL_FIXTURES = SHIPPED_DATA / "trl_fixtures"


def grpo_batch(seed=0, b=5, t=6, adv_2d=False, *, garbage_padding=False, **noise):
    """``(new, old, ref, advantages, mask)`` of
    :func:`dpo_grpo.reference.examples.random_grpo_batch` (``noise``: its
    ``new_noise``, ``ref_noise``); ``garbage_padding`` puts NaN, inf and -inf on the
    padding of new, old and ref, which no loss may let through."""
    from dpo_grpo.reference import examples

    batch = examples.random_grpo_batch(seed, b, t, adv_2d=adv_2d, **noise)
    new, old, ref, adv, mask = batch.values()
    if garbage_padding:
        pad = mask == 0
        new[pad], old[pad], ref[pad] = float("nan"), float("inf"), -float("inf")
    return new, old, ref, adv, mask


def trl_fixture(name: str) -> dict:
    """A fixture file of :data:`TRL_FIXTURES` (``trl_grpo_loss.json``, ...), parsed."""
    import json

    return json.loads((TRL_FIXTURES / name).read_text(encoding="utf-8"))


def nan_array(rows):
    """A fixture's list (or list of lists) as a float64 array, ``None`` (JSON null, a
    reward function that returned None) as NaN."""
    import numpy as np

    def value(x):
        return float("nan") if x is None else x

    if rows and isinstance(rows[0], list):
        return np.array([[value(x) for x in row] for row in rows], dtype=np.float64)
    return np.array([value(x) for x in rows], dtype=np.float64)


def grpo_case(case):
    """A GRPO fixture case as ``grpo_loss``'s arguments: ``((new, old, ref,
    advantages, mask), options)``, float64 arrays and the case's options (each a
    keyword of the NumPy and the torch ``grpo_loss``). An on-policy case (``old_logps``
    null) takes ``old = new``, the values of TRL's ``new_logps.detach()``; ``ref`` is
    None where the case has no KL term."""
    x = case["inputs"]
    new = nan_array(x["new_logps"])
    old = new.copy() if x["old_logps"] is None else nan_array(x["old_logps"])
    ref = None if x["ref_logps"] is None else nan_array(x["ref_logps"])
    adv, mask = nan_array(x["advantages"]), nan_array(x["mask"])
    return (new, old, ref, adv, mask), dict(case["options"])


def dpo_case(case):
    """A DPO fixture case as ``dpo_loss``'s arguments: ``((policy_chosen,
    policy_rejected, ref_chosen, ref_rejected), beta, options)``. A one-name list of
    loss types becomes the name; ``label_smoothing`` is passed only to the loss types
    TRL 1.16.0 reads it for (the package refuses it elsewhere: TRL ignores it there),
    the lengths only to those that use them."""
    from dpo_grpo.trl_exact.dpo import LABEL_SMOOTHING_LOSS_TYPES

    o, x = case["options"], case["inputs"]
    types = [o["loss_type"]] if isinstance(o["loss_type"], str) else o["loss_type"]
    options = {"loss_type": types[0] if len(types) == 1 else types}
    options.update({k: o[k] for k in ("loss_weights", "discopop_tau") if k in o})
    if any(t in LABEL_SMOOTHING_LOSS_TYPES for t in types):
        options["label_smoothing"] = o["label_smoothing"]
    if any(t in ("ipo", "sigmoid_norm", "sft") for t in types):
        options["chosen_lengths"] = nan_array(x["chosen_lengths"])
    if any(t in ("ipo", "sigmoid_norm") for t in types):
        options["rejected_lengths"] = nan_array(x["rejected_lengths"])
    names = ("policy_chosen", "policy_rejected", "ref_chosen", "ref_rejected")
    return tuple(nan_array(x[k]) for k in names), o["beta"], options


def accuracy(prompts, completions, **kwargs):
    return [float(any(ch.isdigit() for ch in c)) for c in completions]


def format(prompts, completions, **kwargs):  # TRL logs rewards/format/*
    return [0.5 if len(c) % 2 else 0.0 for c in completions]


def real_grpo_run(path, tok, tmp_path, max_steps=1, **options):
    """A real ``GRPOTrainer`` after ``train()`` on the tiny model at ``path``: one
    prompt per step, four completions of at most 6 tokens, rewards ``accuracy`` and
    ``format``, logged every step; ``options`` go to ``GRPOConfig``. Read its
    ``state.log_history``. Needs TRL."""
    import warnings

    import trl
    from datasets import Dataset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = trl.GRPOConfig(
            output_dir=str(tmp_path),
            report_to="none",
            use_cpu=True,
            bf16=False,
            save_strategy="no",
            logging_steps=1,
            max_steps=max_steps,
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=6,
            seed=0,
            disable_tqdm=True,
            **options,
        )
        trainer = trl.GRPOTrainer(
            model=str(path),
            reward_funcs=[accuracy, format],
            args=args,
            train_dataset=Dataset.from_dict({"prompt": ["1+1="] * 4 * max_steps}),
            processing_class=tok,
        )
        trainer.train()
    return trainer


def figure_texts(fig) -> list:
    """All text strings drawn in a matplotlib ``fig``: texts in drawing order, then
    legends."""
    texts = []
    for ax in fig.axes:
        texts += [t.get_text() for t in ax.texts]
        if ax.get_legend() is not None:
            texts += [t.get_text() for t in ax.get_legend().get_texts()]
    return texts
