# rocmft: `make help` lists every target. Variables are set on the command line: make train RECIPE=x SET="k=v".
.DEFAULT_GOAL := help
SHELL := /bin/bash

RECIPE  ?= tiny-cpu
ARCH    ?=
SET     ?=
RUNTIME ?=
GPUS    ?=
NODES   ?=
RESUME  ?=
RUN     ?=
RUN_NAME ?=
FORCE   ?=
TO      ?=

VENV   := .venv
PY     := $(VENV)/bin/python
ROCMFT := $(VENV)/bin/rocmft
export TORCH_EXTENSIONS_DIR ?= $(CURDIR)/.cache/torch_extensions
export MPLCONFIGDIR ?= $(CURDIR)/.cache/matplotlib

# Optional arguments become flags only when set, so the CLI's own defaults apply otherwise.
opt = $(if $(strip $(2)),$(1) $(2))
TRAIN_FLAGS = $(call opt,--runtime,$(RUNTIME)) $(call opt,--gpus,$(GPUS)) $(call opt,--nodes,$(NODES)) \
              $(call opt,--arch,$(ARCH)) $(call opt,--resume,$(RESUME)) $(call opt,--run-name,$(RUN_NAME)) \
              $(if $(filter 1 yes true,$(FORCE)),--force) $(call opt,--docker-image,$(IMAGE_REF))

.PHONY: help host setup
help: ## list the targets (this screen)
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | sort | awk 'BEGIN {FS = ":.*## "}; {printf "  %-14s %s\n", $$1, $$2}'
	@echo; echo "  Variables: RECIPE=$(RECIPE) ARCH= SET=\"k=v ...\" RUNTIME=local|docker|slurm|k8s GPUS=0,1 NODES= RESUME=<run>|last FORCE=1"

host: ## the light host in .venv: the rocmft CLI + jinja2, pyyaml, rich, Docker SDK; no torch (seconds; idempotent)
	@bash scripts/host-venv.sh

setup: host ## the CPU training venv: + CPU torch (never CUDA), pinned LLaMA-Factory/DeepSpeed, test tools (TORCH_INDEX_URL=)
	@bash scripts/setup-venv.sh

# RUNTIME=local (the default for cpu recipes and runs) runs in this venv and needs the CPU training stack;
# docker, slurm and k8s run the image's own stack, so the light host is enough. The CLI says which one a
# command resolves to (--print-runtime); a command it cannot resolve reports its own error after.
stack_when_local = @if [[ "$$($(ROCMFT) $(1) --print-runtime 2>/dev/null)" == local ]]; then bash scripts/setup-venv.sh; fi
stack_if_local = $(call stack_when_local,train $(RECIPE) --set '$(SET)' $(call opt,--runtime,$(RUNTIME)) $(call opt,--arch,$(ARCH)))

include mk/*.mk
