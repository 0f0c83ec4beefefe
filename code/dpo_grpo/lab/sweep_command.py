"""The command ``python -m dpo_grpo.lab.sweep``: its options (:func:`build_parser`,
:func:`parse_args`) and :func:`main`, which runs :func:`dpo_grpo.lab.sweep.run_sweep`,
writes the results file (``lab-<preset>.json`` in the working directory unless
``--out`` names another) and prints the verdicts. What the options mean, and the
command that refreshes the file the package ships, are in :mod:`dpo_grpo.lab.sweep`'s
docstring."""

from __future__ import annotations

import argparse
import json
import pathlib
import re

from . import sweep
from .progress import wanted


def _seed_span(text: str) -> list:
    """One value of ``--seeds``: a seed ``N`` or an inclusive range ``A-B``."""
    found = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", text)
    if found is None:
        raise argparse.ArgumentTypeError(
            f"expected a seed (0, 1, ...) or a range of seeds (0-9), got {text!r}"
        )
    lo = int(found[1])
    hi = lo if found[2] is None else int(found[2])
    if hi < lo:
        raise argparse.ArgumentTypeError(f"the range {text!r} holds no seed")
    return list(range(lo, hi + 1))


def build_parser() -> argparse.ArgumentParser:
    """The command's options (:mod:`dpo_grpo.lab.sweep`'s docstring describes
    them)."""
    parser = argparse.ArgumentParser(
        prog="python -m dpo_grpo.lab.sweep",
        description="Run every lab method for several seeds, and the robustness "
        "settings; write the results file.",
        epilog="A rerun never replaces the results the package ships; a maintainer "
        "refreshes them by naming the file: " + sweep.refresh_command("cpu") + ".",
    )
    parser.add_argument("--preset", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument(
        "--seeds",
        nargs="+",
        type=_seed_span,
        default=[list(sweep.DEFAULT_SEEDS)],
        metavar="SEED",
        help="seeds, each a number or an inclusive range: 0 1 2, 0-9, 0-4 7 (a lone "
        f"number is one seed; default {sweep.format_seeds(sweep.DEFAULT_SEEDS)})",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=sweep.METHODS,
        default=list(sweep.METHODS),
        metavar="METHOD",
        help=f"methods among {', '.join(sweep.METHODS)} (default: all)",
    )
    parser.add_argument(
        "--no-robustness",
        action="store_true",
        help="skip the robustness settings (ROBUSTNESS)",
    )
    parser.add_argument(
        "--tuned",
        default=None,
        metavar="FILE",
        help="a tuning file (python -m dpo_grpo.lab.tuning): each method's main runs "
        "use its best settings",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="processes that run the runs (default 1; the results do not change)",
    )
    parser.add_argument(
        "--out",
        type=pathlib.Path,
        default=None,
        metavar="FILE",
        help="results file (default: lab-<preset>.json in the working directory)",
    )
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    """The parsed options: ``seeds`` a flat list of distinct seeds, ``methods`` of
    distinct methods, ``out`` the file to write."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.seeds = [s for span in args.seeds for s in span]
    for name, values in (("seeds", args.seeds), ("methods", args.methods)):
        twice = sorted({str(x) for x in values if values.count(x) > 1})
        if twice:
            parser.error(f"argument --{name}: {', '.join(twice)} given twice")
    if args.out is None:
        args.out = pathlib.Path(f"lab-{args.preset}.json")
    return args


def main(argv=None) -> int:
    """Run the sweep the options ask for, write its results file, print its
    verdicts."""
    args = parse_args(argv)
    # a bar where someone watches, else (a log file) one line per run
    show = wanted(None)
    results = sweep.run_sweep(
        args.preset,
        args.seeds,
        args.methods,
        log=None if show else (lambda s: print(s, flush=True)),
        progress=show,
        robustness=not args.no_robustness,
        tuned=json.loads(pathlib.Path(args.tuned).read_text())["best"]
        if args.tuned
        else None,
        tuned_from=args.tuned,
        workers=args.workers,
    )
    out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    compared = {"grpo", "rft"} <= set(args.methods)  # the robustness rows' pair
    for metric in ("final_greedy", "final_sampled"):
        for line in sweep.gain_verdict(results, metric) + sweep.verdict(
            results, metric
        ):
            print(line)
        for line in sweep.robustness_lines(results, metric) if compared else []:
            print(line)
    print(f"wrote {out} ({results['total_seconds']:.0f} s)")
    return 0
