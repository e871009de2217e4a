# Recipes: discover, inspect, copy, render, validate.
.PHONY: list show copy render validate
list: host ## list the recipes with arch, GPUs and a one-line description
	@$(ROCMFT) list

show: host ## print the fully resolved recipe (RECIPE=, SET=)
	@$(ROCMFT) show $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(call opt,--arch,$(ARCH))

copy: host ## copy a recipe to start your own (RECIPE=x TO=my-x; never overwrites)
	@$(ROCMFT) copy $(call q,$(RECIPE)) $(call q,$(TO))

render: host ## render + validate a recipe into a new run dir (RECIPE=, SET=)
	@$(ROCMFT) render $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(call opt,--arch,$(ARCH)) $(call opt,--nodes,$(NODES)) $(call opt,--run-name,$(RUN_NAME))

validate: host ## validate every shipped recipe, or FILES="a.yaml b.json" with LLaMA-Factory's and DeepSpeed's own checks
	@$(ROCMFT) validate $(or $(call qwords,$(FILES)),--all)
