# Recipes: discover, inspect, copy, import, render, validate.
FILE          ?=
DS            ?=
CMD           ?=
GPUS_PER_NODE ?=
KEEP_DS       ?=

.PHONY: list show copy import render validate
list: host ## [start] list the recipes with arch, GPUs and a one-line description
	@$(ROCMFT) list

show: host ## [start] print the fully resolved recipe (RECIPE=, SET=)
	@$(ROCMFT) show $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(call opt,--arch,$(ARCH))

copy: host ## [start] copy a recipe to start your own (RECIPE=x TO=my-x; never overwrites)
	@$(ROCMFT) copy $(call q,$(RECIPE)) $(call q,$(TO))

import: host ## [start] your LLaMA-Factory config as a recipe in my/recipes/ (FILE=train.yaml [DS=ds.json] [KEEP_DS=1: that JSON as written] [ARCH=] [GPUS_PER_NODE=] [CMD='...'] TO=name)
	@$(ROCMFT) import $(call q,$(FILE)) $(call q,$(TO)) $(call opt,--ds,$(DS)) $(call opt,--arch,$(ARCH)) \
	  $(call opt,--gpus-per-node,$(GPUS_PER_NODE)) $(call opt,--cmd,$(CMD)) $(if $(call is_set,$(KEEP_DS)),--keep-ds)

render: host ## [start] render + validate a recipe into a new run dir (RECIPE=, SET=)
	@$(ROCMFT) render $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(call opt,--arch,$(ARCH)) $(call opt,--nodes,$(NODES)) $(call opt,--run-name,$(RUN_NAME))

# validate: FILES= first, else RECIPE= (given on the command line) or SET= validates that one recipe, else every shipped one.
VALIDATE_WHAT = $(or $(call qwords,$(FILES)),$(if $(call from_cmdline,RECIPE)$(SET),--recipe=$(call q,$(RECIPE)) $(call opt,--set,$(SET)),--all))

validate: host ## [start] validate RECIPE= with SET= (or FILES="a.yaml b.json": any LLaMA-Factory YAML or DeepSpeed JSON; neither: every shipped recipe) with LLaMA-Factory's and DeepSpeed's own checks (ARCH=)
	@$(ROCMFT) validate $(VALIDATE_WHAT) $(call opt,--arch,$(ARCH))
