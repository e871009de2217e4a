# Datasets: check a JSONL file row by row, keep the good rows, name every bad one, register it for LLaMA-Factory.
IN        ?=
NAME      ?=
FORMAT    ?= auto
TOKENIZER ?=
CONVERT   ?=
DATA_DIR  ?=

# User values reach the shell as environment variables, never pasted into the command line: a NAME or
# path with quotes or `;` stays one argument, and `rocmft data` then refuses a NAME that is not a plain word.
data data-check: export DATA_IN := $(IN)
data data-check: export DATA_NAME := $(NAME)
data data-check: export DATA_FORMAT := $(FORMAT)
data data-check: export DATA_TOKENIZER := $(TOKENIZER)
data data-check: export DATA_DIR_ARG := $(DATA_DIR)
data data-check: export DATA_RECIPE := $(RECIPE)
DATA_FLAGS = --format "$$DATA_FORMAT" --recipe "$$DATA_RECIPE" $${DATA_TOKENIZER:+--tokenizer "$$DATA_TOKENIZER"} \
             $${DATA_DIR_ARG:+--data-dir "$$DATA_DIR_ARG"} \
             $(if $(filter 1 yes true,$(FORCE)),--force) $(if $(filter 1 yes true,$(CONVERT)),--convert)

.PHONY: data data-check
data: host $(if $(TOKENIZER),setup) ## check IN=file.jsonl, write data/NAME.jsonl + rejects, register NAME (FORMAT= TOKENIZER= CONVERT=1 FORCE=1)
	@[[ -n "$$DATA_IN" ]] || { echo "error: IN: missing: the .jsonl file to check (make data IN=path.jsonl NAME=my_data)" >&2; exit 2; }
	@[[ -n "$$DATA_NAME" ]] || { echo "error: NAME: missing: the name to register the dataset under (make data IN=path.jsonl NAME=my_data)" >&2; exit 2; }
	@$(ROCMFT) data "$$DATA_IN" "$$DATA_NAME" $(DATA_FLAGS)

data-check: host $(if $(TOKENIZER),setup) ## report on IN=file.jsonl only: rows, rejects by reason, lengths (writes and registers nothing)
	@[[ -n "$$DATA_IN" ]] || { echo "error: IN: missing: the .jsonl file to check (make data-check IN=path.jsonl)" >&2; exit 2; }
	@$(ROCMFT) data "$$DATA_IN" --check $(DATA_FLAGS)
