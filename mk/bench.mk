# Benchmarks: a fixed number of measured steps -> one row in results/bench.csv; the report puts the planner beside it.
# STEPS has no default here: `rocmft bench` runs 20 without it, and a make default would reach `make plan` too
# (mk/plan.mk: there an empty STEPS times the recipe's own max_steps or epochs).
RESULTS ?=
PLOT    ?=
PRODUCT ?=
CSV     ?=
MATRIX  ?=
BENCH_FLAGS = $(call opt,--steps,$(STEPS)) $(call opt,--results,$(RESULTS)) $(call opt,--price,$(PRICE))

.PHONY: bench bench-report
bench: host $(if $(filter tiny-cpu,$(RECIPE)),tiny-model) ## [gpu] run RECIPE for STEPS=20 steps (saving off), append one measured row to results/bench.csv (SET=, RUNTIME=, GPUS=, RESULTS=, TUNE=1, PRICE=: GPU-hours and cost)
	$(stack_if_local)
	@$(ROCMFT) bench $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(BENCH_FLAGS) $(TRAIN_FLAGS) $(MULTINODE_FLAGS)

bench-report: host ## [gpu] print results/bench.csv with the planner's prediction and error % beside each row, plot results/bench.png (RESULTS=, PLOT=)
	@$(ROCMFT) bench-report $(call opt,--results,$(RESULTS)) $(call opt,--plot,$(PLOT))

# Hardware truth (benchmarks/gpu_truth.py, docs/bench.md): on a bare GPU machine the same script runs from the
# bundle without make: python3 benchmarks/gpu_truth.py run --bundle wheelhouse/gpu_truth
.PHONY: gpu-truth gpu-truth-bundle gpu-truth-report
gpu-truth: tiny-model ## [gpu] measure the planner on this machine's GPU (shipped recipes, random Llama-3-8B) -> results/gpu_truth-<gpu>.csv (DRY_RUN=1: CPU rehearsal; PRODUCT=; MATRIX=next: issue 48's configurations)
	@$(PY) benchmarks/gpu_truth.py run $(if $(call is_set,$(DRY_RUN)),--dry-run) $(call opt,--product,$(PRODUCT)) \
	  $(call opt,--matrix,$(MATRIX))

gpu-truth-bundle: setup ## [gpu] the pinned wheels gpu_truth needs on a bare GPU machine -> wheelhouse/gpu_truth/ (~25 MiB, carried there)
	@$(PY) benchmarks/gpu_truth.py bundle

gpu-truth-report: tiny-model ## [gpu] a measured results/gpu_truth-*.csv beside the planner as it is now (CSV=)
	@$(PY) benchmarks/gpu_truth.py report $(call q,$(CSV))
