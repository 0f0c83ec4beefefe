"""Data the chapters read at run time, shipped inside the package (so a wheel needs no
repository on disk): ``trl_fixtures/`` (results of TRL 1.16.0's own code, written by
``scripts/make_trl_fixtures.py``) and ``bench_results/`` (what ``bench/*.py``
measured)."""

from pathlib import Path

#: Folder of the TRL 1.16.0 reference results (JSON).
TRL_FIXTURES = Path(__file__).resolve().parent / "trl_fixtures"
#: Folder of the benchmark results (JSON) that the chapters render.
BENCH_RESULTS = Path(__file__).resolve().parent / "bench_results"
