"""The package's layers: which sub-package may import which, and that the exact layers
equal the readable one.

Layers (README, "Layout"): ``reference`` (the article's formulas) < ``trl_exact`` (every
TRL option) < ``torch_ops`` < ``lab``; ``chapters`` and ``interactive`` build on those;
``exercises`` may use anything. Nothing in the package imports the build or benchmark
tooling, nor reads files outside the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo import reference
from dpo_grpo.reference import advantages as ref_adv
from dpo_grpo.reference import dpo as ref_dpo
from dpo_grpo.reference import grpo as ref_grpo
from dpo_grpo.trl_exact import advantages as trl_adv
from dpo_grpo.trl_exact import dpo as trl_dpo
from dpo_grpo.trl_exact import grpo as trl_grpo
from hypothesis import given, settings
from hypothesis import strategies as st
from testing_support import grpo_batch

PACKAGE = Path(dg.__file__).resolve().parent

#: sub-package (or top-level module) -> the sub-packages it may import from
ALLOWED = {
    "_validation": set(),
    "reference": {"_validation"},
    "trl_exact": {"_validation", "reference"},
    "torch_ops": {"_validation", "reference", "trl_exact"},
    "data": {"_validation", "i18n"},
    "lab": {"_validation", "i18n", "stats", "reference", "trl_exact", "torch_ops"},
    "i18n": set(),
    "stats": {"_validation"},
    "chapters": {
        "_validation",
        "i18n",
        "stats",
        "tables",
        "reference",
        "trl_exact",
        "torch_ops",
        "data",
    },
    "interactive": {
        "_validation",
        "i18n",
        "tables",
        "reference",
        "trl_exact",
        "data",
        "chapters",
    },
    "exercises": {
        "_validation",
        "i18n",
        "stats",
        "tables",
        "reference",
        "trl_exact",
        "torch_ops",
        "data",
        "lab",
        "chapters",
        "interactive",
    },
    "notebook": set(),
    "tables": {"_validation", "i18n"},
    "__init__": {"_validation", "reference", "trl_exact", "chapters"},
}
TOOLING = ("dpo_grpo_book", "bench", "scripts", "tests", "conftest")


def _layer(path: Path, root: Path = PACKAGE) -> str:
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path, root: Path = PACKAGE):
    """(absolute module name, line) for every import in ``path`` (a module of the
    package at ``root``), relative imports resolved."""
    rel = path.relative_to(root.parent).with_suffix("")
    package = list(rel.parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
                if node.module is None:  # from . import x, y
                    for alias in node.names:
                        yield f"{mod}.{alias.name}", node.lineno
                    continue
            else:
                mod = node.module
            yield mod, node.lineno


def _layer_of_module(name: str):
    parts = name.split(".")
    if parts[0] != "dpo_grpo" or len(parts) == 1:
        return None
    return parts[1]


SOURCES = sorted(PACKAGE.rglob("*.py"))


def _report(offences: list[str], rule: str) -> str:
    return f"{rule} ({len(offences)}):\n" + "\n".join(offences)


# --- The lint rules: each is a function of the modules, run once over all of them ----


def upward_imports(paths, root: Path = PACKAGE) -> list[str]:
    """``file:line imports name`` for every import of build or benchmark tooling and
    every import of a layer that the importing layer may not use (``ALLOWED``)."""
    found = []
    for path in paths:
        layer, where = _layer(path, root), path.relative_to(root)
        for name, line in _imports(path, root):
            target = _layer_of_module(name)
            if name.split(".")[0] in TOOLING:
                found.append(f"{where}:{line} imports build/bench tooling {name}")
            elif target not in (None, layer) and target not in ALLOWED[layer]:
                found.append(
                    f"{where}:{line} imports {name}: layer {layer!r} may import only "
                    f"{sorted(ALLOWED[layer])}"
                )
    return found


#: what a module that reads files outside the package would contain
OUTSIDE = (
    "parents[2]",
    "parents[3]",
    '"tests"',
    '"bench"',
    "Path.cwd()",
    "os.getcwd()",
)


def outside_reads(paths, root: Path = PACKAGE) -> list[str]:
    """``file (needle)`` for every module whose source holds one of ``OUTSIDE``."""
    return [
        f"{path.relative_to(root)} ({needle})"
        for path in paths
        for needle in OUTSIDE
        if needle in path.read_text(encoding="utf-8")
    ]


def test_every_module_belongs_to_a_known_layer():
    unknown = sorted({_layer(p) for p in SOURCES} - set(ALLOWED))
    assert not unknown, (
        f"new top-level modules/sub-packages need a rule in ALLOWED: {unknown}"
    )


def test_imports_point_down_the_layers():
    assert not (found := upward_imports(SOURCES)), _report(
        found, "imports that point up the layers or at the tooling"
    )


def _fake_package(tmp_path: Path, files: dict) -> Path:
    """A package ``dpo_grpo`` under ``tmp_path`` with ``files`` ({relative path:
    source}); returns its folder."""
    root = tmp_path / "dpo_grpo"
    for rel, source in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(source, encoding="utf-8")
    return root


def test_the_import_check_catches_an_upward_import(tmp_path):
    """A reference module importing the TRL layer (relatively and absolutely) and one
    importing the benchmarks are flagged; a downward import is not."""
    root = _fake_package(
        tmp_path,
        {
            "reference/grpo.py": "from .. import _validation\n"
            "from ..trl_exact import grpo\nimport dpo_grpo.torch_ops\n",
            "reference/kl.py": "import bench.bench_lab\n",
            "trl_exact/grpo.py": "from ..reference import grpo\n",
        },
    )
    found = upward_imports(sorted(root.rglob("*.py")), root)
    assert [f.split(" imports ")[0] for f in found] == [
        "reference/grpo.py:2",
        "reference/grpo.py:3",
        "reference/kl.py:1",
    ], found


def test_no_module_reads_files_outside_the_package():
    assert not (found := outside_reads(SOURCES)), _report(
        found, "modules that look outside the package"
    )


def test_the_outside_check_catches_a_module_reading_the_checkout(tmp_path):
    root = _fake_package(
        tmp_path,
        {
            "chapters/a.py": "ROOT = Path(__file__).resolve().parents[2]\n",
            "chapters/b.py": "DATA = Path(__file__).parent / 'data'\n",
        },
    )
    found = outside_reads(sorted(root.rglob("*.py")), root)
    assert found == [f"{Path('chapters/a.py')} (parents[2])"]


def test_every_reference_module_names_its_sections():
    for path in sorted((PACKAGE / "reference").glob("*.py")):
        if path.stem != "__init__":
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            assert "section" in doc.lower(), (
                f"reference/{path.name}: its docstring names the section it implements"
            )


def test_reference_functions_name_their_section():
    """Each reference function's docstring names the section that derives it (README:
    'reference')."""
    import inspect

    for module in (ref_dpo, ref_adv, ref_grpo):
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("_") or fn.__module__ != module.__name__:
                continue
            assert (
                "section 3." in (fn.__doc__ or "")
                or "section 4." in (fn.__doc__ or "")
                or name
                in (
                    "log_sigmoid",
                    "sigmoid",
                    "max_objective_identity_error",
                    "objective_identity_gap",
                )
            ), name


# --- The exact layers equal the reference layer at the paper's settings ---------------


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(1, 6),
    st.integers(1, 9),
    st.sampled_from([0.0, 0.1, 0.5]),
    st.sampled_from([0.1, 0.2, 0.3]),
    st.sampled_from([0.0, 0.04, 0.3]),
)
def test_trl_grpo_at_paper_settings_equals_reference(
    seed, bsz, width, spread, epsilon, beta
):
    new, old, ref, adv, mask = grpo_batch(
        seed, bsz, width, new_noise=spread, ref_noise=spread, garbage_padding=True
    )
    loss, grad = ref_grpo.grpo_loss(
        new, old, ref, adv, mask, epsilon=epsilon, beta=beta
    )
    exact = trl_grpo.grpo_loss(
        new, old, ref, adv, mask, epsilon=epsilon, beta=beta, loss_type="grpo"
    )
    assert exact.loss == pytest.approx(loss, rel=1e-12, abs=1e-14)
    np.testing.assert_allclose(exact.grad, grad, rtol=1e-12, atol=1e-15)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 5), st.integers(2, 9))
def test_trl_advantages_equal_reference_at_sample_std(seed, prompts, group):
    rewards = np.random.default_rng(seed).normal(size=(prompts, group))
    exact = trl_adv.reward_advantages(
        rewards.reshape(-1, 1), group, scale_rewards="group"
    )
    np.testing.assert_allclose(
        exact.advantages,
        ref_adv.group_advantages(rewards, ddof=1).ravel(),
        rtol=1e-12,
        atol=1e-12,
    )
    # the exported function is the one the book shows
    assert dg.group_advantages is ref_adv.group_advantages


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 8), st.sampled_from([0.01, 0.1, 1.0]))
def test_trl_dpo_sigmoid_equals_reference(seed, pairs, beta):
    logps = np.random.default_rng(seed).normal(-20, 5, size=(4, pairs))
    loss, logits = ref_dpo.dpo_loss(*logps, beta=beta)
    exact = trl_dpo.dpo_loss(*logps, beta=beta, loss_type="sigmoid")
    assert exact.loss == pytest.approx(loss, rel=1e-13)
    np.testing.assert_allclose(exact.logits, logits, rtol=1e-13)
    # the gradient of the readable loss, by finite differences, is the exact layer's
    # analytic one
    numeric = dg.finite_difference(
        lambda pc: ref_dpo.dpo_loss(pc, *logps[1:], beta=beta)[0], logps[0]
    )
    # atol: central differences of a loss of order 10 resolve about 1e-9 (seed 324 with
    # beta 1 gave 0.0 for an analytic -1.1e-9)
    np.testing.assert_allclose(exact.grad_policy_chosen, numeric, rtol=1e-5, atol=1e-8)


def test_reference_layer_is_listed_in_its_package():
    assert sorted(
        p.stem
        for p in Path(reference.__file__).parent.glob("*.py")
        if p.stem != "__init__"
    ) == [
        "advantages",
        "bandit",
        "baselines",
        "dpo",
        "examples",
        "grpo",
        "kl",
        "memory",
        "softmax",
        "zero_std",
    ]


MAX_MODULE_LINES = 700


def private_imports(path: Path, package_root: Path = PACKAGE) -> list[str]:
    """Names another package module keeps private (``_name``) that ``path`` imports or
    reads as ``module._name``. Private *modules* (``from .. import _validation``) are
    allowed: a module is one thing, shared on purpose; a private function or constant is
    not."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").startswith("dpo_grpo")
        ):
            base = path.parent
            for _ in range(max(node.level - 1, 0)):
                base = base.parent
            if not node.level:
                base = package_root.parent
            folder = (
                base.joinpath(*(node.module or "").split(".")) if node.module else base
            )
            for alias in node.names:
                is_module = (folder / f"{alias.name}.py").exists() or (
                    folder / alias.name / "__init__.py"
                ).exists()
                if is_module:
                    modules.add(alias.asname or alias.name)
                elif alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{node.module}.{alias.name} (line {node.lineno})")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
    return found


def test_the_private_import_check_catches_one(tmp_path):
    pkg = tmp_path / "dpo_grpo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "sub" / "helpers.py").write_text("def _hidden():\n    pass\n")
    user = pkg / "sub" / "user.py"
    user.write_text(
        "from .helpers import _hidden\nfrom . import helpers\nhelpers._hidden()\n"
        "from .. import sub\n"
    )
    assert private_imports(user, pkg) == [
        "helpers._hidden (line 1)",
        "helpers._hidden (line 3)",
    ]


def long_modules(paths, root: Path = PACKAGE, limit=MAX_MODULE_LINES) -> list[str]:
    """``file: N lines`` for every module over ``limit`` lines."""
    counts = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in paths}
    return [f"{p.relative_to(root)}: {n} lines" for p, n in counts.items() if n > limit]


def test_no_module_imports_another_modules_private_names():
    found = [
        f"{p.relative_to(PACKAGE)}: {name}"
        for p in SOURCES
        for name in private_imports(p)
    ]
    assert not found, _report(found, "private names imported from another module")


def test_every_module_holds_at_most_700_lines():
    assert not (found := long_modules(SOURCES)), _report(
        found, f"modules over {MAX_MODULE_LINES} lines: split them along their seams"
    )


def test_the_length_check_catches_a_long_module(tmp_path):
    root = _fake_package(
        tmp_path, {"lab/long.py": "x = 1\n" * 701, "lab/short.py": "x = 1\n" * 700}
    )
    found = long_modules(sorted(root.rglob("*.py")), root)
    assert found == [f"{Path('lab/long.py')}: 701 lines"]
