# Multi-node: the options `make train RUNTIME=slurm|k8s` passes on, and `make sif` (docs/multinode.md).
#   make train RECIPE=llama3-8b-z3 RUNTIME=slurm NODES=2 PARTITION=mi300x ACCOUNT=proj123 TIME=04:00:00
#   make train RECIPE=tiny-cpu RUNTIME=slurm NODES=2 CONTAINER=none WAIT=1 TIME=00:10:00
#   make train RECIPE=llama3-8b-z3 RUNTIME=k8s NODES=2 SUBMIT=0 CONTAINER_IMAGE=registry.example.com/rocmft:0.1.0-gfx942
.PHONY: sif

PARTITION       ?=
ACCOUNT         ?=
TIME            ?=
CONTAINER       ?=
SUBMIT          ?=
WAIT            ?=
SIF             ?=
SBATCH_ARGS     ?=
CONTAINER_IMAGE ?=
K8S_NAMESPACE   ?=
K8S_PVC         ?=
K8S_SECRET      ?=
MAX_REQUEUES    ?=

# Appended by mk/train.mk to `rocmft train`; empty variables add nothing, so the CLI's defaults apply.
MULTINODE_FLAGS = $(call opt,--partition,$(PARTITION)) $(call opt,--account,$(ACCOUNT)) \
                  $(call opt,--time,$(TIME)) $(call opt,--container,$(CONTAINER)) $(call opt,--sif,$(SIF)) \
                  $(call opt,--sbatch-args,$(SBATCH_ARGS)) \
                  $(call opt,--container-image,$(CONTAINER_IMAGE)) \
                  $(call opt,--k8s-namespace,$(K8S_NAMESPACE)) $(call opt,--k8s-pvc,$(K8S_PVC)) \
                  $(call opt,--k8s-secret,$(K8S_SECRET)) \
                  $(call opt,--max-requeues,$(MAX_REQUEUES)) \
                  $(if $(filter 0 no false,$(SUBMIT)),--no-submit) \
                  $(if $(call is_set,$(WAIT)),--wait)

sif: host ## [cluster] convert the rocmft Docker image of ARCH= to an Apptainer image rocmft-<arch>.sif (needs apptainer; SIF= to name it)
	@$(ROCMFT) sif $(call opt,--arch,$(ARCH)) $(call opt,--out,$(SIF))
