"""Benchmark of per-token log-probs from a policy's last hidden states: the LM head
``hidden @ W.T`` followed by ``log_softmax(logits).gather(ids)`` (naive),
``dpo_grpo.torch_ops.selective_log_softmax`` (with and without
``inplace_backward=True``), TRL 1.16.0's ``selective_log_softmax`` helper, and TRL
1.16.0's fused LM head, the path its ``GRPOTrainer`` takes, which never builds the
(B, T, V) logits; forward + backward, time and peak extra memory, at V = 32000.

    # 8 x 1024 x 32000 (CPU: hidden size 64; CUDA: 896, Qwen2.5-0.5B's)
    .venv/bin/python bench/bench_logprobs.py
    # CPU: 2 x 2560 x 32000
    .venv/bin/python bench/bench_logprobs.py --quick

The TRL variants need TRL 1.16.0 in the interpreter (the test extra of .venv;
``--no-trl`` leaves them out). Every function is called as a reader calls it (default
arguments: ``selective_log_softmax``'s ``validate=True`` among them). The interleaved
timing is repeated ``--runs`` times: times are medians of the runs' medians, ratios
medians of the runs' ratios. Results are merged into <host-kind>.json in the working
directory (or --results FILE) under "logprobs"; bench/README.md says how to refresh the
copy the package ships.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "code"))
sys.path.insert(0, str(REPO / "bench"))

import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from bench_grpo_loss import (  # noqa: E402
    command_record,
    host_info,
    host_kind,
    load_average,
    merge_results,
    peak_extra_bytes,
    pool_runs,
    run_ratios,
    time_interleaved,
)
from dpo_grpo import torch_ops as T  # noqa: E402

VOCAB = 32000
#: TRL 1.16.0's GRPOTrainer asks its fused LM head for these per-token outputs
#: (``add_fused_lm_head(model, ..., outputs=("log_probs", "entropy"))``).
TRL_GRPO_OUTPUTS = ("log_probs", "entropy")


def naive(hidden, weight, ids):
    logits = F.linear(hidden, weight)
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[..., None])[..., 0]


def ours(hidden, weight, ids):
    return T.selective_log_softmax(F.linear(hidden, weight), ids)


def ours_inplace(hidden, weight, ids):
    # the logits are the LM head's output: their gradient may overwrite them, since the
    # head's own backward needs the hidden states and the weight, not the logits
    return T.selective_log_softmax(F.linear(hidden, weight), ids, inplace_backward=True)


def trl_variants() -> dict:
    """TRL 1.16.0's two log-prob paths, imported from TRL: its ``selective_log_softmax``
    helper on the full logits, and the fused LM head exactly as
    ``trl.trainer.utils.add_fused_lm_head`` calls it (``ChunkedLogProbFunction`` on the
    flattened hidden states, TRL's vocabulary chunk, temperature 1, no soft-capping,
    GRPOTrainer's outputs). Empty when TRL is not importable."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from trl.kernels import ChunkedLogProbFunction
            from trl.trainer import utils as trl_utils
    except Exception as exc:  # TRL not installed in this interpreter
        print(
            f"[bench] TRL columns skipped: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return {}
    chunk = trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE

    def trl_selective_log_softmax(hidden, weight, ids):
        return trl_utils.selective_log_softmax(F.linear(hidden, weight), ids)

    def trl_fused_lm_head(hidden, weight, ids):
        b, t, h = hidden.shape
        logps, _entropy, *_ = ChunkedLogProbFunction.apply(
            hidden.reshape(-1, h),
            weight,
            None,
            ids.reshape(-1),
            1.0,
            chunk,
            None,
            1.0,
            TRL_GRPO_OUTPUTS,
        )
        return logps.view(b, t)

    return {
        "trl_selective_log_softmax": trl_selective_log_softmax,
        "trl_fused_lm_head": trl_fused_lm_head,
    }


def trl_tile() -> dict | None:
    """The tile of TRL's fused LM head: tokens x vocabulary entries per projection
    (``trl.kernels.chunked_logprob.TOKEN_CHUNK_SIZE``, and the vocabulary chunk
    ``add_fused_lm_head`` passes); None without TRL."""
    try:
        from trl.kernels import chunked_logprob
        from trl.trainer import utils as trl_utils
    except Exception:  # TRL not installed in this interpreter
        return None
    return {
        "tokens": chunked_logprob.TOKEN_CHUNK_SIZE,
        "vocabulary": trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE,
    }


def variants(with_trl: bool) -> dict:
    out = {"naive": naive, "ours": ours, "ours_inplace": ours_inplace}
    return {**out, **(trl_variants() if with_trl else {})}


def make_inputs(b, t, hidden_size, dtype, device, seed=0):
    """Hidden states (B, T, H) and an LM head weight (V, H), both requiring grad (a
    policy's), random target ids (B, T) and per-token weights (e.g. masked
    advantages)."""
    g = torch.Generator(device=device).manual_seed(seed)
    hidden = torch.randn(b, t, hidden_size, generator=g, device=device)
    # logits of standard deviation 3, as the earlier logits-only benchmark drew them
    weight = torch.randn(VOCAB, hidden_size, generator=g, device=device)
    weight *= 3 / hidden_size**0.5
    ids = torch.randint(0, VOCAB, (b, t), generator=g, device=device)
    weights = torch.randn(b, t, generator=g, device=device)
    return (
        hidden.to(dtype).requires_grad_(),
        weight.to(dtype).requires_grad_(),
        ids,
        weights,
    )


def fwd_bwd(fn, hidden, weight, ids, weights):
    def run():
        hidden.grad = weight.grad = None
        out = fn(hidden, weight, ids)
        (out.float() * weights).sum().backward()
        return out

    return run


class LargestTensor(TorchDispatchMode):
    """The most elements of any tensor an operator returns while active: (B, T, V) when
    a method builds the full logits (or their log-softmax or gradient), a tile's
    size when it never does."""

    def __init__(self):
        super().__init__()
        self.elements = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for x in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(x, torch.Tensor):
                self.elements = max(self.elements, x.numel())
        return out


def largest_tensor_elements(run) -> int:
    with LargestTensor() as mode:
        run()
    return mode.elements


def memory_phase(shape, hidden_size, dtype, device, with_trl) -> dict:
    hidden, weight, ids, weights = make_inputs(*shape, hidden_size, dtype, device)
    result = {}
    for name, fn in variants(with_trl).items():
        run = fwd_bwd(fn, hidden, weight, ids, weights)
        run()
        result[name] = {
            "peak_extra_bytes": peak_extra_bytes(run, device),
            # between the passes, besides the inputs the caller holds anyway
            "saved_for_backward_bytes": T.saved_tensor_bytes(
                fn, hidden, weight, ids, exclude=(hidden, weight, ids)
            ),
            "largest_tensor_elements": largest_tensor_elements(run),
        }
    return result


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--shape", default=None, help="BxT (V is 32000), e.g. 8x1024")
    p.add_argument(
        "--hidden-size",
        type=int,
        default=None,
        help="H of the hidden states and LM head (default: 64 on CPU, 896 on CUDA)",
    )
    p.add_argument(
        "--dtypes",
        nargs="*",
        default=None,
        help="float32 bfloat16 (default: float32 on CPU, both on GPU)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="uncontended samples wanted per variant and run",
    )
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        help="times the interleaved timing is repeated (default: 3 on CPU, 1 on GPU)",
    )
    p.add_argument(
        "--max-wall",
        type=float,
        default=240,
        help="stop sampling after this many seconds per dtype and run",
    )
    p.add_argument("--no-trl", action="store_true")
    p.add_argument("--device", default=None)
    p.add_argument(
        "--results",
        default=None,
        help="results file (default: <host-kind>.json in the working directory)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: torch's choice)",
    )
    p.add_argument("--memory-phase", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def memory(args, shape, hidden_size, dtypes, device) -> dict:
    """Per dtype and variant: peak extra memory, bytes saved for the backward, largest
    tensor. CUDA in-process; CPU in a child whose glibc returns freed blocks to the OS
    at once."""
    with_trl = not args.no_trl
    if device.type == "cuda":
        return {
            d: memory_phase(shape, hidden_size, getattr(torch, d), device, with_trl)
            for d in dtypes
        }
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    cmd = [
        sys.executable,
        __file__,
        "--memory-phase",
        "--shape",
        f"{shape[0]}x{shape[1]}",
        "--hidden-size",
        str(hidden_size),
        "--dtypes",
        *dtypes,
        "--device",
        str(device),
    ] + (["--no-trl"] if args.no_trl else [])
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device) if args.device else T.default_device()
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = device.type == "cuda"
    if args.shape:
        shape = tuple(int(v) for v in args.shape.lower().split("x"))
    else:
        shape = (2, 2560) if args.quick and not cuda else (8, 1024)
    hidden_size = args.hidden_size or (896 if cuda else 64)
    dtypes = args.dtypes or (["bfloat16", "float32"] if cuda else ["float32"])
    with_trl = not args.no_trl
    if args.memory_phase:
        out = {
            d: memory_phase(shape, hidden_size, getattr(torch, d), device, with_trl)
            for d in dtypes
        }
        print(json.dumps(out))
        return 0

    started = time.time()
    n_rows = shape[0] * shape[1]
    results = {
        "input": "hidden states (B, T, H) and LM head weight (V, H)",
        "shape_BTV": [*shape, VOCAB],
        "hidden_size": hidden_size,
        "default_chunk_rows": T.logprobs._default_chunk_rows(n_rows, VOCAB, device),
        "trl_outputs": list(TRL_GRPO_OUTPUTS),
        "trl_tile": trl_tile() if with_trl else None,
        "dtypes": {},
        "torch_threads": torch.get_num_threads(),
    }
    runs = args.runs or (1 if cuda else 3)
    results["runs"] = runs
    repeats = args.repeats or (10 if cuda else 3)
    for dname in dtypes:
        dtype = getattr(torch, dname)
        hidden, weight, ids, weights = make_inputs(*shape, hidden_size, dtype, device)
        fns = {
            name: fwd_bwd(fn, hidden, weight, ids, weights)
            for name, fn in variants(with_trl).items()
        }
        # agreement with the naive result computed in float64
        with torch.no_grad():
            exact = naive(hidden.double(), weight.double(), ids)
            agreement = {
                name: float((fn(hidden, weight, ids).double() - exact).abs().max())
                for name, fn in variants(with_trl).items()
            }
        per_run = [
            time_interleaved(
                fns,
                device,
                repeats,
                warmup=1,
                max_wall_s=args.max_wall,
                keep_samples=True,
            )
            for _ in range(runs)
        ]
        timing = pool_runs(per_run)
        others = [k for k in timing if k != "naive"]
        inverse, inverse_runs = run_ratios(per_run, "naive", others)
        entry = {
            "timing": timing,
            "max_abs_err_vs_float64": agreement,
            # each variant's time over naive's, the median of the runs' ratios
            "time_ratio_over_naive": {k: 1 / r for k, r in inverse.items()},
            "time_ratio_over_naive_runs": {
                k: [1 / r for r in rs] for k, rs in inverse_runs.items()
            },
        }
        results["dtypes"][dname] = entry
        print(
            f"[bench] {dname}: "
            + ", ".join(f"{k} {v['median_s'] * 1e3:.1f}ms" for k, v in timing.items()),
            file=sys.stderr,
        )
        del hidden, weight, ids, weights, fns

    per_dtype = memory(args, shape, hidden_size, dtypes, device)
    logits_elements = n_rows * VOCAB
    for dname, per in per_dtype.items():
        if dname not in results["dtypes"]:
            continue
        entry = results["dtypes"][dname]
        entry["memory"] = per
        entry["logits_bytes"] = logits_elements * getattr(torch, dname).itemsize
        entry["builds_full_logits"] = {
            k: m["largest_tensor_elements"] >= logits_elements for k, m in per.items()
        }
        base = per["naive"]["peak_extra_bytes"]
        if base:
            entry["memory_ratio_over_naive"] = {
                k: m["peak_extra_bytes"] / base
                for k, m in per.items()
                if m["peak_extra_bytes"] is not None
            }
    if "error" in per_dtype:
        results["memory_error"] = per_dtype["error"]
    path = Path(args.results or f"{host_kind(device)}.json")
    run_info = {
        "started_unix": started,
        "wall_s": round(time.time() - started, 1),
        **command_record(argv, __file__),
        "load_average_at_end": load_average(),
    }
    merge_results(path, "logprobs", results, host_info(device), run_info)
    print(f"[bench] wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
