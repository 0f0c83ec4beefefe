"""Benchmark of the GRPO loss: NumPy reference, dpo_grpo.torch_ops (eager,
torch.compile) and TRL 1.16.0's real ``GRPOTrainer._compute_loss``, side by side on
identical inputs and options, with a bandwidth probe.

Run it with the interpreter that has TRL to get the TRL column (our package is put on
sys.path from the repo):

    # full shapes 64x512, 256x2048, 512x4096
    .venv-trl/bin/python bench/bench_grpo_loss.py
    # smaller shapes, fewer repeats
    .venv-trl/bin/python bench/bench_grpo_loss.py --quick
    # without TRL
    .venv/bin/python bench/bench_grpo_loss.py --no-trl

Every torch variant is ``torch_ops.grpo_loss`` called as a reader calls it (the API's
defaults, ``validate=True`` included) with only the options its name says changed; the
``_validate`` suffix marks ``validate=True``, a name without it ``validate=False``, and
each entry records the options of every timed call (``calls``). Every number is a median
over interleaved repeats of one forward + backward on the same (B, T) float32 inputs,
and the whole interleaved timing is repeated ``--runs`` times: times are medians of the
runs' medians, ratios medians of the runs' ratios (see bench/README.md). A forward +
backward of a small causal LM at the smallest shape is timed in the same run
(``model_step``), to set the loss beside a training step. Results are merged into
<host-kind>.json in the working directory (or --results FILE) under "grpo_loss";
bench/README.md says how to refresh the copy the package ships
(code/dpo_grpo/data/bench_results/, rendered in the benchmark appendix).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import math
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "code"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import dpo_grpo as dg  # noqa: E402
from dpo_grpo import torch_ops as T  # noqa: E402

FULL_SHAPES = [(64, 512), (256, 2048), (512, 4096)]
QUICK_SHAPES = [(16, 128), (64, 512), (128, 1024)]
CONFIGS = {
    # the article's setting (dpo_grpo defaults): token-level GRPO with a k3 penalty
    "article": dict(loss_type="grpo", beta=0.04, epsilon=0.2),
    # TRL 1.16.0's GRPOConfig defaults: DAPO normalisation, no KL term, asymmetric
    # clipping off
    "trl_defaults": dict(loss_type="dapo", beta=0.0, epsilon=0.2),
}
# bytes/s, vendor figures, matched by substring of the device name
NOMINAL_GPU_BANDWIDTH = {
    "H200": 4.8e12,
    "H100 SXM": 3.35e12,
    "H100 NVL": 3.9e12,
    "H100 PCIe": 2.0e12,
    "H100": 3.35e12,
    "A100-SXM4-80GB": 2.039e12,
    "A100 80GB PCIe": 1.935e12,
    "A100": 1.555e12,
    "L40S": 0.864e12,
    "L4": 0.3e12,
    "A10G": 0.6e12,
    "A10": 0.6e12,
    "T4": 0.32e12,
    "V100": 0.9e12,
    "RTX 4090": 1.008e12,
    "RTX 3090": 0.936e12,
}


# --------------------------------------------------------------------------------------
# Host description and results file
# --------------------------------------------------------------------------------------


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def host_info(device: torch.device) -> dict:
    info = {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "device": str(device),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            gpu_name=props.name,
            gpu_memory_bytes=props.total_memory,
            cuda_version=torch.version.cuda,
        )
    return info


def host_kind(device: torch.device) -> str:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device).replace("NVIDIA ", "")
        return (
            "cuda-"
            + "".join(c if c.isalnum() else "-" for c in name).strip("-").lower()
        )
    return f"cpu-{os.cpu_count()}core"


def merge_results(
    path: Path, section: str, payload: dict, host: dict, run_info: dict
) -> None:
    """Update one section of the results file (the other benchmark's section is
    kept)."""
    data = {}
    if path.exists():
        with contextlib.suppress(ValueError):
            data = json.loads(path.read_text(encoding="utf-8"))
    data["host"] = host
    old = data.get(section)
    if (
        isinstance(old, dict)
        and isinstance(old.get("shapes"), dict)
        and "shapes" in payload
    ):
        # keep other configs' shapes
        payload = {
            **payload,
            "shapes": {**old["shapes"], **payload["shapes"]},
        }
        payload["configs"] = {**old.get("configs", {}), **payload.get("configs", {})}
    data[section] = payload
    runs = data.setdefault("run_info", {})  # timestamps and load live here only
    runs[section] = (
        run_info
        if section not in runs
        else (runs[section] if isinstance(runs[section], list) else [runs[section]])[
            -3:
        ]
        + [run_info]
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load_average():
    with contextlib.suppress(OSError):
        return [
            float(x) for x in open("/proc/loadavg", encoding="utf-8").read().split()[:3]
        ]
    return None


# --------------------------------------------------------------------------------------
# Timing and memory
# --------------------------------------------------------------------------------------


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cpu_stall_us() -> int | None:
    """Microseconds during which some runnable task waited for a CPU (Linux PSI,
    /proc/pressure/cpu), or None."""
    try:
        with open("/proc/pressure/cpu", encoding="utf-8") as f:
            return int(f.readline().rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None


def time_interleaved(
    fns: dict,
    device,
    repeats: int,
    warmup: int = 2,
    max_wall_s: float | None = None,
    keep_samples: bool = False,
) -> dict:
    """Median (and min, quartiles) seconds of each callable, the callables interleaved
    per repeat.

    Each round runs every callable once in a fresh (seeded) random order: what ran just
    before a call (and what it left in the caches) matters at small shapes, and a fixed
    order would hand that effect to the same variants every time.

    On a shared CPU machine other processes steal cycles at random: a sample during
    which the kernel's CPU pressure counter (PSI) grew by more than 2 % of the sample's
    duration had runnable tasks waiting for a core, so it is marked contended. Rounds go
    on until every callable has ``repeats`` uncontended samples (or ``max_wall_s``
    passes); the medians are over uncontended samples when there are at least 3, else
    over all (``clean_samples`` says which). ``keep_samples`` also returns the samples
    themselves (``_used``: those the median is over), for :func:`pool_runs`.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    sync(device)
    samples = {name: [] for name in fns}
    clean = {name: [] for name in fns}
    use_psi = device.type == "cpu" and cpu_stall_us() is not None
    deadline = time.perf_counter() + (
        max_wall_s if max_wall_s is not None else math.inf
    )
    rounds = 0
    order, shuffler = list(fns), random.Random(0)
    while True:
        rounds += 1
        shuffler.shuffle(order)
        for name in order:
            fn = fns[name]
            sync(device)
            stall0 = cpu_stall_us() if use_psi else None
            t0 = time.perf_counter()
            fn()
            sync(device)
            dt = time.perf_counter() - t0
            samples[name].append(dt)
            if not use_psi or (cpu_stall_us() - stall0) <= 0.02 * dt * 1e6:
                clean[name].append(dt)
        enough = (
            min(len(v) for v in (clean if use_psi else samples).values()) >= repeats
        )
        if (
            enough
            or (rounds >= repeats and time.perf_counter() > deadline)
            or rounds >= 20 * repeats
        ):
            break
    out = {}
    for name in fns:
        xs = clean[name] if len(clean[name]) >= 3 else samples[name]
        q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
        out[name] = {
            "median_s": statistics.median(xs),
            "min_s": min(samples[name]),
            "q1_s": q[0],
            "q3_s": q[2],
            "samples": len(samples[name]),
            "clean_samples": len(clean[name]),
            "median_all_samples_s": statistics.median(samples[name]),
        }
        if keep_samples:
            out[name]["_used"] = xs
    return out


def pool_runs(runs: list) -> dict:
    """One timing per variant from several :func:`time_interleaved` runs (each with
    ``keep_samples``): ``median_s`` is the median of the runs' medians
    (``runs_median_s`` lists them), the quartiles and minimum are over every sample
    used."""
    out = {}
    for name in runs[0]:
        xs = [x for run in runs for x in run[name]["_used"]]
        q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
        medians = [run[name]["median_s"] for run in runs]
        out[name] = {
            "median_s": statistics.median(medians),
            "runs_median_s": medians,
            "min_s": min(run[name]["min_s"] for run in runs),
            "q1_s": q[0],
            "q3_s": q[2],
            "samples": sum(run[name]["samples"] for run in runs),
            "clean_samples": sum(run[name]["clean_samples"] for run in runs),
            "median_all_samples_s": statistics.median(
                [run[name]["median_all_samples_s"] for run in runs]
            ),
        }
    return out


def run_ratios(runs: list, numerator: str, names) -> tuple:
    """``(median over runs of numerator / name, the runs' ratios)`` per name: each ratio
    is taken inside one run, where the two were interleaved."""
    per = {
        k: [run[numerator]["median_s"] / run[k]["median_s"] for run in runs]
        for k in names
    }
    return {k: statistics.median(v) for k, v in per.items()}, per


def _status_bytes(key: str) -> int:
    for line in open("/proc/self/status", encoding="utf-8"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def peak_extra_bytes(fn, device) -> int | None:
    """Peak memory above the level before ``fn()`` during one call.

    CUDA: ``torch.cuda.max_memory_allocated``. CPU: the process's peak resident set
    (VmHWM, reset through /proc/self/clear_refs) minus its resident set before the call;
    meaningful when glibc returns freed blocks to the OS at once, which the memory phase
    ensures by running in a child with ``MALLOC_MMAP_THRESHOLD_=65536``.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as f:
            f.write("5")  # reset VmHWM to the current RSS
        base = _status_bytes("VmRSS")
        fn()
        # RSS accounting can dip below the base by a few pages
        return max(0, _status_bytes("VmHWM") - base)
    except OSError:
        return None


def copy_bandwidth(device, nbytes: int) -> float:
    """Bytes/s of a large device-to-device copy (read + write counted), median of 5."""
    n = nbytes // 4
    src, dst = torch.randn(n, device=device), torch.empty(n, device=device)
    times = []
    for _ in range(6):
        sync(device)
        t0 = time.perf_counter()
        dst.copy_(src)
        sync(device)
        times.append(time.perf_counter() - t0)
    return 2 * n * 4 / statistics.median(times[1:])


# --------------------------------------------------------------------------------------
# Inputs and the variants
# --------------------------------------------------------------------------------------


def make_inputs(b: int, t: int, device, seed: int = 0) -> dict:
    """float32 log-probs as a policy produces them; ragged prefix masks (TRL's int64
    completion_mask)."""
    g = torch.Generator().manual_seed(seed)
    old = torch.log(torch.rand(b, t, generator=g) * 0.9 + 0.05)
    # a few clipped tokens at epsilon = 0.2
    new = old + 0.05 * torch.randn(b, t, generator=g)
    ref = old + 0.05 * torch.randn(b, t, generator=g)
    lengths = torch.randint(max(1, t // 4), t + 1, (b,), generator=g)
    mask = (torch.arange(t)[None, :] < lengths[:, None]).long()
    adv = torch.randn(b, generator=g)
    for x in (new, old, ref):
        # padding holds 0 (TRL's padding value; TRL's own math would propagate garbage)
        x.mul_(mask)
    return {
        k: v.to(device)
        for k, v in dict(new=new, old=old, ref=ref, mask=mask, adv=adv).items()
    }


def torch_variant(x, opts, **options):
    """One forward + backward of ``torch_ops.grpo_loss`` as a reader calls it: the API's
    defaults (``validate=True`` among them) except the keyword ``options`` given."""
    new = x["new"].detach().clone().requires_grad_()
    ref = x["ref"] if opts["beta"] != 0 else None

    def run():
        new.grad = None
        out = T.grpo_loss(new, x["old"], ref, x["adv"], x["mask"], **opts, **options)
        out.loss.backward()
        return out.loss, new.grad

    return run


#: The options of ``torch_ops.grpo_loss`` the variants change, with the API's defaults.
CALL_DEFAULTS = {
    k: p.default
    for k, p in inspect.signature(T.grpo_loss).parameters.items()
    if k in ("validate", "compile")
}
#: The eager torch variants: label -> options changed from the API's defaults. The
#: ``_validate`` labels keep ``validate=True`` (the default); ``torch_eager_validate``
#: is the call as a reader writes it.
EAGER_VARIANTS = {
    "torch_eager_validate": {},
    "torch_eager": {"validate": False},
}
#: The compiled variants (label -> options), with and without the value checks.
COMPILED_VARIANTS = {
    "torch_compile_validate": {"compile": True},
    "torch_compile": {"compile": True, "validate": False},
}


def call_record(label: str) -> dict:
    """What a timed variant calls, with every option of ``torch_ops.grpo_loss`` it ran
    with (``validate`` None: the call has no such option)."""
    for options in (EAGER_VARIANTS, COMPILED_VARIANTS):
        if label in options:
            return {
                "function": "dpo_grpo.torch_ops.grpo_loss",
                **CALL_DEFAULTS,
                **options[label],
            }
    function = {
        "numpy": "dpo_grpo.trl_exact.grpo_loss",
        "trl": "trl.GRPOTrainer._compute_loss",
    }.get(label, "bandwidth probe")
    return {"function": function, "validate": None}


def numpy_variant(x, opts):
    arrays = {k: v.detach().cpu().numpy() for k, v in x.items()}
    ref = arrays["ref"] if opts["beta"] != 0 else None

    def run():
        out = dg.trl_exact.grpo_loss(
            arrays["new"], arrays["old"], ref, arrays["adv"], arrays["mask"], **opts
        )
        return out.loss, out.grad  # the analytic gradient is the "backward"

    return run


def probe_variants(x, opts):
    """One elementwise pass over the arrays the loss reads (new, old, mask, advantages,
    and ref when beta != 0), reduced to a scalar: eager (one kernel per operator) and
    compiled (one fused kernel: the practical floor)."""
    arrays = [x["new"].detach(), x["old"], x["mask"], x["adv"]] + (
        [x["ref"]] if opts["beta"] != 0 else []
    )

    def expr(n, o, m, a, r=None):
        e = (n - o).exp() if r is None else (n - o).exp() + r
        return (e * m * a[:, None]).sum()

    compiled = torch.compile(expr, dynamic=False)

    def eager():
        with torch.no_grad():
            return expr(*arrays)

    def fused():
        with torch.no_grad():
            return compiled(*arrays)

    return eager, fused


class TrlHarness:
    """A real ``trl.GRPOTrainer`` built offline from a config-created tiny Llama and a
    locally built tokenizer; ``_get_per_token_logps_and_entropies`` is patched on the
    instance to return the benchmark's tensor."""

    def __init__(self, workdir: Path, device):
        os.environ.update(
            HF_HUB_OFFLINE="1",
            HF_DATASETS_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            TQDM_DISABLE="1",
            TRANSFORMERS_VERBOSITY="error",
            TOKENIZERS_PARALLELISM="false",
        )
        import datasets
        import transformers
        import trl
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

        datasets.disable_progress_bars()
        transformers.utils.logging.set_verbosity_error()
        self.trl, self.workdir, self.device = trl, workdir, device
        self.version = trl.__version__
        vocab = {
            "<pad>": 0,
            "<eos>": 1,
            "<unk>": 2,
            **{f"w{i}": i + 3 for i in range(29)},
        }
        backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
        backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        self.tokenizer = PreTrainedTokenizerFast(
            tokenizer_object=backend,
            pad_token="<pad>",
            eos_token="<eos>",
            unk_token="<unk>",
        )
        config = LlamaConfig(
            vocab_size=len(vocab),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=64,
            pad_token_id=0,
            eos_token_id=1,
            bos_token_id=None,
            tie_word_embeddings=False,
        )
        torch.manual_seed(0)
        self.model_path = workdir / "tiny-llama"
        LlamaForCausalLM(config).save_pretrained(self.model_path)
        self.tokenizer.save_pretrained(self.model_path)
        self.dataset = datasets.Dataset.from_dict(
            {"prompt": [f"w{i} w{i + 1}" for i in range(8)]}
        )
        self.trainers = {}

    def trainer(self, name, opts):
        if name not in self.trainers:
            args = self.trl.GRPOConfig(
                output_dir=str(self.workdir / "out"),
                report_to="none",
                use_cpu=self.device.type != "cuda",
                save_strategy="no",
                logging_strategy="no",
                seed=0,
                per_device_train_batch_size=8,
                num_generations=2,
                loss_type=opts["loss_type"],
                beta=opts["beta"],
                epsilon=opts["epsilon"],
                importance_sampling_level="token",
                use_bias_correction_kl=False,
            )
            trainer = self.trl.GRPOTrainer(
                model=str(self.model_path),
                reward_funcs=[_zero_reward],
                args=args,
                train_dataset=self.dataset,
                processing_class=self.tokenizer,
            )
            trainer.model.train()
            trainer.current_gradient_accumulation_steps = 1
            self.trainers[name] = trainer
        return self.trainers[name]

    def variant(self, name, x, opts):
        trainer = self.trainer(name, opts)
        b, t = x["new"].shape
        new = x["new"].detach().clone().requires_grad_()
        entropies = torch.zeros_like(new)

        def logps_and_entropies(*args, **kwargs):
            return new, entropies, None

        inputs = {
            "prompt_ids": torch.full((b, 1), 5, dtype=torch.long, device=new.device),
            "prompt_mask": torch.ones(b, 1, dtype=torch.long, device=new.device),
            "completion_ids": x["mask"] * 7,
            "completion_mask": x["mask"],
            "advantages": x["adv"],
            "old_per_token_logps": x["old"],
            "num_items_in_batch": x["mask"].sum(),
        }
        if opts["beta"] != 0:
            inputs["ref_per_token_logps"] = x["ref"]

        def run():
            # one trainer serves every shape of a config: this shape's tensors and
            # length, set at each call
            trainer._get_per_token_logps_and_entropies = logps_and_entropies
            trainer.max_completion_length = t  # dr_grpo's normaliser
            new.grad = None
            for values in trainer._metrics["train"].values():
                values.clear()
            loss = trainer._compute_loss(trainer.model, inputs)
            loss.backward()
            return loss, new.grad

        return run


def _zero_reward(prompts, completions, **kwargs):
    return [0.0] * len(prompts)


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------


def min_bytes(x, opts) -> int:
    """Bytes a single fused forward and backward must move at least: read new, old,
    mask (+ ref), write the gradient, ratio and per-token loss (+ kl); the backward
    reads the saved gradient and writes the gradient of new_logps."""
    n = x["new"].numel()
    elem = x["new"].element_size()
    kl = elem if opts["beta"] != 0 else 0
    reads = 2 * elem + x["mask"].element_size() + kl
    writes = elem + 2 * elem + kl
    return n * (reads + writes + 2 * elem)


def build_variants(x, cfg_name, opts, device, trl, with_compile, errors):
    variants = {}
    if device.type == "cpu":
        variants["numpy"] = numpy_variant(x, opts)
    for label, options in EAGER_VARIANTS.items():
        variants[label] = torch_variant(x, opts, **options)
    if with_compile:
        for label, options in COMPILED_VARIANTS.items():
            try:
                run = torch_variant(x, opts, **options)
                t0 = time.perf_counter()
                run()
                errors[f"{label}_compile_s"] = round(time.perf_counter() - t0, 1)
                variants[label] = run
            except Exception as exc:
                # torch.compile may be unavailable (no compiler, unsupported platform)
                errors[label] = f"{type(exc).__name__}: {str(exc)[:300]}"
    if trl is not None:
        try:
            variants["trl"] = trl.variant(cfg_name, x, opts)
        except Exception as exc:
            errors["trl"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return variants


def _float(x) -> float:
    return float(x.detach()) if isinstance(x, torch.Tensor) else float(x)


def agreement(variants):
    """Max |loss - loss_eager| and max |grad - grad_eager| of every variant against our
    eager torch loss."""
    loss0, grad0 = variants["torch_eager"]()
    grad0 = grad0.detach().double().cpu().numpy()
    out = {}
    for name, fn in variants.items():
        loss, grad = fn()
        grad = (
            grad.detach().double().cpu().numpy()
            if isinstance(grad, torch.Tensor)
            else np.asarray(grad)
        )
        out[name] = {
            "loss_abs_diff": abs(_float(loss) - _float(loss0)),
            "grad_max_abs_diff": float(np.abs(grad - grad0).max()),
        }
    return out


def run_memory_phase(args, device) -> dict:
    """Peak extra memory of one call of every variant (CPU: in a child process with
    glibc's mmap threshold fixed)."""
    if device.type == "cpu":
        env = dict(
            os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0"
        )
        cmd = (
            [
                sys.executable,
                __file__,
                "--memory-phase",
                "--shapes",
                *[f"{b}x{t}" for b, t in args.shapes],
                "--configs",
                *args.configs,
            ]
            + (["--no-trl"] if args.no_trl else [])
            + (["--threads", str(args.threads)] if args.threads else [])
            + (["--no-compile"] if args.no_compile else [])
            + (
                ["--compile-configs", *args.compile_configs]
                if args.compile_configs
                else []
            )
        )
        proc = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=args.memory_timeout
        )
        if proc.returncode != 0:
            return {"error": proc.stderr[-2000:]}
        return json.loads(proc.stdout.strip().splitlines()[-1])
    return memory_measurements(args, device)


def memory_measurements(args, device) -> dict:
    trl = make_trl(args, device)
    result = {}
    for cfg_name in args.configs:
        opts = CONFIGS[cfg_name]
        for b, t in args.shapes:
            x = make_inputs(b, t, device)
            with_compile = not args.no_compile and (
                args.compile_configs is None or cfg_name in args.compile_configs
            )
            variants = build_variants(x, cfg_name, opts, device, trl, with_compile, {})
            per = {}
            for name, fn in variants.items():
                fn()  # warm-up (lazy initialisation, autograd graph caches)
                per[name] = peak_extra_bytes(fn, device)
            result[f"{cfg_name}/{b}x{t}"] = per
    return result


def command_record(argv, script=__file__) -> dict:
    """``argv`` and the command that reproduces the run of ``script`` (this one by
    default) from the working directory: the interpreter and the script as paths
    relative to it when they lie inside it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    exe = Path(sys.executable)
    with contextlib.suppress(ValueError):
        exe = exe.relative_to(Path.cwd())
    script = Path(script).resolve()
    with contextlib.suppress(ValueError):
        script = script.relative_to(Path.cwd())
    return {"argv": argv, "command": shlex.join([str(exe), str(script), *argv])}


def model_step(args, device, budget) -> dict:
    """One forward + backward of a small causal LM (the tests' tiny random Qwen2,
    ``dpo_grpo.lab.hf.tiny_random_model(0)``, built from a config: no download) on
    (B, T) random token ids at the smallest benchmark shape, its loss the model's own
    next-token cross-entropy. The loss it is set beside is the same run's
    ``torch_eager_validate`` (the call as a reader writes it) at ``loss_config`` and
    this shape, in ``shapes``."""
    b, t = min(args.shapes, key=lambda s: s[0] * s[1])
    try:
        from dpo_grpo.lab import hf

        model, _ = hf.tiny_random_model(0)
    except ImportError as exc:  # transformers is not installed
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    model.to(device).train()
    cfg = model.config
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (b, t), generator=g).to(device)

    def step():
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()

    fns = {"model_step": step}
    t0 = time.perf_counter()
    step()
    one = time.perf_counter() - t0
    repeats = args.repeats or int(min(50, max(3, budget / max(one, 1e-9))))
    timing = time_interleaved(fns, device, repeats, max_wall_s=3 * budget)
    return {
        "model": "dpo_grpo.lab.hf.tiny_random_model(0)",
        "architecture": type(model).__name__,
        "config": {
            k: getattr(cfg, k)
            for k in (
                "vocab_size",
                "hidden_size",
                "intermediate_size",
                "num_hidden_layers",
                "num_attention_heads",
                "num_key_value_heads",
            )
        },
        "parameters": sum(p.numel() for p in model.parameters()),
        "shape": f"{b}x{t}",
        "tokens": b * t,
        "loss_config": "article",
        "timing": timing,
    }


def make_trl(args, device):
    if args.no_trl:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return TrlHarness(Path(tempfile.mkdtemp(prefix="bench-trl-")), device)
    except Exception as exc:  # TRL not installed in this interpreter
        print(
            f"[bench] TRL column skipped: {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--quick", action="store_true", help="smaller shapes and fewer repeats"
    )
    p.add_argument("--shapes", nargs="*", help="BxT shapes, e.g. 64x512 256x2048")
    p.add_argument("--configs", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed repeats per variant (default: fit the budget)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds of timing per shape and config",
    )
    p.add_argument("--no-trl", action="store_true")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument(
        "--compile-configs",
        nargs="*",
        default=None,
        help="configs that get compiled variants (all)",
    )
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        help="times the whole interleaved timing is repeated (default: 3 on CPU, 1 on "
        "GPU); times and ratios are medians over the runs",
    )
    p.add_argument(
        "--no-model-step",
        action="store_true",
        help="skip timing a small causal LM's forward + backward beside the loss",
    )
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--memory-timeout", type=float, default=300)
    p.add_argument(
        "--device", default=None, help="cpu or cuda (default: cuda when available)"
    )
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
    args = p.parse_args(argv)
    if args.shapes:
        args.shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes]
    else:
        args.shapes = QUICK_SHAPES if args.quick else FULL_SHAPES
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device) if args.device else T.default_device()
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    # one compiled function per (variant, shape, config): more than dynamo's default 8
    # entries per code object
    torch._dynamo.config.recompile_limit = 256
    torch._dynamo.config.fail_on_recompile_limit_hit = (
        True  # never time a silent eager fallback
    )
    if args.memory_phase:
        print(json.dumps(memory_measurements(args, device)))
        return 0
    budget = args.budget or ((4 if args.quick else 10) if device.type == "cpu" else 10)
    started = time.time()
    trl = make_trl(args, device)
    results = {
        "configs": {k: CONFIGS[k] for k in args.configs},
        "dtype": "float32",
        "torch_threads": torch.get_num_threads(),
        "trl_version": None if trl is None else trl.version,
        "shapes": {},
    }
    if device.type == "cuda":
        bw = copy_bandwidth(device, 1 << 30)
        nominal = next(
            (
                v
                for k, v in NOMINAL_GPU_BANDWIDTH.items()
                if k in torch.cuda.get_device_name(device)
            ),
            None,
        )
        results["device_bandwidth"] = {"copy_measured_Bps": bw, "nominal_Bps": nominal}
    else:
        results["device_bandwidth"] = {
            "copy_measured_Bps": copy_bandwidth(device, 1 << 28),
            "nominal_Bps": None,
        }
    runs = args.runs or (3 if device.type == "cpu" else 1)
    results["runs"] = runs
    prepared = {}  # key -> (variants, repeats)
    for cfg_name in args.configs:
        opts = CONFIGS[cfg_name]
        for b, t in args.shapes:
            key = f"{cfg_name}/{b}x{t}"
            x = make_inputs(b, t, device)
            errors = {}
            with_compile = not args.no_compile and (
                args.compile_configs is None or cfg_name in args.compile_configs
            )
            variants = build_variants(
                x, cfg_name, opts, device, trl, with_compile, errors
            )
            probe_eager, probe_fused = probe_variants(x, opts)
            variants["probe_eager"], variants["probe_compiled"] = (
                probe_eager,
                probe_fused,
            )
            # one timed call each, to fit the repeats in the budget (or skip the shape)
            single = {}
            for name, fn in variants.items():
                fn()
                sync(device)
                t0 = time.perf_counter()
                fn()
                sync(device)
                single[name] = time.perf_counter() - t0
            per_round = sum(single.values())
            # cheap shapes: more samples
            repeats = args.repeats or int(
                min(200, max(3, budget / max(per_round, 1e-9)))
            )
            # a run of a shape may take 3 budgets (time_interleaved's max_wall_s)
            if per_round > 3 * budget:
                results["shapes"][key] = {
                    "skipped": f"one round takes {per_round:.1f}s > 3 x budget "
                    f"{budget}s"
                }
                print(
                    f"[bench] {key}: skipped ({per_round:.1f}s per round)",
                    file=sys.stderr,
                )
                continue
            results["shapes"][key] = {
                "agreement_vs_torch_eager": agreement(
                    {k: v for k, v in variants.items() if not k.startswith("probe")}
                ),
                "errors": errors,
                "min_bytes": min_bytes(x, opts),
                "numel": b * t,
                "calls": {k: call_record(k) for k in variants},
            }
            prepared[key] = (variants, repeats)
    # the runs one after another, each over every shape: a slow spell of the machine
    # lands in one run, not in every run of one shape
    timings = {key: [] for key in prepared}
    for run in range(runs):
        for key, (variants, repeats) in prepared.items():
            timings[key].append(
                time_interleaved(
                    variants, device, repeats, max_wall_s=3 * budget, keep_samples=True
                )
            )
            med = {k: v["median_s"] for k, v in timings[key][-1].items()}
            summary = ", ".join(f"{k} {v * 1e3:.2f}ms" for k, v in med.items())
            print(f"[bench] run {run + 1}/{runs} {key}: {summary}", file=sys.stderr)
    nominal = (
        results["device_bandwidth"]["nominal_Bps"]
        or results["device_bandwidth"]["copy_measured_Bps"]
    )
    for key, per_run in timings.items():
        entry = results["shapes"][key]
        entry["timing"] = pool_runs(per_run)
        med = {k: v["median_s"] for k, v in entry["timing"].items()}
        loss_names = [k for k in med if not k.startswith("probe")]
        if "trl" in med:
            entry["speedup_vs_trl"], entry["speedup_vs_trl_runs"] = run_ratios(
                per_run, "trl", loss_names
            )
        for probe in ("probe_eager", "probe_compiled"):
            entry[f"multiple_of_{probe}"] = {
                k: statistics.median(
                    run[k]["median_s"] / run[probe]["median_s"] for run in per_run
                )
                for k in loss_names
            }
        entry["achieved_Bps"] = {k: entry["min_bytes"] / med[k] for k in loss_names}
        entry["fraction_of_bandwidth"] = {
            k: entry["achieved_Bps"][k] / nominal for k in loss_names
        }
    if not args.no_model_step and prepared:
        results["model_step"] = model_step(args, device, budget)
    if not args.no_memory:
        memory = run_memory_phase(args, device)
        for key, per in memory.items():
            if key in results["shapes"] and isinstance(per, dict):
                results["shapes"][key]["peak_extra_bytes"] = per
        if "error" in memory:
            results["memory_error"] = memory["error"]
    path = Path(args.results or f"{host_kind(device)}.json")
    run_info = {
        "started_unix": started,
        "wall_s": round(time.time() - started, 1),
        **command_record(argv),
        "load_average_at_end": load_average(),
        "quick": args.quick,
    }
    merge_results(path, "grpo_loss", results, host_info(device), run_info)
    print(f"[bench] wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
