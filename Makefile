# Two entry points (see README): `make book` builds the book, executing every chapter; `make test` runs all tests.
# Both create .venv on first use and install requirements.txt plus this package (editable).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# myst-nb needs an HTML representation of each plotly figure in the static pages (see book/README notes).
export PLOTLY_RENDERER ?= plotly_mimetype+notebook
export PYDEVD_DISABLE_FILE_VALIDATION = 1

.PHONY: book test install student clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

book: $(STAMP)
	$(VENV)/bin/jupyter-book build . --all -W -n --keep-going

test: $(STAMP)
	$(PY) -m pytest tests --nbmake book

student: $(STAMP)
	$(PY) -m dpo_grpo.exercises student book _build/student

clean:
	rm -rf _build
