# Training: the demo, train, export, the tiny model, and the tests.
# VERBOSE=1 (read by `rocmft train` from the environment, where make puts command-line variables) also
# streams the job's whole output; it always goes to <run dir>/train.log.
.PHONY: demo train export tiny-model test test-unit test-train
MULTINODE_FLAGS ?=
# The demo and the tests never fetch a model or dataset from a hub (GPU recipes may: they name hub models).
demo test test-unit test-train: export HF_HUB_OFFLINE ?= 1
demo test test-unit test-train: export HF_DATASETS_OFFLINE ?= 1

tiny-model: setup ## build the tiny test model offline into models/tiny-llama (no hub)
	@$(PY) scripts/make_tiny_model.py

demo: setup tiny-model ## the embedded default: train the tiny model on CPU (a live progress line; VERBOSE=1 streams the job's log)
	@$(ROCMFT) train tiny-cpu --runtime local $(call opt,--set,$(SET)) $(call opt,--run-name,$(RUN_NAME))

train: host ## render + validate + plan + launch RECIPE (RUNTIME=, GPUS=, NODES=, RESUME=, FROM=, SET=, FORCE=1, VERBOSE=1, MAX_RESTARTS=)
	$(stack_if_local)
	@$(ROCMFT) train $(call q,$(RECIPE)) $(call opt,--set,$(SET)) $(TRAIN_FLAGS) $(MULTINODE_FLAGS)

export: setup ## merge a run's LoRA adapter into its base model (RUN=<run dir>|last) -> <run>/merged
	@$(ROCMFT) export $(call q,$(or $(RUN),last))

test: setup tiny-model ## run every test: unit first, then the real CPU trainings (-m train); docker/slurm ones when their services are up
	@$(PY) -m pytest -q --durations=25

test-unit: setup ## the fast unit tests only
	@$(PY) -m pytest -q tests/unit

test-train: setup tiny-model ## only the real CPU training runs (pytest -m train)
	@$(PY) -m pytest -q -m train tests
