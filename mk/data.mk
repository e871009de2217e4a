# Datasets: check a JSONL (or .txt) file row by row, keep the good rows, name every bad one, register it for LLaMA-Factory.
IN        ?=
NAME      ?=
FORMAT    ?= auto
TOKENIZER ?=
CONVERT   ?=
DATA_DIR  ?=

DATA_FLAGS = $(call opt,--format,$(FORMAT)) $(call opt,--recipe,$(RECIPE)) $(call opt,--tokenizer,$(TOKENIZER)) \
             $(call opt,--data-dir,$(DATA_DIR)) $(if $(call is_set,$(FORCE)),--force) $(if $(call is_set,$(CONVERT)),--convert)
missing = @echo "error: $(1): missing: $(2)" >&2; exit 2

.PHONY: data data-check
data: host $(if $(TOKENIZER),setup) ## check IN=file.jsonl|.txt (SFT, pairs, KTO, text), write data/NAME.jsonl + rejects, register NAME (FORMAT= TOKENIZER= CONVERT=1 FORCE=1)
	$(if $(IN),,$(call missing,IN,the .jsonl file to check (make data IN=path.jsonl NAME=my_data)))
	$(if $(NAME),,$(call missing,NAME,the name to register the dataset under (make data IN=path.jsonl NAME=my_data)))
	@$(ROCMFT) data $(call q,$(IN)) $(call q,$(NAME)) $(DATA_FLAGS)

data-check: host $(if $(TOKENIZER),setup) ## report on IN=file.jsonl only: rows, rejects by reason, lengths (writes and registers nothing)
	$(if $(IN),,$(call missing,IN,the .jsonl file to check (make data-check IN=path.jsonl)))
	@$(ROCMFT) data $(call q,$(IN)) --check $(DATA_FLAGS)
