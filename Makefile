# rocmft: `make help` lists every target. Variables are set on the command line: make train RECIPE=x SET="k=v".
#
# How a value reaches the CLI (every target follows this; a value must arrive byte for byte, never as a command):
#  1. Every variable from make's command line is its raw text. Make would expand `$` in it wherever it is read
#     or exported, so `$(shell ...)` inside a value would run and `$HOME` would become `OME`. The lines below
#     turn each one (and each environment variable holding a `$`) into a simple variable holding the raw text,
#     before anything reads it; it stays exported, as make exports command-line variables.
#  2. In a recipe a value is one shell word: $(call q,$(VAR)), or $(call opt,--flag,$(VAR)) for `--flag=VALUE`
#     only when VAR is set. Never '$(VAR)', "$(VAR)" or a bare $(VAR): a quote, `;`, `$(` or a space in the
#     value would become shell syntax. A list the user gives as words: $(call qwords,$(FILES)).
#  3. Switches are read by make and become a fixed flag: $(if $(call is_set,$(FORCE)),--force).
#  4. A credential (*TOKEN, *KEY, *SECRET*, *PASSWORD) on make's command line is refused: it would sit in the
#     process list for the job's life. Export it in the shell; the CLI passes it on by name. (K8S_SECRET names a
#     Kubernetes Secret; it holds none.)
# tests/unit/cli/test_make_quoting.py runs every target with a hostile value in every variable.
.DEFAULT_GOAL := help
SHELL := /bin/bash

CMDLINE_VARS := $(strip $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v))))
RAW_VARS := $(strip $(foreach v,$(filter-out MAKE% SHELL,$(.VARIABLES)),$(if $(findstring $$,$(v))$(findstring :,$(v))$(findstring \#,$(v)),,\
              $(if $(filter command line,$(origin $(v))),$(v),\
              $(if $(filter environment,$(origin $(v))),$(if $(findstring $$,$(value $(v))),$(v)))))))
$(foreach v,$(RAW_VARS),$(eval override $(v) := $$(value $(v))))
export $(RAW_VARS)
$(foreach v,$(filter-out K8S_SECRET,$(CMDLINE_VARS)),$(if $(and $(value $(v)),$(filter %TOKEN %KEY %PASSWORD,$(v))$(findstring SECRET,$(v))),\
  $(error $(v): a secret on make's command line stays in the process list while the job runs: export $(v)=... in your shell, then run make without it)))
# The value of VAR only when it was given on make's command line (see mk/chat.mk: HOST, PROMPT).
from_cmdline = $(if $(filter $(1),$(CMDLINE_VARS)),$($(1)))

define newline


endef
# One shell word holding the text exactly (nothing for an empty value): bash's $'...' with \ ' and newline escaped
# (make cuts a recipe line at a raw newline, even inside quotes).
override q = $(if $(1),$$'$(subst $(newline),\n,$(subst ',\',$(subst \,\\,$(1))))')
override qwords = $(foreach w,$(1),$(call q,$(w)))
# `--flag=VALUE` only when set, so the CLI's own defaults apply otherwise (`=`: a value may start with `-`).
override opt = $(if $(strip $(2)),$(1)=$(call q,$(2)))
override is_set = $(filter 1 yes true,$(1))

RECIPE  ?= tiny-cpu
ARCH    ?=
SET     ?=
RUNTIME ?=
GPUS    ?=
NODES   ?=
RESUME  ?=
FROM    ?=
RUN     ?=
RUN_NAME ?=
FORCE   ?=
TO      ?=
MAX_RESTARTS ?=
TUNE    ?=

VENV   := .venv
PY     := $(VENV)/bin/python
ROCMFT := $(VENV)/bin/rocmft
export TORCH_EXTENSIONS_DIR ?= $(CURDIR)/.cache/torch_extensions
export MPLCONFIGDIR ?= $(CURDIR)/.cache/matplotlib

TRAIN_FLAGS = $(call opt,--runtime,$(RUNTIME)) $(call opt,--gpus,$(GPUS)) $(call opt,--nodes,$(NODES)) \
              $(call opt,--arch,$(ARCH)) $(call opt,--resume,$(RESUME)) $(call opt,--from,$(FROM)) \
              $(call opt,--run-name,$(RUN_NAME)) \
              $(if $(call is_set,$(FORCE)),--force) $(call opt,--docker-image,$(IMAGE_REF)) \
              $(call opt,--max-restarts,$(MAX_RESTARTS)) $(if $(call is_set,$(TUNE)),--tune)

.PHONY: help host setup
# `make help` lists each target under its workflow group: the `[group]` tag that starts the target's own `##` line.
# A new target joins its group by that tag alone; one without a known tag is listed under "other".
HELP_GROUPS = start data train try gpu cluster dev
HELP_TITLES = start=start: set up, pick and shape a recipe (RECIPE= SET= ARCH=)~\
  data=data: your datasets (IN= NAME=; they go to my/data/)~\
  train=train: run it, watch it (RECIPE= SET= RUNTIME=local|docker|slurm|k8s GPUS= NODES= RESUME=<run>|last FROM=<run>|last)~\
  try=try: talk to, serve, evaluate, export what you trained (RUN=<run>|last)~\
  gpu=GPU box: the host, the images, measurements (ARCH= GPUS= IMAGE_REF=)~\
  cluster=cluster: make train RUNTIME=slurm|k8s NODES= PARTITION= ACCOUNT= TIME= CONTAINER= SIF= K8S_NAMESPACE= K8S_PVC= (docs/multinode.md)~\
  dev=develop: tests and CI

help: ## [start] list the targets by workflow, each with the variables it takes (this screen)
	@awk -v order="$(HELP_GROUPS)" -v titles='$(HELP_TITLES)' 'BEGIN { FS = ":.*## "; n = split(titles, t, "~") \
	    ; for (i = 1; i <= n; i++) { split(t[i], kv, "="); sub(/^ +/, "", kv[1]); title[kv[1]] = substr(t[i], index(t[i], "=") + 1) } } \
	  /^[a-zA-Z0-9_.-]+:.*## / { text = $$2; group = "other" \
	    ; if (match(text, /^\[[a-z]+\] /)) { group = substr(text, 2, RLENGTH - 3); text = substr(text, RLENGTH + 1) } \
	    ; if (!(group in lines)) seen[++groups] = group; lines[group] = lines[group] sprintf("  %-16s %s\n", $$1, text) } \
	  END { k = split(order, o, " "); for (i = 1; i <= k; i++) { shown[o[i]] = 1; if (o[i] in lines) printf "%s\n%s\n", title[o[i]], lines[o[i]] } \
	    ; for (i = 1; i <= groups; i++) if (!(seen[i] in shown)) printf "%s:\n%s\n", seen[i], lines[seen[i]] }' $(MAKEFILE_LIST)

host: ## [start] the light host in .venv: the rocmft CLI + jinja2, pyyaml, rich, Docker SDK; no torch (seconds; idempotent)
	@bash scripts/host-venv.sh

setup: host ## [start] the CPU training venv: + CPU torch (never CUDA), pinned LLaMA-Factory/DeepSpeed, test tools (TORCH_INDEX_URL=)
	@bash scripts/setup-venv.sh

# RUNTIME=local (the default for cpu recipes and runs) runs in this venv and needs the CPU training stack;
# docker, slurm and k8s run the image's own stack, so the light host is enough. The CLI says which one a
# command resolves to (--print-runtime); a command it cannot resolve reports its own error after.
stack_when_local = @if [[ "$$($(ROCMFT) $(1) --print-runtime 2>/dev/null)" == local ]]; then bash scripts/setup-venv.sh; fi
stack_if_local = $(call stack_when_local,train $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(call opt,--runtime,$(RUNTIME)) $(call opt,--arch,$(ARCH)))

include mk/*.mk
