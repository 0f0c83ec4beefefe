"""Command line: ``python -m dpo_grpo.exercises grade PATH`` and ``python -m dpo_grpo.exercises student IN OUT``."""

import argparse
import sys
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpo_grpo.exercises")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade a student notebook or a folder of them")
    g.add_argument("path")
    g.add_argument("--timeout", type=float, default=120.0, help="seconds per notebook (default 120)")
    g.add_argument("--csv", type=Path, help="also write the table as CSV here")
    g.add_argument("--markdown", type=Path, help="also write the table as Markdown here")
    s = sub.add_parser("student", help="write the student edition (solution cells removed)")
    s.add_argument("book_dir")
    s.add_argument("out_dir")
    args = parser.parse_args(argv)

    if args.command == "student":
        from .student import write_student_edition

        for p in write_student_edition(args.book_dir, args.out_dir):
            print(p)
        return 0

    from .grade import grade_path, to_csv, to_markdown

    grades = grade_path(args.path, timeout=args.timeout)
    table = to_markdown(grades)
    print(table)
    for g in grades:
        print(f"{g.notebook}: score {g.score:.0%}" + (f" ({g.note})" if g.note else ""))
    if args.csv:
        args.csv.write_text(to_csv(grades), encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
