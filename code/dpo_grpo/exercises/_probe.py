"""The grader's start-up probe, run inside a sandbox exactly as a notebook's kernel is:
can anything in it read an answer or the key?

Standard library only. It walks the folders given on its command line (``/`` in a
sandbox with its own root: everything the notebook sees, but ``/proc``, ``/sys`` and
``/dev``) without following links, and lists every file that :func:`is_key_file`
recognises; it also asks the import system for each key module. It prints one line of
JSON: ``{"package": where dpo_grpo was imported from, "readable": [paths],
"importable": [module names]}``. The grader (:func:`.sandbox.probe_sandbox`) refuses to
grade unless both lists are empty.
"""

import importlib.util
import json
import os
import re
import sys

#: exercises/ modules that hold the key: the chapter registries (``chNN.py``, with the
#: reference answers), the lab registry, and the self-check's hashed key
KEY_MODULES = ("ch", "labs", "_selfcheck_key")
#: a distribution of the package (it holds every module): wheel, sdist, egg, zip
_ARCHIVE = re.compile(r"dpo[_-]grpo-.*\.(whl|tar\.gz|tgz|zip|egg)$", re.IGNORECASE)
_SKIPPED = ("/proc", "/sys", "/dev")


def is_key_file(path: str) -> bool:
    """Whether the file at ``path`` holds the answer key: a key module of
    ``dpo_grpo/exercises/`` (source or bytecode) or a distribution of the package."""
    parts = path.replace("\\", "/").split("/")
    if _ARCHIVE.search(parts[-1]):
        return True
    if parts[-2:-1] == ["__pycache__"]:
        parts = parts[:-2] + parts[-1:]
    return parts[-3:-1] == ["dpo_grpo", "exercises"] and parts[-1].startswith(
        KEY_MODULES
    )


def key_files(roots) -> list:
    """Every file under the folders ``roots`` (links not followed) that holds the key
    and that this process can read, sorted."""
    found = set()
    for root in roots:
        for folder, dirs, files in os.walk(root, onerror=lambda exc: None):
            if folder == "/":
                dirs[:] = [d for d in dirs if "/" + d not in _SKIPPED]
            found.update(
                path
                for path in (os.path.join(folder, n) for n in files + dirs)
                if is_key_file(path) and os.access(path, os.R_OK)
            )
    return sorted(found)


def importable_key_modules() -> list:
    """The key modules the import system finds under ``dpo_grpo.exercises``."""
    found = []
    folders = [
        os.path.join(p, "dpo_grpo", "exercises") for p in sys.path if os.path.isdir(p)
    ]
    names = {
        n.split(".")[0]
        for d in folders
        if os.path.isdir(d)
        for n in os.listdir(d)
        if n.startswith(KEY_MODULES)
    }
    for name in sorted(names | {"ch04", "_selfcheck_key"}):
        try:
            if importlib.util.find_spec(f"dpo_grpo.exercises.{name}") is not None:
                found.append(name)
        except (ImportError, ValueError):
            pass
    return found


def main(roots) -> int:
    import dpo_grpo

    print(
        json.dumps(
            {
                "package": os.path.dirname(os.path.abspath(dpo_grpo.__file__)),
                "readable": key_files(roots),
                "importable": importable_key_modules(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
