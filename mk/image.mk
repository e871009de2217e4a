# Images: one Dockerfile (docker/Dockerfile), one image per arch of docker/arches.yaml.
#   make image ARCH=gfx942                 build rocmft:<version>-gfx942 and rocmft:gfx942
#   make image ARCH=gfx942 DRY_RUN=1       print the build plan (build args, tags, labels)
#   make wheelhouse ARCH=cpu && make image ARCH=cpu OFFLINE=1    air-gapped: no network in the build
OFFLINE    ?=
DRY_RUN    ?=
FLASH_ATTN ?=
NO_CACHE   ?=
IMAGE_REF  ?=

IMAGE_FLAGS = $(if $(call is_set,$(OFFLINE)),--offline) $(if $(call is_set,$(DRY_RUN)),--dry-run) \
              $(call opt,--flash-attn,$(FLASH_ATTN)) $(if $(call is_set,$(NO_CACHE)),--no-cache)

.PHONY: image image-info wheelhouse
image: host ## build the training image for ARCH (OFFLINE=1: wheelhouse only, no network; DRY_RUN=1: print the plan)
	@$(ROCMFT) image $(call q,$(ARCH)) $(IMAGE_FLAGS)

image-info: host ## print what the image of ARCH holds (versions, kernels, commit) from its labels
	@$(ROCMFT) image-info $(call q,$(ARCH)) $(call opt,--image,$(IMAGE_REF))

wheelhouse: host ## download every wheel the image of ARCH needs into wheelhouse/<arch>/ (for OFFLINE=1)
	@$(ROCMFT) wheelhouse $(call q,$(ARCH)) $(call opt,--flash-attn,$(FLASH_ATTN)) $(if $(call is_set,$(DRY_RUN)),--dry-run)
