# The GPU container path (docs/gpu.md): host checks, a shell in the image, the runs and leftover containers.
#   make doctor                    what this host has, what is missing, and the fix for each failure
#   make shell ARCH=gfx942 GPUS=0  bash in the image with the devices and mounts a run gets
#   make runs                      every run's status, final loss, duration; containers left behind
#   make rm-run RUN=<name>         remove one of your runs (a dry run, a canary, a failed try)
.PHONY: doctor shell runs rm-run
STATE ?=

doctor: host ## [gpu] check the host for GPU training in a container: devices, groups, GPUs + arch, Docker, image, disk, shm, IOMMU
	@$(ROCMFT) doctor $(call opt,--arch,$(ARCH))

shell: host ## [gpu] interactive shell in the image of ARCH with a run's devices, groups and mounts (GPUS=, IMAGE_REF=)
	@$(ROCMFT) shell $(call opt,--arch,$(ARCH)) $(call opt,--gpus,$(GPUS)) $(call opt,--image,$(IMAGE_REF))

runs: host ## [train] list the runs (status, final loss, duration; STATE=failed,interrupted: only those; PRICE=: GPU-hours and cost) and containers left by a crashed launcher
	@$(ROCMFT) runs $(call opt,--state,$(STATE)) $(call opt,--price,$(PRICE))

rm-run: host ## [train] remove one of your runs from runs/ (RUN=<name>; never `last`, another user's, or through a link)
	@$(ROCMFT) rm-run $(call q,$(RUN))
