# Fetch: the model (and the Hub datasets) a run reads, into HF_HOME, where there is internet (a login node), so
# a job without it (Slurm compute nodes; HF_HUB_OFFLINE=1) finds them in the cache. The token comes from the
# environment (export HF_TOKEN=...; never on make's command line, see the Makefile's rule 4).
# TASKS=mmlu,arc_easy: the datasets of lm-evaluation-harness tasks (what `make eval TASKS=` reads), alone or beside
# MODEL= or a RECIPE= given on the command line.
MODEL ?=
TASKS ?=

FETCH_RECIPE = $(if $(TASKS),$(call from_cmdline,RECIPE),$(RECIPE))
FETCH_WHAT = $(if $(MODEL),--model=$(call q,$(MODEL)),$(if $(FETCH_RECIPE),$(call q,$(FETCH_RECIPE)) $(call opt,--set,$(SET)))) \
             $(call opt,--tasks,$(TASKS)) $(call opt,--arch,$(ARCH)) $(call opt,--runtime,$(RUNTIME))

.PHONY: fetch
fetch: host ## [data] download RECIPE's Hub model + datasets into HF_HOME with a progress bar, resumable (MODEL=org/name instead; TASKS=mmlu,... benchmarks' datasets; RUNTIME=local|docker)
	$(call stack_when_local,fetch $(FETCH_WHAT))
	@$(ROCMFT) fetch $(FETCH_WHAT)
