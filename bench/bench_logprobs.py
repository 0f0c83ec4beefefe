"""Benchmark of per-token log-probs: dpo_grpo.torch_ops.selective_log_softmax vs the
naive ``log_softmax(logits).gather(ids)``, forward + backward, time and peak extra
memory, at V = 32000.

    # CPU: 4 x 256 x 32000 float32; CUDA: 8 x 1024 x 32000
    .venv/bin/python bench/bench_logprobs.py
    # CPU: 2 x 128 x 32000
    .venv/bin/python bench/bench_logprobs.py --quick

Run it with .venv-trl/bin/python to add TRL 1.16.0's own
``trl.trainer.utils.selective_log_softmax`` as a column. Results are merged into
<host-kind>.json in the working directory (or --results FILE) under "logprobs";
bench/README.md says how to refresh the copy the package ships.
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

from bench_grpo_loss import (
    host_info,
    host_kind,
    load_average,
    merge_results,
    peak_extra_bytes,  # noqa: E402
    time_interleaved,
)
from dpo_grpo import torch_ops as T  # noqa: E402

VOCAB = 32000


def naive(logits, ids):
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[..., None])[..., 0]


def ours_inplace(logits, ids):
    return T.selective_log_softmax(logits, ids, inplace_backward=True)


#: variants that overwrite their logits with the gradient get their own copy of the
#: logits
INPLACE = {"ours_inplace"}


def variants(with_trl: bool):
    out = {
        "naive": naive,
        "ours": T.selective_log_softmax,
        "ours_inplace": ours_inplace,
    }
    if with_trl:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from trl.trainer.utils import selective_log_softmax as trl_sls
            out["trl"] = trl_sls
        except Exception as exc:  # TRL not installed in this interpreter
            print(
                f"[bench] TRL column skipped: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
    return out


def make_inputs(b, t, dtype, device, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    logits = (
        (3 * torch.randn(b, t, VOCAB, generator=g, device=device))
        .to(dtype)
        .requires_grad_()
    )
    ids = torch.randint(0, VOCAB, (b, t), generator=g, device=device)
    weights = torch.randn(b, t, generator=g, device=device)  # e.g. masked advantages
    return logits, ids, weights


def fwd_bwd(fn, logits, ids, weights):
    def run():
        logits.grad = None
        out = fn(logits, ids)
        (out.float() * weights).sum().backward()
        return out

    return run


def saved_extra_bytes(fn, logits, ids) -> int:
    """Bytes autograd saves for backward, other than the logits themselves (exact:
    saved-tensor hooks, each storage counted once;
    ``dpo_grpo.torch_ops.saved_tensor_bytes``)."""
    return T.saved_tensor_bytes(fn, logits, ids, exclude=logits)


def own_logits(name, logits):
    """The logits a variant runs on: a private copy for the in-place variants (their
    backward overwrites the logits with the gradient, so later calls run on those
    values: the same work, which does not depend on them)."""
    return logits.detach().clone().requires_grad_() if name in INPLACE else logits


def memory_phase(shape, dtype, device, with_trl) -> dict:
    shared, ids, weights = make_inputs(*shape, dtype, device)
    grad_bytes = shared.numel() * shared.element_size()
    result = {}
    for name, fn in variants(with_trl).items():
        logits = own_logits(name, shared)
        run = fwd_bwd(fn, logits, ids, weights)
        run()
        logits.grad = None
        peak = peak_extra_bytes(run, device)
        # the in-place variants allocate no gradient buffer
        own_grad = 0 if name in INPLACE else grad_bytes
        result[name] = {
            "peak_extra_bytes": peak,
            "peak_extra_beyond_grad_bytes": None if peak is None else peak - own_grad,
            "saved_for_backward_bytes": saved_extra_bytes(fn, logits, ids),
        }
    return result


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--shape", default=None, help="BxT (V is 32000), e.g. 8x1024")
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
        help="uncontended samples wanted per variant",
    )
    p.add_argument(
        "--max-wall",
        type=float,
        default=240,
        help="stop sampling after this many seconds per dtype",
    )
    p.add_argument(
        "--chunk-sweep",
        action="store_true",
        help="also time selective_log_softmax at several chunk sizes",
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


def main(argv=None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device) if args.device else T.default_device()
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = device.type == "cuda"
    if args.shape:
        shape = tuple(int(v) for v in args.shape.lower().split("x"))
    else:
        shape = (8, 1024) if cuda else ((2, 128) if args.quick else (4, 256))
    dtypes = args.dtypes or (["bfloat16", "float32"] if cuda else ["float32"])
    with_trl = not args.no_trl
    if args.memory_phase:
        print(
            json.dumps(
                {
                    d: memory_phase(shape, getattr(torch, d), device, with_trl)
                    for d in dtypes
                }
            )
        )
        return 0

    started = time.time()
    results = {
        "shape_BTV": [*shape, VOCAB],
        "default_chunk_rows": T.logprobs._default_chunk_rows(
            shape[0] * shape[1], VOCAB, device
        ),
        "dtypes": {},
        "torch_threads": torch.get_num_threads(),
    }
    repeats = args.repeats or (10 if cuda else (5 if args.quick else 7))
    for dname in dtypes:
        dtype = getattr(torch, dname)
        logits, ids, weights = make_inputs(*shape, dtype, device)
        fns = {
            name: fwd_bwd(fn, own_logits(name, logits), ids, weights)
            for name, fn in variants(with_trl).items()
        }
        if args.chunk_sweep:
            for rows in (16, 32, 64, 128, 256, 512):
                fns[f"ours_chunk{rows}"] = fwd_bwd(
                    lambda x, i, r=rows: T.selective_log_softmax(x, i, r),
                    logits,
                    ids,
                    weights,
                )
        # agreement with the naive result computed in float64
        with torch.no_grad():
            exact = naive(logits.double(), ids)
        agreement = {}
        for name, fn in variants(with_trl).items():
            with torch.no_grad():
                agreement[name] = float((fn(logits, ids).double() - exact).abs().max())
        timing = time_interleaved(
            fns, device, repeats, warmup=1, max_wall_s=args.max_wall
        )
        entry = {
            "timing": timing,
            "max_abs_err_vs_float64": agreement,
            "time_ratio_ours_over_naive": timing["ours"]["median_s"]
            / timing["naive"]["median_s"],
            "time_ratio_ours_inplace_over_naive": timing["ours_inplace"]["median_s"]
            / timing["naive"]["median_s"],
        }
        results["dtypes"][dname] = entry
        print(
            f"[bench] {dname}: "
            + ", ".join(f"{k} {v['median_s'] * 1e3:.1f}ms" for k, v in timing.items()),
            file=sys.stderr,
        )
        del logits, ids, weights, fns

    # memory: CUDA in-process; CPU in a child whose glibc returns freed blocks to the OS
    # at once
    if cuda:
        memory = {
            d: memory_phase(shape, getattr(torch, d), device, with_trl) for d in dtypes
        }
    else:
        env = dict(
            os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0"
        )
        cmd = [
            sys.executable,
            __file__,
            "--memory-phase",
            "--shape",
            f"{shape[0]}x{shape[1]}",
            "--dtypes",
            *dtypes,
            "--device",
            str(device),
        ] + (["--no-trl"] if args.no_trl else [])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        memory = (
            json.loads(proc.stdout.strip().splitlines()[-1])
            if proc.returncode == 0
            else {"error": proc.stderr[-2000:]}
        )
    for dname, per in memory.items():
        if dname in results["dtypes"]:
            entry = results["dtypes"][dname]
            entry["memory"] = per
            ours, base = (
                per["ours"]["peak_extra_beyond_grad_bytes"],
                per["naive"]["peak_extra_beyond_grad_bytes"],
            )
            if ours is not None and base:
                entry["memory_ratio_ours_over_naive_beyond_grad"] = ours / base
            for name in ("ours", "ours_inplace"):
                ours, base = (
                    per[name]["peak_extra_bytes"],
                    per["naive"]["peak_extra_bytes"],
                )
                if ours is not None and base:
                    entry[f"memory_ratio_{name}_over_naive"] = ours / base
    if "error" in memory:
        results["memory_error"] = memory["error"]
    path = Path(args.results or f"{host_kind(device)}.json")
    run_info = {
        "started_unix": started,
        "wall_s": round(time.time() - started, 1),
        "argv": sys.argv[1:],
        "load_average_at_end": load_average(),
    }
    merge_results(path, "logprobs", results, host_info(device), run_info)
    print(f"[bench] wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
