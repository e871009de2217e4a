# Training: the demo, train, export, the tiny model, and the tests.
# VERBOSE=1 (read by `rocmft train` from the environment, where make puts command-line variables) also
# streams the job's whole output; it always goes to <run dir>/train.log.
.PHONY: demo train export push tiny-model test test-unit test-train canary
MULTINODE_FLAGS ?=
# The demo and the tests never fetch a model or dataset from a hub (GPU recipes may: they name hub models).
demo test test-unit test-train: export HF_HUB_OFFLINE ?= 1
demo test test-unit test-train: export HF_DATASETS_OFFLINE ?= 1

tiny-model: setup ## build the tiny test model offline into models/tiny-llama (no hub)
	@$(PY) scripts/make_tiny_model.py

# The demo is recipes/tiny-cpu-demo.yaml (what it teaches and why); the question it asks both models:
DEMO_QUESTION = Who are you?

demo: setup tiny-model ## train the tiny model on CPU to answer "Who are you?", then show the base and the trained answer (VERBOSE=1 streams the job's log)
	@$(ROCMFT) train tiny-cpu-demo --runtime local $(call opt,--set,$(SET)) $(call opt,--run-name,$(RUN_NAME))
	@$(ROCMFT) chat $(call q,$(or $(RUN_NAME),last)) --runtime local --base-too --prompt=$(call q,$(DEMO_QUESTION)) \
	  --set "do_sample=false max_new_tokens=32"
	@echo "next: make chat RUN=last (talk to it), make eval RUN=last (base vs trained on held-out rows)"

train: host ## render + validate + plan + launch RECIPE (RUNTIME=, GPUS=, NODES=, RESUME=, FROM=, SET=, FORCE=1, VERBOSE=1, MAX_RESTARTS=, CANARY=1: make canary first, TUNE=1: GEMM tuning kept, DRY_RUN=1: print the launch plan, start nothing)
	$(stack_if_local)
	$(if $(call is_set,$(CANARY)),@$(ROCMFT) canary $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(call opt,--runtime,$(RUNTIME)) \
	  $(call opt,--arch,$(ARCH)) $(call opt,--docker-image,$(IMAGE_REF)))
	@$(ROCMFT) train $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(TRAIN_FLAGS) $(MULTINODE_FLAGS)

FORMAT ?=
OUTTYPE ?=
export: setup ## merge a run's LoRA adapter into its base model (RUN=<run dir>|last) -> <run>/merged; FORMAT=gguf (OUTTYPE=f16|bf16|q8_0): + llama.cpp's GGUF and an Ollama Modelfile
	@$(ROCMFT) export $(call q,$(or $(RUN),last)) $(call opt,--format,$(FORMAT)) $(call opt,--outtype,$(OUTTYPE))

REPO ?=
WHAT ?=
PRIVATE ?=
push: host ## a run's adapter (WHAT=merged: its merged model) + a model card to the Hugging Face Hub (RUN=, REPO=owner/name, private unless PRIVATE=0, exported HF_TOKEN, DRY_RUN=1: print, send nothing)
	@$(ROCMFT) push $(call q,$(or $(RUN),last)) --repo=$(call q,$(REPO)) $(call opt,--what,$(WHAT)) \
	  $(if $(filter 0 no false,$(PRIVATE)),--public) $(if $(call is_set,$(DRY_RUN)),--dry-run)

test: setup tiny-model ## run every test: unit first, then the real CPU trainings (-m train); docker/slurm ones when their services are up
	@$(PY) -m pytest -q --durations=25

test-unit: setup ## the fast unit tests only
	@$(PY) -m pytest -q tests/unit

test-train: setup tiny-model ## only the real CPU training runs (pytest -m train)
	@$(PY) -m pytest -q -m train tests

# The numerics canary (src/rocmft/canary): the recipe's precision/attention/Liger/packing vs an fp32 reference on the
# tiny model; `make train CANARY=1` runs it first and launches only when it agrees.
CANARY ?=
canary: host ## train the tiny model a few steps with RECIPE's numerics and an fp32 reference: agrees/diverges/non-finite -> canary.json (SET=, ARCH=, RUNTIME=, GPUS=)
	$(stack_if_local)
	@$(ROCMFT) canary $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(call opt,--runtime,$(RUNTIME)) $(call opt,--gpus,$(GPUS)) \
	  $(call opt,--arch,$(ARCH)) $(call opt,--docker-image,$(IMAGE_REF))
