# Planner: GPU memory per GPU, verdict, suggestions and expected throughput, without a GPU (docs/plan.md).
STEPS ?=
PRICE ?=

.PHONY: plan plan-all
plan: host ## [start] memory per GPU, fits/tight/does not fit, suggestions, tokens/s and time (RECIPE=, SET=, ARCH=, NODES=, STEPS=, PRICE=: GPU-hours and cost)
	@$(ROCMFT) plan $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(call opt,--arch,$(ARCH)) $(call opt,--nodes,$(NODES)) $(call opt,--steps,$(STEPS)) $(call opt,--price,$(PRICE))

plan-all: host ## [start] a table of every shipped recipe: GiB per GPU against capacity, verdict, tokens/s/GPU
	@$(ROCMFT) plan-all
