# Datasets: check a file (JSONL, JSON array, Parquet, CSV, .txt) row by row, keep the good rows, name every bad one and
# count the duplicates, register it for LLaMA-Factory in your workspace (my/data/, ignored by git; DATA_DIR= elsewhere).
IN        ?=
NAME      ?=
FORMAT    ?=
TOKENIZER ?=
CONVERT   ?=
DEDUP     ?=
DATA_DIR  ?=

DATA_FLAGS = $(call opt,--format,$(FORMAT)) $(call opt,--recipe,$(RECIPE)) $(call opt,--tokenizer,$(TOKENIZER)) \
             $(call opt,--data-dir,$(DATA_DIR)) $(if $(call is_set,$(FORCE)),--force) $(if $(call is_set,$(CONVERT)),--convert) \
             $(if $(call is_set,$(DEDUP)),--dedup)
# Parquet and CSV are read with pyarrow/pandas, as LLaMA-Factory's loader reads them: the training stack has them.
DATA_STACK = $(if $(TOKENIZER)$(filter %.parquet %.csv %.PARQUET %.CSV,$(IN)),setup)
missing = @echo "error: $(1): missing: $(2)" >&2; exit 2

.PHONY: data data-check
data: host $(DATA_STACK) ## [data] check IN=file (JSONL, JSON array, Parquet, CSV, .txt; SFT, pairs, KTO, text), count duplicates and the recipe's held-out copies, write my/data/NAME.jsonl + rejects, register NAME (DEDUP=1 FORMAT= RECIPE= TOKENIZER= FORCE=1 DATA_DIR=)
	$(if $(IN),,$(call missing,IN,the file to check (make data IN=path.jsonl NAME=my_data)))
	$(if $(NAME),,$(call missing,NAME,the name to register the dataset under (make data IN=path.jsonl NAME=my_data)))
	@$(ROCMFT) data $(call q,$(IN)) $(call q,$(NAME)) $(DATA_FLAGS)

data-check: host $(DATA_STACK) ## [data] report on IN=file only: rows, rejects by reason, duplicates, held-out copies, lengths; writes nothing (RECIPE= TOKENIZER= FORMAT=)
	$(if $(IN),,$(call missing,IN,the file to check (make data-check IN=path.jsonl)))
	@$(ROCMFT) data $(call q,$(IN)) --check $(DATA_FLAGS)
