"""List verl's metric names at one commit: the string literals of the form
``actor/...``, ``critic/...``, ``response_length/...`` (and the other prefixes below)
in the files that log the PPO trainer's metrics. The troubleshooting page's verl table
(``dpo_grpo.chapters.troubleshooting.VERL_METRICS``) may use only these names; the
shipped list is ``code/dpo_grpo/data/verl_fixtures/verl_metric_keys.json``.

    git clone https://github.com/volcengine/verl && git -C verl checkout b178a3cd56
    # writes ./verl_metric_keys.json in the working directory
    python scripts/verl_metric_keys.py verl
    # refreshes the shipped list (from the repository root): only when named
    python scripts/verl_metric_keys.py verl --out code/dpo_grpo/data/verl_fixtures
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

FILES = (
    "verl/trainer/ppo/core_algos.py",
    "verl/trainer/ppo/metric_utils.py",
    "verl/trainer/ppo/ray_trainer.py",
    "verl/workers/actor/dp_actor.py",
    "verl/workers/critic/dp_critic.py",
)
PREFIXES = "actor|critic|response_length|prompt_length|perf|training"
KEY = re.compile(rf'"((?:{PREFIXES})/[a-z_/@]+)"')


def metric_keys(checkout: Path) -> dict:
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    keys = set()
    for name in FILES:
        keys |= set(KEY.findall((checkout / name).read_text()))
    return {
        "what": (
            "verl metric names that appear as string literals in the files below at "
            "the commit below; made by scripts/verl_metric_keys.py"
        ),
        "verl_repository": "https://github.com/volcengine/verl",
        "verl_commit": commit,
        "files": list(FILES),
        "keys": sorted(keys),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a git checkout of verl")
    parser.add_argument("--out", type=Path, default=Path("."), help="folder")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "verl_metric_keys.json"
    path.write_text(json.dumps(metric_keys(args.checkout), indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
