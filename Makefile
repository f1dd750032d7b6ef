# vitsweep: `make run` sets up and runs the main job; `make test` sets up and runs the tests.
# Both create .venv/ in the repository root and install into it when it is missing or stale.
#
# torch is pinned to 2.13.0. Where a local CPU wheel is configured (as on the project's CI
# machines) pip takes it; elsewhere pip takes PyPI's build (CUDA on Linux). On a CPU-only
# machine without a local wheel, skip the CUDA download with PyTorch's CPU index:
#     make run TORCH_INDEX=https://download.pytorch.org/whl/cpu

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_INDEX ?=
PIP_FLAGS := --quiet --disable-pip-version-check $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))

.PHONY: run paper-grid test lint chaos system-tools stack stack-down bench bench-full bench-packing bench-device bench-onepass bench-steps bench-readback bench-main-job device-check clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "vitsweep needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)

# pip compiles the packages' bytecode one file after another; compileall does it on every core (a fresh
# venv's install on 2 cores, two of each in turns: 169 s against 208 s, the medians; 0.78-0.84x pair by
# pair). Like pip's own step, it passes over the files that do not compile on this Python (torch ships one
# written for 3.12).
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install $(PIP_FLAGS) --no-compile -e '.[dev]'
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null || true
	touch $@

# The main job: the bundled sample-complexity sweep on the embedded default (a local Ray on
# 127.0.0.1 and a SQLite MLflow store under runs/). Browse it with: .venv/bin/vitsweep ui
run: $(VENV)/.installed
	$(BIN)/vitsweep run sweeps/sample_complexity.yaml

# Li et al.'s Fig. 1 grid in four arms (one pass | multi-pass, each at a fixed (B, eta) and tuned), then the
# paper's N* beside each arm's per column, and the paper's boundary drawn over ours (runs/reports/paper-grid-*).
# A finished arm is not trained again (its sweep is recorded; `vitsweep run --new` starts one afresh).
GRID_ARMS := fig1_grid_one_pass fig1_grid_one_pass_tuned fig1_grid_multi_pass fig1_grid_multi_pass_tuned
paper-grid: $(VENV)/.installed
	for arm in $(GRID_ARMS); do $(BIN)/vitsweep run sweeps/$$arm.yaml || exit 1; done
	$(BIN)/vitsweep paper $(GRID_ARMS)

# Two pytest-xdist workers, a test file to each at a time, in the files' order (the compose stack's
# first, then those that start no Ray: tests/conftest.py): one after the other, a third of the
# suite's time on 2 cores was one core idle, waiting on processes the tests started (Ray, servers,
# containers).
test: $(VENV)/.installed system-tools lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=30

# The inner loop: every test not marked `system` (no Ray, MLflow server, Docker, Slurm, browser or
# benchmark; pyproject.toml's markers, tests/conftest.py's guard), on two workers, test by test.
test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest -q -n 2 -m "not system" --durations=10

# ruff's lint rules and formatting (pyproject.toml [tool.ruff]); `$(BIN)/ruff format .` applies the format
lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The kill-anywhere loop, longer than the suite's: a grid and an adaptive sweep killed (kill -9 of
# the driver's process group) at every phase of tests/kill_at.py, then at random moments, each
# resumed and compared with an uninterrupted run; one JSON line of counts (docs/resume.md).
RANDOM_KILLS ?= 6
chaos: $(VENV)/.installed
	$(BIN)/python tests/chaos.py --random-kills $(RANDOM_KILLS)

# Debian packages the tests and specs use, as PACKAGE:COMMAND (or PACKAGE:/a file it installs):
# docker-compose (validates docker/ without an engine), chromium (reads the MLflow UI), slurm-wlm and
# munge (tests/test_slurm.py runs a Slurm cluster on this machine), dataset-fashion-mnist (the real
# images of sweeps/fashion*.yaml). Installed when missing and we are root; without them those checks
# skip and say why.
SYSTEM_TOOLS := docker-compose:docker-compose chromium:chromium slurm-wlm:slurmctld munge:munged \
	dataset-fashion-mnist:/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz
system-tools:
	@missing=$$(for t in $(SYSTEM_TOOLS); do p=$${t#*:}; \
		{ if [ "$${p#/}" != "$$p" ]; then test -e "$$p"; else command -v "$$p"; fi; } >/dev/null || echo $${t%%:*}; done); \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing $$missing (apt)"; \
		{ DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; } || \
		echo "could not install $$missing: tests that need them will skip"; \
	elif [ -n "$$missing" ]; then echo "not installed: $$missing (tests that need them will skip)"; fi

# The workstation stack (docker/docker-compose.yml) up on this machine: PostgreSQL, the MLflow server,
# a Ray head and two workers, on 127.0.0.1. docker/stack.py starts a private dockerd where no engine
# answers (root), builds the base and PostgreSQL images from Debian's packages where the registry's
# cannot be pulled, and the project's image from a local wheelhouse; docker/.env is written with
# fresh secrets if missing. `make stack-down` stops it (VOLUMES=1 deletes its data too).
stack: $(VENV)/.installed
	$(BIN)/python docker/stack.py up --workers 2

stack-down:
	$(PYTHON) docker/stack.py down $(if $(VOLUMES),--volumes)

# Issue 8's benchmark: a subset of W1 (Li et al.'s Fig 1 grid) three ways: vitsweep, one model per
# Ray Tune trial, a plain loop; ratios and the FLOP fraction, last stdout line JSON (bench/results/).
bench: $(VENV)/.installed
	$(BIN)/python bench/fig1.py

# Issue 29's benchmark: W2, the main job's one-pass workload (its tuned grid), three ways: vitsweep,
# one model per Ray Tune trial, a plain loop; its FLOP and random-number limits and each model's
# data share; last stdout line JSON (bench/results/onepass.json). BASELINE=REV also runs vitsweep on
# a worktree of REV, side by side; DEVICE=cuda trains the loop and the data share on a GPU.
BASELINE ?=
bench-onepass: $(VENV)/.installed
	$(BIN)/python bench/onepass.py $(if $(BASELINE),--baseline $(BASELINE)) $(if $(DEVICE),--device $(DEVICE))

# Issue 68's step benchmark: W2 (the main job) and W3 (the premises' widest model and largest batch), a pack of
# each model kind: model-steps per second, the share of one core's matmul rate, the share of a step outside
# matmuls; BASELINE=REV measures a worktree of REV in the same run and prints new / REV ratios. Last stdout line
# JSON (bench/results/steps.json); ~3 minutes on 2 quiet cores.
bench-steps: $(VENV)/.installed
	$(BIN)/python bench/steps.py $(if $(BASELINE),--baseline $(BASELINE))

# Issue 68's GPU check, at most 8 minutes: W2's and W3's steps on CUDA, and the
# main job through `vitsweep run` with its trials sharing the GPU; JSON files in OUT. Without a GPU, a CPU
# fallback at toy sizes (what `make test` runs).
OUT ?= bench/results/device-check
device-check: $(VENV)/.installed
	$(BIN)/python bench/device_check.py --out $(OUT)

# All of W1 (4,000 trainings) through vitsweep only, timed.
# Issue 93's contract: the main job at BASELINE and at this tree in one run, the time ratio of their sweeps and
# whether they give the same answer (vitsweep compare's contract); ~12 minutes on 2 quiet cores.
bench-main-job: $(VENV)/.installed
	$(BIN)/python bench/main_job.py --baseline $(or $(BASELINE),$(error BASELINE=REV: the revision to measure against))

# Issue 85's read-back benchmark: `report` and `export --table cells` of a recorded sweep (HOME_DIR, default
# runs/: what `make run` records), this tree against BASELINE (default HEAD~1), medians of 3, outputs compared.
bench-readback: $(VENV)/.installed
	$(BIN)/python bench/readback.py --home $(or $(HOME_DIR),runs) $(if $(BASELINE),--baseline $(BASELINE))

bench-full: $(VENV)/.installed
	$(BIN)/python bench/fig1.py --full --out bench/results/fig1_full.json

bench-packing: $(VENV)/.installed
	$(BIN)/python bench/packing.py

# All of W1 through vit_core alone on one device (a GPU when there is one): a pack per cell
# against one model at a time on the same device. DEVICE=cuda:1 picks another.
DEVICE ?=
bench-device: $(VENV)/.installed
	$(BIN)/python bench/device.py $(if $(DEVICE),--device $(DEVICE))

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
