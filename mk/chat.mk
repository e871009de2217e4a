# Try what you trained: chat with a run, serve it over an OpenAI-compatible API, or open LlamaBoard.
#   make chat RUN=last PROMPT="hi"           one answer on stdout (no PROMPT: an interactive chat)
#   make chat RUN=last PROMPT_FILE=q.txt     the same, the prompt read from a file (`-`: stdin): never in `ps`
#   make serve RUN=last PORT=8000            http://127.0.0.1:8000/v1 until Ctrl-C, behind a key (export ROCMFT_API_KEY, else generated)
#   make webui                               LlamaBoard on http://127.0.0.1:7860 (ARCH=, in its container)
#   make eval RUN=last                       base vs tuned on the held-out rows: eval.json + eval.md in the run dir
#   make eval RUN=last TASKS=mmlu,gsm8k      base vs tuned on lm-evaluation-harness tasks (or a task YAML's path)
# Each runs where the run trained (RUNTIME=local|docker to choose), with the run's own template.
.PHONY: chat serve webui eval
PORT ?=
PROMPT_FILE ?=
DATA ?=
N ?=
LIMIT ?=
FEWSHOT ?=
# HOST and PROMPT count only when given on make's command line ($(call from_cmdline,...)): zsh keeps HOST
# (the machine's name) and PROMPT (its prompt string) as shell variables, and one exported by a profile must
# not become a bind address or a question.
# PROMPT reaches the CLI on stdin (`--prompt-file=-`), from the environment make exports it in, never as an
# argument: a command line (bash's and the CLI's) is in every local user's `ps` while the model answers.
# Make's own command line still holds it: PROMPT_FILE= (or `... | make chat PROMPT_FILE=-`) keeps it private.
RUN_ARGS = $(call q,$(or $(RUN),last)) $(call opt,--set,$(SET))
SERVE_FLAGS = $(call opt,--runtime,$(RUNTIME)) $(call opt,--gpus,$(GPUS)) $(call opt,--image,$(IMAGE_REF))

chat: host ## [try] talk to a run with its adapter (or merged export) and template (RUN=<dir>|last, PROMPT="..." or PROMPT_FILE= answers once, SET=, RUNTIME=)
	$(call stack_when_local,chat $(RUN_ARGS) $(SERVE_FLAGS))
	@$(if $(call from_cmdline,PROMPT),printf '%s' "$$PROMPT" | )$(ROCMFT) chat $(RUN_ARGS) $(if $(call from_cmdline,PROMPT),--prompt-file=-) $(call opt,--prompt-file,$(PROMPT_FILE)) $(SERVE_FLAGS)

serve: host ## [try] OpenAI-compatible API for a run until Ctrl-C (RUN=, PORT=8000, HOST=127.0.0.1, a key: exported ROCMFT_API_KEY or generated, SET=, RUNTIME=)
	$(call stack_when_local,serve $(RUN_ARGS) $(SERVE_FLAGS))
	@$(ROCMFT) serve $(RUN_ARGS) $(call opt,--port,$(PORT)) $(call opt,--host,$(call from_cmdline,HOST)) $(SERVE_FLAGS)

webui: host ## [try] LlamaBoard for interactive experiments (ARCH=, PORT=7860, HOST=127.0.0.1; always a login: ROCMFT_WEBUI_PASSWORD or generated; GPU arches in their container)
	$(call stack_when_local,webui $(call opt,--arch,$(ARCH)) $(SERVE_FLAGS))
	@$(ROCMFT) webui $(call opt,--arch,$(ARCH)) $(call opt,--port,$(PORT)) $(call opt,--host,$(call from_cmdline,HOST)) $(SERVE_FLAGS)

eval: host ## [try] did it help? a run vs its base: held-out loss/perplexity/BLEU/ROUGE, or TASKS=mmlu,path/task.yaml on lm-evaluation-harness (LIMIT=, FEWSHOT=, RUN=, DATA=, N=, RUNTIME=)
	$(call stack_when_local,eval $(call q,$(or $(RUN),last)) $(SERVE_FLAGS))
	@$(ROCMFT) eval $(call q,$(or $(RUN),last)) $(call opt,--data,$(DATA)) $(call opt,--rows,$(N)) $(call opt,--tasks,$(TASKS)) $(call opt,--limit,$(LIMIT)) $(call opt,--fewshot,$(FEWSHOT)) $(SERVE_FLAGS)
