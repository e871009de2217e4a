# Images: one Dockerfile (docker/Dockerfile), one image per arch of docker/arches.yaml.
#   make image ARCH=gfx942                 build rocmft:<version>-gfx942 and rocmft:gfx942
#   make image ARCH=gfx942 DRY_RUN=1       print the build plan (kernel stage, MAX_JOBS, head dims, estimate, build args)
#   make image ARCH=gfx942 MAX_JOBS=64 HEAD_DIMS=all   override flash-attn's parallelism / compile every head dim
# A compiled flash-attn wheel is kept in wheelhouse/<arch>/kernels/<key>/ and reused by every later build.
#   make wheelhouse ARCH=cpu && make image ARCH=cpu OFFLINE=1    air-gapped: no network in the build
OFFLINE    ?=
DRY_RUN    ?=
FLASH_ATTN ?=
NO_CACHE   ?=
IMAGE_REF  ?=
MAX_JOBS   ?=
HEAD_DIMS  ?=

IMAGE_FLAGS = $(if $(call is_set,$(OFFLINE)),--offline) $(if $(call is_set,$(DRY_RUN)),--dry-run) \
              $(call opt,--flash-attn,$(FLASH_ATTN)) $(if $(call is_set,$(NO_CACHE)),--no-cache) \
              $(call opt,--max-jobs,$(MAX_JOBS)) $(call opt,--head-dims,$(HEAD_DIMS))

.PHONY: image image-info wheelhouse
image: host ## [gpu] build the training image for ARCH (OFFLINE=1: wheelhouse only, no network; DRY_RUN=1: print the plan)
	@$(ROCMFT) image $(call q,$(ARCH)) $(IMAGE_FLAGS)

image-info: host ## [gpu] print what the image of ARCH holds (versions, commit) and where its kernel wheel came from
	@$(ROCMFT) image-info $(call q,$(ARCH)) $(call opt,--image,$(IMAGE_REF))

wheelhouse: host ## [gpu] download every wheel the image of ARCH needs into wheelhouse/<arch>/ (for OFFLINE=1)
	@$(ROCMFT) wheelhouse $(call q,$(ARCH)) $(call opt,--flash-attn,$(FLASH_ATTN)) $(if $(call is_set,$(DRY_RUN)),--dry-run)

.PHONY: rehearsal
rehearsal: host ## [dev] CI: build the gfx1100/gfx942 images' rehearsal on the CPU base (rocmft-rehearsal:<arch>, not usable)
	@$(ROCMFT) rehearsal
