"""What a grading sandbox sees of this machine: an allow-list, not the machine.

- :func:`environment_view`: the folders a sandbox with its own root binds, read-only
  (the system folders, the Python installation and every folder on the kernel's
  ``sys.path``), and the ``dpo_grpo`` folders among them, each covered by the keyless
  copy;
- :func:`copy_package`: that copy, without the answer key
  (:func:`._probe.is_key_file`).

The grader checks the result before a batch with a probe run inside the sandbox
(:func:`.sandbox.require_no_key`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ._probe import is_key_file


def copy_package(dest: Path) -> Path:
    """A copy of the installed ``dpo_grpo`` in ``dest/dpo_grpo`` without the answer key
    (:func:`._probe.is_key_file`: the chapter registries and the hashed key) and
    without bytecode, made read-only."""
    import dpo_grpo

    src = Path(dpo_grpo.__file__).resolve().parent

    def ignore(folder, names):
        return {
            n
            for n in names
            if n == "__pycache__"
            or n.endswith((".pyc", ".pyo"))
            or is_key_file(os.path.join(folder, n))
        }

    shutil.copytree(src, dest / "dpo_grpo", ignore=ignore)
    for root, dirs, files in os.walk(dest):
        for f in files:
            os.chmod(os.path.join(root, f), 0o444)
        os.chmod(root, 0o555)
    return dest


SYSTEM_FOLDERS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/lib32",
    "/libx32",
    "/etc",
)


def _kernel_path() -> list:
    """``sys.path`` of this interpreter as the sandbox starts it (no ``PYTHONPATH``, no
    user site): the standard library and every site folder, ``.pth`` entries
    included."""
    out = subprocess.run(
        [sys.executable, "-s", "-c", "import sys, json; print(json.dumps(sys.path))"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONNOUSERSITE": "1"},
        cwd="/",
        timeout=60,
        check=True,
    )
    return [p for p in json.loads(out.stdout) if os.path.isabs(p) and os.path.isdir(p)]


_VIEW = None


def environment_view() -> tuple:
    """``(binds, package_folders)``: what a sandbox with its own root sees of this
    machine (cached). ``binds`` are ``[source, target, read-only]``: the system
    folders, the Python installation and every folder on the kernel's ``sys.path``
    (:func:`_kernel_path`) that they do not already hold; nothing else (not the
    grader's HOME, not the submissions). ``package_folders`` are the ``dpo_grpo``
    folders found on that path: each is covered by the sandbox's keyless copy
    (:func:`copy_package`), whatever the install (editable, wheel, system-wide)."""
    global _VIEW
    if _VIEW is not None:
        return _VIEW
    binds, roots = [], []

    def add(p):
        real = os.path.realpath(p)
        if any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots):
            return
        roots.append(real)
        binds.append([real, real, True])
        if os.path.abspath(p) != real:
            binds.append([os.path.abspath(p), os.path.abspath(p), True])

    for p in SYSTEM_FOLDERS:
        if os.path.islink(p):
            binds.append([p, p, True])
        elif os.path.isdir(p):
            add(p)
    path = _kernel_path()
    for p in (
        sys.base_prefix,
        sys.prefix,
        sys.exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        *path,
    ):
        add(p)
    packages = sorted(
        {
            os.path.realpath(os.path.join(p, "dpo_grpo"))
            for p in path
            if os.path.isdir(os.path.join(p, "dpo_grpo"))
        }
    )
    _VIEW = (binds, packages)
    return _VIEW
