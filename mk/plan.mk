# Planner: GPU memory per GPU, verdict, suggestions and expected throughput, without a GPU (docs/plan.md).
STEPS ?=
PRICE ?=
PROFILE ?=

.PHONY: plan plan-all
plan: host ## [start] memory per GPU, fits/tight/does not fit, suggestions, tokens/s and time (RECIPE=, SET=, ARCH=, NODES=, STEPS=, PRICE=: GPU-hours and cost, PROFILE=reference: the reference row lengths)
	@$(ROCMFT) plan $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(call opt,--arch,$(ARCH)) $(call opt,--nodes,$(NODES)) $(call opt,--steps,$(STEPS)) $(call opt,--price,$(PRICE)) $(call opt,--profile,$(PROFILE))

plan-all: host ## [start] a table of every shipped recipe on the reference row lengths: GiB per GPU against capacity, verdict, tokens/s/GPU
	@$(ROCMFT) plan-all
