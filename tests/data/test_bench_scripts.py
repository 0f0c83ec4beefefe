"""What bench/bench_grpo_loss.py and bench/bench_logprobs.py write is what the book
reads (issue #41, item 5): each timed torch call records the options it ran with,
named so that a file without records reads the same; repeated runs are pooled by
their medians; TRL's log-prob paths are called as TRL 1.16.0 calls them and give the
log-probs and gradients of the naive method, and the largest-tensor probe tells a
method that builds the (B, T, V) logits from one that does not. Timings are never
asserted here: the scripts measure, the tests check what the numbers mean."""

import importlib.util
import sys
from pathlib import Path

import pytest
from dpo_grpo.data import bench_results as br

ROOT = Path(__file__).resolve().parents[2]


def _script(monkeypatch, name):
    """A script of bench/ as a module (it puts code/ and bench/ on sys.path: undone
    after the test)."""
    pytest.importorskip("torch")
    monkeypatch.setattr(sys, "path", list(sys.path))
    path = ROOT / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_timed_call_records_the_options_its_name_says(monkeypatch):
    loss = _script(monkeypatch, "bench_grpo_loss")
    # the writer's defaults are the API's (read from its signature) and the reader's
    assert loss.CALL_DEFAULTS == br.CALL_DEFAULTS
    labels = [*loss.EAGER_VARIANTS]
    labels += [*loss.COMPILED_VARIANTS]
    assert "torch_eager_validate" in labels and loss.EAGER_VARIANTS[labels[0]] == {}
    for label in labels:
        record = loss.call_record(label)
        entry = {"calls": {label: record}}
        assert br.call_options(label, entry) == br.call_options(label), label
        assert record["validate"] is label.endswith("_validate")
    for other in ("trl", "numpy", "probe_compiled"):
        assert loss.call_record(other)["validate"] is None


def test_runs_are_pooled_by_their_medians(monkeypatch):
    loss = _script(monkeypatch, "bench_grpo_loss")

    def run(trl, ours):
        return {
            name: {
                "median_s": t,
                "min_s": t,
                "samples": 3,
                "clean_samples": 3,
                "median_all_samples_s": t,
                "_used": [t, t, t],
            }
            for name, t in (("trl", trl), ("ours", ours))
        }

    runs = [run(2.0, 1.0), run(6.0, 2.0), run(3.0, 3.0)]
    pooled = loss.pool_runs(runs)
    assert pooled["trl"]["median_s"] == 3.0
    assert pooled["trl"]["runs_median_s"] == [2.0, 6.0, 3.0]
    assert pooled["ours"]["samples"] == 9 and "_used" not in pooled["ours"]
    # each ratio inside its run (2, 3, 1): the median is 2, not 3 / 2
    ratio, per_run = loss.run_ratios(runs, "trl", ["ours"])
    assert ratio == {"ours": 2.0} and per_run == {"ours": [2.0, 3.0, 1.0]}


def test_the_command_is_recorded_from_the_repository_root(monkeypatch):
    loss = _script(monkeypatch, "bench_grpo_loss")
    monkeypatch.chdir(ROOT)
    record = loss.command_record(["--threads", "1"])
    assert record["argv"] == ["--threads", "1"]
    assert record["command"].endswith("bench/bench_grpo_loss.py --threads 1")
    assert not record["command"].split()[1].startswith("/")
    other = loss.command_record([], ROOT / "bench" / "bench_logprobs.py")
    assert other["command"].split()[1] == "bench/bench_logprobs.py"


@pytest.fixture
def logprobs(monkeypatch):
    return _script(monkeypatch, "bench_logprobs")


def _small(logprobs, b=1, t=6, hidden=1):
    import torch

    return logprobs.make_inputs(b, t, hidden, torch.float32, torch.device("cpu"))


def test_trl_log_prob_paths_agree_with_the_naive_one(logprobs):
    pytest.importorskip("trl")
    import torch

    variants = logprobs.variants(with_trl=True)
    assert {"trl_fused_lm_head", "trl_selective_log_softmax"} <= set(variants)
    hidden, weight, ids, weights = _small(logprobs)
    results = {}
    for name, fn in variants.items():
        run = logprobs.fwd_bwd(fn, hidden, weight, ids, weights)
        out = run().detach().clone()
        results[name] = (out, hidden.grad.clone(), weight.grad.clone())
    want = results["naive"]
    for name, got in results.items():
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)


def test_the_largest_tensor_tells_who_builds_the_logits(logprobs, monkeypatch):
    """Naive builds (B, T, V); TRL's fused head never does once a batch holds more
    tokens than its tile (made 2 tokens here, TRL's is 4,096)."""
    pytest.importorskip("trl")
    from trl.kernels import chunked_logprob

    monkeypatch.setattr(chunked_logprob, "TOKEN_CHUNK_SIZE", 2)
    hidden, weight, ids, weights = _small(logprobs)
    variants = logprobs.variants(with_trl=True)
    logits = ids.numel() * logprobs.VOCAB

    def largest(name):
        run = logprobs.fwd_bwd(variants[name], hidden, weight, ids, weights)
        return logprobs.largest_tensor_elements(run)

    assert largest("naive") == logits and largest("ours") == logits
    assert largest("trl_fused_lm_head") == 2 * logprobs.trl_tile()["vocabulary"]
    assert logprobs.trl_tile() == {
        "tokens": 2,
        "vocabulary": 32768,
    }


def test_the_gpu_check_times_trl_beside_the_package():
    # the shipped H200 file was measured with --no-trl: no TRL speed-up, no model
    # step; the next GPU run installs TRL at the book's pins and times it
    script = (ROOT / "bench" / "gpu_check.sh").read_text()
    assert "--no-trl" not in script
    assert "requirements-trl.txt" in script and "import trl" in script
