# Benchmarks: a fixed number of measured steps -> one row in results/bench.csv; the report puts the planner beside it.
STEPS   ?= 20
RESULTS ?=
PLOT    ?=
BENCH_FLAGS = $(call opt,--steps,$(STEPS)) $(call opt,--results,$(RESULTS)) $(call opt,--price,$(PRICE))

.PHONY: bench bench-report
bench: host $(if $(filter tiny-cpu,$(RECIPE)),tiny-model) ## run RECIPE for STEPS=20 steps (saving off), append one measured row to results/bench.csv (SET=, RUNTIME=, GPUS=, RESULTS=, TUNE=1, PRICE=: GPU-hours and cost)
	$(stack_if_local)
	@$(ROCMFT) bench $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(BENCH_FLAGS) $(TRAIN_FLAGS) $(MULTINODE_FLAGS)

bench-report: host ## print results/bench.csv with the planner's prediction and error % beside each row, plot results/bench.png (RESULTS=, PLOT=)
	@$(ROCMFT) bench-report $(call opt,--results,$(RESULTS)) $(call opt,--plot,$(PLOT))
