#!/usr/bin/env bash
# One-shot GPU check for dpo_grpo.torch_ops, for a fresh CUDA machine that has only Python and pip (a wheelhouse
# named by PIP_FIND_LINKS, or a reachable index). In under 8 minutes it:
#   1. creates a venv (reusing a CUDA torch already installed system-wide, if there is one),
#   2. installs torch (unpinned CUDA wheel), numpy, pytest, hypothesis, TRL and transformers at the pins of
#      requirements-trl.txt (the benchmarks time TRL's loss and log-prob paths beside this package's), and this
#      package (code/ on the path),
#   3. runs tests/torch_ops/ (the CUDA tests included) and both benchmarks,
#   4. writes cuda-<gpu>.json and gpu_check.log into $GPU_CHECK_RESULTS (default: the working directory it was
#      started in), and copies them to $OUT if set. The shipped results are replaced only when named, from the
#      repository root: GPU_CHECK_RESULTS=code/dpo_grpo/data/bench_results bash bench/gpu_check.sh
# Usage:  bash bench/gpu_check.sh          (from anywhere; PYTHON=python3.11 VENV=/tmp/venv to override;
#         GPU_CHECK_DRY_RUN=1 only builds and checks the environment)
set -uo pipefail

# a relative folder is relative to where the script was started
RESULTS=${GPU_CHECK_RESULTS:-.}
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$(pwd)
PY=${PYTHON:-python3}
VENV=${VENV:-/tmp/dpo-grpo-gpu-venv}
LOG="$RESULTS/gpu_check.log"
: > "$LOG"
START=$(date +%s)
log() { echo "[gpu_check $(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }
run() { log "\$ $*"; "$@" 2>&1 | tee -a "$LOG"; return "${PIPESTATUS[0]}"; }
STATUS=0

copy_out() {
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    cp "$RESULTS"/cuda-*.json "$LOG" "$OUT"/ 2>/dev/null || true
    log "copied results to \$OUT=$OUT"
  fi
}
trap copy_out EXIT

# --- 1-2. environment ---------------------------------------------------------------------------------------------
if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  # that Python may itself be a venv (a venv made from it would not see its packages): use it as it is
  log "$PY has a CUDA torch: using it directly"
  VPY="$PY"
  NEED="numpy pytest hypothesis"
else
  run "$PY" -m venv "$VENV" || exit 1
  VPY="$VENV/bin/python"
  NEED="torch numpy pytest hypothesis"
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
for pkg in $NEED; do
  mod=$pkg
  if "$VPY" -c "import $mod" 2>/dev/null; then continue; fi
  # a wheelhouse (PIP_FIND_LINKS) is used automatically; --no-index is retried when no index is reachable
  timeout 240 "$VPY" -m pip install -q "$pkg" >>"$LOG" 2>&1 \
    || timeout 240 "$VPY" -m pip install -q --no-index "$pkg" >>"$LOG" 2>&1 \
    || { log "could not install $pkg"; exit 1; }
done
# TRL at the book's pins, so that both benchmarks time TRL's own code beside the package's (torch is already there)
if ! "$VPY" -c "import trl" 2>/dev/null; then
  TRL_PINS=$(grep -E '^(trl|transformers|accelerate|datasets)==' requirements-trl.txt | tr '\n' ' ')
  timeout 300 "$VPY" -m pip install -q $TRL_PINS >>"$LOG" 2>&1 \
    || timeout 300 "$VPY" -m pip install -q --no-index $TRL_PINS >>"$LOG" 2>&1 \
    || { log "could not install $TRL_PINS"; exit 1; }
fi
# the package is pure Python under code/: putting code/ on the path is an editable install that needs no build tools
export PYTHONPATH="$REPO/code${PYTHONPATH:+:$PYTHONPATH}"
run "$VPY" -c "import torch, numpy, dpo_grpo.torch_ops as T; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'NO GPU', 'default_device', T.default_device())" || exit 1
if [ "${GPU_CHECK_DRY_RUN:-0}" = 1 ]; then log "dry run: environment ready, tests and benchmarks skipped"; exit 0; fi
if ! "$VPY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  log "no CUDA device visible to torch: stopping (the CPU numbers come from running the benchmarks directly)"
  exit 1
fi

# --- 3. tests and benchmarks (each under its own timeout; the total stays under 8 minutes) --------------------------
run timeout 180 "$VPY" -m pytest tests/torch_ops -q -p no:cacheprovider -rs || STATUS=1
# GPU timings are milliseconds: a small budget per shape is plenty; torch.compile (Triton) only where it matters.
# Both merge their section into cuda-<gpu>.json in the working directory: $RESULTS.
(cd "$RESULTS" && run timeout 240 "$VPY" "$REPO/bench/bench_grpo_loss.py" --budget 5 --compile full lean) \
  || STATUS=1
(cd "$RESULTS" && run timeout 90 "$VPY" "$REPO/bench/bench_logprobs.py" --max-wall 30) || STATUS=1

log "done (status $STATUS)"
exit $STATUS
