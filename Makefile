# Two entry points (see README): `make book` builds the book, executing every chapter; `make test` runs all tests.
# Both create .venv on first use and install requirements.txt plus this package (editable).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# Kernels emit only plotly's mimetype; dpo_grpo_book (a myst-nb MIME renderer) turns it into HTML and loads
# plotly.js once per page from _static/vendor/. (plotly_mimetype+notebook would inline 4.6 MB of plotly.js per page.)
export PLOTLY_RENDERER ?= plotly_mimetype
export PYDEVD_DISABLE_FILE_VALIDATION = 1
# Python caches each module's bytecode (__pycache__) the first time a process imports it, so later processes (pytest
# workers, the 40 notebook kernels, sandboxes, subprocesses) skip compiling torch, transformers and the rest again. An
# environment that sets PYTHONDONTWRITEBYTECODE (this VM's does) makes every process compile its imports from source:
# `import torch` took 3.1 CPU-s against 1.5 with a cache, measured here. Unset for the commands below.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: book book-zh test install student notebooks clean wheel

# --no-compile: Python compiles a module when it is first imported; compiling every file of every package at install
# time (torch's thousands) doubled the install's time (1 min 43 s against 52 s measured here).
$(STAMP): requirements.txt pyproject.toml book/_ext/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e book/_ext
	touch $(STAMP)

# The book's JavaScript (MathJax, RequireJS, widget manager) is served locally: npm ci from package-lock.json.
NPM        ?= npm
NODE_STAMP := node_modules/.package-lock.json
$(NODE_STAMP): package.json package-lock.json
	$(NPM) ci --ignore-scripts --no-audit --no-fund --loglevel=error

install: $(STAMP) $(NODE_STAMP)

# Both editions (scripts/build_book.py): nbmake executes every chapter of the English book (a copy in
# _build/executed/) and of the Chinese one (book/ with the translations of i18n/zh/*.po, scripts/zh_edition.py)
# once, one pytest-xdist worker per CPU; jupyter-book then renders them without executing again, into _build/html/
# and _build/html/zh/. A failing cell stops the build.
book: $(STAMP) $(NODE_STAMP)
	$(PY) scripts/build_book.py --both

# The Chinese edition alone (after `make book` has built the English one it links to)
book-zh: $(STAMP) $(NODE_STAMP)
	$(PY) scripts/build_book.py --zh --all -W -n --keep-going

# The tests and every notebook run against the package as a reader installs it: a wheel built from this checkout,
# unpacked into _build/wheel-site/ and put first on PYTHONPATH (kernels inherit it). A module or data file missing
# from the wheel fails here, not in Colab. (tests/package/test_packaging.py checks where dpo_grpo was imported from.)
WHEEL_SITE := $(CURDIR)/_build/wheel-site
wheel: $(STAMP)
	rm -rf _build/wheel $(WHEEL_SITE)
	$(PY) -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation -w _build/wheel .
	rm -rf build
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --target $(WHEEL_SITE) _build/wheel/dpo_grpo-*.whl

# One pytest worker per CPU (pytest-xdist). The tests that read the book build run last; the first worker to reach
# them builds the book (a file lock, tests/conftest.py) and both then read it. The 25 slowest tests are listed.
TEST_WORKERS ?= auto
test: $(STAMP) $(NODE_STAMP) wheel
	PYTHONPATH=$(WHEEL_SITE) DPO_GRPO_FROM_WHEEL=1 $(PY) -m pytest tests -n $(TEST_WORKERS) --dist loadgroup --durations=25

# The reader edition for Jupyter/Colab (no MyST; numbers from the executed build in _build/jupyter_execute, or
# executed here when `make book` has not run): _build/notebooks/. The Pages workflow publishes it on the
# `notebooks` branch, where the Colab links point. The Chinese reader edition goes to _build/notebooks/zh/.
notebooks: $(STAMP)
	$(PY) scripts/reader_edition.py --executed _build/jupyter_execute --out _build/notebooks
	$(PY) scripts/zh_edition.py generate
	$(PY) scripts/reader_edition.py --lang zh

# The student edition, both languages: the reader edition (make notebooks: numbers filled in, no MyST) with its
# solution cells removed, notebooks only, into _build/student/ and _build/student/zh/. `make notebooks` is the costly
# part (after `make book` it only converts, seconds; alone, it executes every chapter of both editions first); the
# last step needs only the package: `pip install dpo-grpo` and the same command on a copy of the reader edition (the
# `notebooks` branch) make the handouts without this environment. The graded edition: add --graded (README).
student: notebooks
	rm -rf _build/student
	$(PY) -m dpo_grpo.exercises student _build/notebooks _build/student
	$(PY) -m dpo_grpo.exercises student _build/notebooks/zh _build/student/zh

clean:
	rm -rf _build _executed
