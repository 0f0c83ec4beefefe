"""Command line: ``python -m dpo_grpo.exercises grade PATH``,
``python -m dpo_grpo.exercises student IN OUT`` and
``python -m dpo_grpo.exercises selfcheck-key`` (regenerates the hashed self-check key
after an exercise changes; it writes the package's key only when ``--out`` names it)."""

import argparse
import sys
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpo_grpo.exercises")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser(
        "grade",
        help=(
            "grade a student notebook or a folder of them, with a sub-folder per "
            "student if you like (each notebook in a sandbox)"
        ),
    )
    g.add_argument("path")
    g.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds per notebook (default 120)",
    )
    g.add_argument(
        "--chapter",
        help="the chapter graded, e.g. 04 (default: the one most checks belong to)",
    )
    g.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="notebooks graded at once (default 1; one per core)",
    )
    g.add_argument(
        "--seed",
        type=int,
        help="seed of the drawn test inputs (default: fresh for each batch)",
    )
    g.add_argument(
        "--memory-mb",
        type=int,
        default=4096,
        help="address-space limit per process (default 4096)",
    )
    g.add_argument(
        "--cpus",
        type=float,
        default=1.0,
        help=(
            "CPU time per sandbox, in CPUs, for all its processes together (default 1; "
            "root mode, where the kernel offers the cpu controller)"
        ),
    )
    g.add_argument(
        "--unisolated",
        action="store_true",
        help=(
            "grade even where a notebook could read the answer key in its sandbox "
            "(the grader refuses otherwise): marks are then not protected"
        ),
    )
    g.add_argument(
        "--csv",
        type=Path,
        help="also write the table as CSV here (rows appended as graded)",
    )
    g.add_argument(
        "--markdown",
        type=Path,
        help="also write the table as Markdown here (rows appended as graded)",
    )
    g.add_argument(
        "--gradebook",
        type=Path,
        action="append",
        help=(
            "write the gradebook (one row per student) here, CSV or Markdown by the "
            "suffix (.csv, .md); may be given twice"
        ),
    )
    g.add_argument(
        "--summary",
        type=Path,
        action="append",
        help=(
            "write the class summary (one row per exercise: how many right, the "
            "commonest mistake) here, .csv or .md; may be given twice"
        ),
    )
    s = sub.add_parser(
        "student",
        help=(
            "write the student edition from the reader edition (`make notebooks`): "
            "solution cells removed, outputs cleared"
        ),
    )
    s.add_argument("reader_dir", help="the reader edition: _build/notebooks[/zh]")
    s.add_argument("out_dir")
    s.add_argument(
        "--graded",
        action="store_true",
        help=(
            "the graded edition: check() records answers and gives no feedback (no key)"
        ),
    )
    from .selfcheck import KEY_MODULE

    k = sub.add_parser(
        "selfcheck-key",
        help=(
            "regenerate the hashed self-check key from the registry, into "
            "./_selfcheck_key.py unless --out names another file (the package's "
            f"own: --out {KEY_MODULE})"
        ),
    )
    k.add_argument("--out", type=Path, default=Path("_selfcheck_key.py"))
    args = parser.parse_args(argv)

    if args.command == "student":
        from .student import write_student_edition

        try:
            written = write_student_edition(
                args.reader_dir, args.out_dir, graded=args.graded
            )
        except ValueError as exc:  # not a reader edition: say what to run
            parser.error(str(exc))
        for p in written:
            print(p)
        return 0
    if args.command == "selfcheck-key":
        from .core import registry
        from .selfcheck import build_key, key_module_source

        args.out.write_text(key_module_source(build_key(registry())), encoding="utf-8")
        print(args.out)
        return 0

    from .grade import GradingSession, grade_path
    from .names import display_name
    from .report import (
        class_summary,
        gradebook_markdown,
        report_paths,
        summary_markdown,
        write_reports,
    )
    from .sandbox import KeyInSandbox, Limits, detect_mode

    if args.jobs < 1 or args.timeout <= 0 or args.memory_mb < 256:
        parser.error("--jobs must be >= 1, --timeout > 0 and --memory-mb >= 256")
    try:
        limits = Limits(memory_mb=args.memory_mb, cpus=args.cpus)
    except ValueError as exc:
        parser.error(f"--{exc}")
    for flag, paths in (("--gradebook", args.gradebook), ("--summary", args.summary)):
        try:
            report_paths(paths, flag)
        except ValueError as exc:
            parser.error(str(exc))
    print(
        f"sandbox: {detect_mode()} (see book/teaching.md for what it isolates)",
        file=sys.stderr,
    )
    if args.chapter:
        # ValueError now, not after the first notebook
        GradingSession(args.chapter, args.timeout, 0)
    try:
        grades = grade_path(
            args.path,
            timeout=args.timeout,
            chapter=args.chapter,
            seed=args.seed,
            jobs=args.jobs,
            limits=limits,
            unisolated=args.unisolated,
            csv_path=args.csv,
            markdown_path=args.markdown,
            progress=True,
        )
    except KeyInSandbox as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    book = write_reports(
        grades, gradebook_paths=args.gradebook, summary_paths=args.summary
    )
    print(gradebook_markdown(book))
    print(summary_markdown(class_summary(book)))
    for g in grades:
        note = f"; {display_name(g.note)}" if g.note else ""
        print(
            f"{display_name(g.notebook)}: score {g.score:.0%} "
            f"({g.correct}/{len(g.verdicts)}, {g.seconds:.0f} s{note})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
