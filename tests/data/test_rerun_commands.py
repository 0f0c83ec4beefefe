"""Rerunning a command never overwrites the data the package ships (issue #41): every
benchmark and fixture script writes into the working directory by default, and into
``code/dpo_grpo/data/`` only when that path is named (bench/README.md, the scripts'
docstrings). Each test runs a command with its default output in an empty working
directory, the expensive work patched out, and checks that the shipped files are
byte for byte what they were (:func:`testing_support.files_kept` puts them back in any
case). ``python -m dpo_grpo.lab.sweep`` is tested in tests/lab/test_sweep.py, and
bench/bench_pages.py in tests/chapters/test_benchmarks.py."""

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from testing_support import SHIPPED_DATA, files_kept

ROOT = Path(__file__).resolve().parents[2]


def _script(monkeypatch, relative: str):
    """A script of bench/ or scripts/ as a module (it puts folders on sys.path: undone
    after the test)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def workdir(monkeypatch, tmp_path):
    """An empty working directory; the host is "vm", the name of the shipped
    widget, redraw and lab benchmark files, so a default that still pointed into the
    package would overwrite them."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(socket, "gethostname", lambda: "vm")
    return tmp_path


def _written(workdir) -> list:
    return sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*.json"))


def test_bench_widgets_writes_to_the_working_directory(monkeypatch, workdir):
    script = _script(monkeypatch, "bench/bench_widgets.py")
    monkeypatch.setattr(script, "ALL_WIDGETS", {})
    monkeypatch.setattr(script, "bench_figures", dict)
    with files_kept() as changed:
        assert script.main([]) == 0
        assert changed() == []
    assert _written(workdir) == ["widgets-vm.json"]
    out = workdir / "other" / "w.json"
    assert script.main(["--out", str(out)]) == 0 and out.is_file()


def test_bench_frontend_draw_writes_to_the_working_directory(monkeypatch, workdir):
    script = _script(monkeypatch, "bench/bench_frontend_draw.py")
    monkeypatch.setattr(
        script, "_one_run", lambda out: {"lab4": {"draw_ms": {"bandit": 12.5}}}
    )
    with files_kept() as changed:
        assert script.main(["--repeats", "1"]) == 0
        assert changed() == []
    assert _written(workdir) == ["frontend-draw-vm.json"]
    report = json.loads((workdir / "frontend-draw-vm.json").read_text())
    assert report["frontends"]["lab4"]["samples_ms"] == {"bandit": [12.5]}


def test_bench_lab_writes_to_the_working_directory(monkeypatch, workdir):
    pytest.importorskip("torch")
    script = _script(monkeypatch, "bench/bench_lab.py")
    cost = {"grpo": {"steps": 1}, "ppo": {"steps": 1}}
    monkeypatch.setattr(script, "ppo_section", lambda cfg, steps, seed: dict(cost))
    monkeypatch.setattr(script, "scenarios", lambda preset, steps: {})
    monkeypatch.setattr(
        script,
        "lab",
        SimpleNamespace(
            rollout_vs_train_time=lambda cfg, device: [], clear_sft_cache=lambda: None
        ),
    )
    monkeypatch.setattr(
        script,
        "trl_vs_lab",
        lambda: {
            "model": "tiny",
            "batch": 1,
            "trl": "1.16.0",
            "lab_step_seconds_median": 0.1,
            "trl_step_seconds_median": 0.2,
        },
    )
    with files_kept() as changed:
        script.main([])
        # --ppo-only rewrites its section of the file in the working directory
        script.main(["--ppo-only"])
        assert changed() == []
    assert _written(workdir) == ["lab-vm.json"]
    record = json.loads((workdir / "lab-vm.json").read_text())
    assert record["ppo_vs_grpo"]["grpo"] == {"steps": 1} and "trl_vs_lab" in record


def test_bench_grpo_loss_and_logprobs_write_to_the_working_directory(
    monkeypatch, workdir
):
    """Both merge their section into ./<host-kind>.json (cpu-<n>core.json here)."""
    pytest.importorskip("torch")
    loss = _script(monkeypatch, "bench/bench_grpo_loss.py")
    monkeypatch.setattr(loss, "copy_bandwidth", lambda device, nbytes: 1e9)
    # the bandwidth probes compile a kernel (seconds): two no-ops time instead
    monkeypatch.setattr(loss, "probe_variants", lambda x, opts: (int, int))
    logprobs = _script(monkeypatch, "bench/bench_logprobs.py")
    failed = subprocess.CompletedProcess([], 1, "", "memory phase patched out")
    monkeypatch.setattr(
        logprobs, "subprocess", SimpleNamespace(run=lambda *a, **k: failed)
    )
    name = f"cpu-{os.cpu_count()}core.json"
    # one timed run each (not 3), no model step: where the file lands is tested
    cheap = ["--no-trl", "--device", "cpu", "--runs", "1"]
    with files_kept() as changed:
        assert (
            loss.main(
                [*cheap, "--shapes", "2x4", "--configs", "article", "--no-compile"]
                + ["--no-memory", "--no-model-step", "--budget", "0.05"]
            )
            == 0
        )
        assert changed() == []
        assert _written(workdir) == [name]
        assert logprobs.main([*cheap, "--shape", "1x2", "--max-wall", "0.5"]) == 0
        assert changed() == []
    assert _written(workdir) == [name]
    data = json.loads((workdir / name).read_text())
    assert {"grpo_loss", "logprobs", "host", "run_info"} <= set(data)


def test_gpu_check_writes_its_log_to_the_working_directory(workdir):
    """A dry run (environment only) with a Python that claims CUDA: the log lands in
    the working directory, nothing in the package's bench_results/. The shim also
    answers the script's one-module install probes (``-c "import torch"``: a torch
    import, about 3 CPU-s, for a check this test is not about); the environment line
    the dry run logs still runs in the real Python."""
    shim = workdir / "python"
    shim.write_text(
        "#!/bin/bash\n"
        # the script's CUDA probes: say yes
        'if [[ "$*" == *"cuda.is_available() else 1"* ]]; then exit 0; fi\n'
        # its "is this package installed" probes: say yes
        'if [[ "$1" == -c && "$2" =~ ^import\\ [a-z_]+$ ]]; then exit 0; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "GPU_CHECK_RESULTS")}
    env.update(PYTHON=str(shim), GPU_CHECK_DRY_RUN="1")
    with files_kept() as changed:
        run = subprocess.run(
            ["bash", str(ROOT / "bench" / "gpu_check.sh")],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        assert changed() == []
    log = workdir / "gpu_check.log"
    assert log.is_file() and "dry run" in log.read_text()
    assert "default_device" in log.read_text()  # the real Python's line


def test_make_trl_fixtures_writes_to_the_working_directory(monkeypatch, workdir):
    pytest.importorskip("trl")
    script = _script(monkeypatch, "scripts/make_trl_fixtures.py")
    for maker in (
        "grpo_cases",
        "advantage_cases",
        "dpo_cases",
        "grpo_loss_type_cases",
        "dpo_family_cases",
        "rloo_cases",
    ):
        monkeypatch.setattr(script, maker, lambda env: [{"case": 0}])
    monkeypatch.setattr(script, "Env", lambda path: None)
    with files_kept() as changed:
        assert script.main([]) == 0
        assert changed() == []
    assert _written(workdir) == [
        f"trl_fixtures/{name}" for name in sorted(script.FILES)
    ]
    shipped = SHIPPED_DATA / "trl_fixtures"
    assert sorted(p.name for p in shipped.glob("*.json")) == sorted(script.FILES)


def test_verl_metric_keys_writes_to_the_working_directory(monkeypatch, workdir):
    script = _script(monkeypatch, "scripts/verl_metric_keys.py")
    checkout = workdir / "verl"
    for name in script.FILES:
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text('metrics = {"actor/ppo_kl": 0.0}\n')
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    with files_kept() as changed:
        monkeypatch.setattr(
            script.subprocess,
            "run",
            lambda *a, **k: SimpleNamespace(stdout="0" * 40 + "\n"),
        )
        assert script.main([str(checkout)]) == 0
        assert changed() == []
    written = json.loads((workdir / "verl_metric_keys.json").read_text())
    assert written["keys"] == ["actor/ppo_kl"] and written["verl_commit"] == "0" * 40
    assert (SHIPPED_DATA / "verl_fixtures" / "verl_metric_keys.json").is_file()
