"""The settings rocmft owns, translated from the user's YAML and shell line into recipe fields - never dropped
without a word: where the run writes (output_dir), precision (bf16/fp16/pure_bf16, not torch_dtype), how
many processes and nodes (NPROC_PER_NODE, torchrun), which GPUs (GPUS=), the arch, and the environment."""

from __future__ import annotations

from typing import Any

from ..hardware import arches
from ..hardware.arches import Arch
from ..io.problems import Problem, ProblemReport
from ..launch.plan import DEVICE_VARS
from ..recipe import hub_push, precision, recipe_env
from ..recipe.recipes import SECRET_ENV
from ..run import run_trust
from .command import Launch
from .report import Report
from .source import Source

# Set per node by rocmft's launcher (and Slurm's): a fixed value from one machine's script is wrong on the next.
LAUNCHER_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "RANK", "LOCAL_RANK", "WORLD_SIZE", "RDZV_ID",
                "FORCE_TORCHRUN", "NPROC_PER_NODE", "NNODES", "MIN_NNODES", "MAX_NNODES")
# PyTorch's CUDA/HIP caching allocator options (torch/csrc/c10/cuda/CUDAAllocatorConfig.cpp, the `PYTORCH_CUDA_ALLOC_CONF`
# section of PyTorch's "CUDA semantics" notes); anything else is ignored or refused by the allocator.
ALLOC_OPTIONS = ("backend", "max_split_size_mb", "roundup_power2_divisions", "max_non_split_rounding_mb",
                 "garbage_collection_threshold", "expandable_segments", "release_lock_on_cudamalloc",
                 "pinned_use_cuda_host_register", "pinned_num_register_threads", "pinned_use_hip_host_register")


def choose_arch(given: str | None, source: Source, launch: Launch, report: Report) -> Arch:
    """ARCH=, else the arch a rocmft-rendered file names, else PYTORCH_ROCM_ARCH in CMD, else this host's GPU."""
    table = arches.table()
    if given:
        return arches.get(given, key="ARCH")
    built_for = launch.env.get("PYTORCH_ROCM_ARCH", "").replace(",", ";").split(";")
    from ..hardware.host import gpus_from_sysfs

    for name, how in ((source.rendered_for, "the file's header (rendered by rocmft for it)"),
                      (built_for[0] if len(built_for) == 1 else "", "PYTORCH_ROCM_ARCH in CMD"),
                      (_single({g.gfx for g in gpus_from_sysfs()}), "this host's GPUs")):
        if name in table:
            report.add("translated", f"arch: {name} (from {how}; ARCH= to choose another)")
            return table[name]
    raise ProblemReport([Problem("", "ARCH", "which GPU will train it? Neither the file, CMD nor this host says",
                                 f"e.g. ARCH=gfx942; known: {', '.join(table)}")])


def _single(values: set[str]) -> str:
    return next(iter(values)) if len(values) == 1 else ""


def choose_precision(args: dict[str, Any], arch: Arch, report: Report) -> str:
    """bf16/fp16/pure_bf16 -> `precision:` for the arch; `auto` when it is what auto gives there."""
    bf16, fp16, pure = (bool(args.get(k)) for k in ("bf16", "fp16", "pure_bf16"))
    said = ", ".join(f"{k}: {str(args[k]).lower()}" for k in ("bf16", "fp16", "pure_bf16") if k in args) or "no bf16/fp16"
    wanted = "bf16" if bf16 or pure else "fp16" if fp16 else "fp32"
    if bf16 and fp16:
        report.add("translated", "bf16 and fp16 both true (LLaMA-Factory refuses that): bf16 kept")
    if "torch_dtype" in args:
        report.add("dropped", f"torch_dtype: {args['torch_dtype']} (not a LLaMA-Factory training argument: training "
                              f"precision comes from bf16/fp16, here {said})")
    auto, _ = precision.resolve("auto", arch)
    _, problems = precision.resolve(wanted, arch)
    if any(p.severity == "error" for p in problems):
        report.add("translated", f"{said} -> precision: auto ({auto.name}: {wanted} is not possible on {arch.name}; "
                                 f"{problems[0].suggestion})")
        return "auto"
    chosen = "auto" if auto.name == wanted else wanted
    why = f" ({auto.reason})" if chosen == "auto" else ""
    report.add("translated", f"{said} -> precision: {chosen}{why}")
    if pure:
        report.add("translated", "pure_bf16: true kept in the llamafactory block (bf16 weights, no fp32 master); "
                                 "rocmft renders bf16: true beside it")
    return chosen


def drop_owned(args: dict[str, Any], arch: Arch, report: Report) -> dict[str, Any]:
    """The arguments without those rocmft sets itself; each one said."""
    out = dict(args)
    for key, why in (("output_dir", "every run writes to its own runs/<name>/output; RUN_NAME= names it"),
                     ("overwrite_output_dir", "never carried: it destroys earlier results, and every run gets a new directory"),
                     ("resume_from_checkpoint", "resume with `make train RESUME=<run dir>|last`, which checks the checkpoint exists"),
                     ("bf16", ""), ("fp16", ""), ("torch_dtype", ""),  # precision: said by choose_precision
                     ("deepspeed", "")):  # the preset or kept file: said by the DeepSpeed match
        if key in out:
            value = out.pop(key)
            if why:
                report.add("dropped", f"{key}: {value} ({why})")
    if out.get("ddp_backend") == "nccl":
        # transformers hands it to accelerate, which then asks for a process group even in a 1-process run
        # (accelerate/state.py PartialState), and there is no NCCL on a CPU. On ROCm, torch's `nccl` is RCCL and
        # what accelerate picks by itself for GPUs.
        report.add("dropped", "ddp_backend: nccl (the default on AMD GPUs, where torch's nccl is RCCL; set explicitly "
                              "it breaks 1-process and CPU runs)")
        out.pop("ddp_backend")
    if "gpu_ids" in out:
        value = out.pop("gpu_ids")
        report.add("dropped", f"gpu_ids: {value} (not a LLaMA-Factory argument: GPUS= chooses the GPUs, below)")
    # What rocmft's render adds after the recipe's own arguments (render.train_args): a rendered file's tail.
    tail = []
    for key in reversed(list(out)):
        if key not in ("flash_attn", "data_shared_file_system"):
            break
        tail.append(key)
    if "flash_attn" in tail and out["flash_attn"] == arch.attention:
        report.add("dropped", f"flash_attn: {out.pop('flash_attn')} (what rocmft sets for {arch.name})")
    if "data_shared_file_system" in tail and out["data_shared_file_system"] is True:
        report.add("dropped", "data_shared_file_system: true (rocmft sets it for runs on more than one node)")
        out.pop("data_shared_file_system")
    return out


def warmup(args: dict[str, Any], report: Report) -> dict[str, Any]:
    """`warmup_ratio` as transformers 5 reads it: TrainingArguments.__post_init__ warns that it is deprecated and
    copies it into `warmup_steps`, which takes a float below 1 as a ratio of all steps (get_warmup_steps). The
    recipe says the same in the argument transformers keeps, so its validation has nothing to warn about."""
    if "warmup_ratio" not in args:
        return args
    out = dict(args)
    ratio = out.pop("warmup_ratio")
    if ratio is None:
        return out
    replaced = f" (replacing warmup_steps: {out['warmup_steps']}, as transformers does)" if "warmup_steps" in out else ""
    out["warmup_steps"] = ratio
    how = "a ratio of all steps" if isinstance(ratio, (int, float)) and 0 <= ratio < 1 else \
        "whole steps: transformers reads 1 or more as a step count, as it would have read the ratio"
    report.add("translated", f"warmup_ratio: {ratio} -> warmup_steps: {ratio} ({how}; transformers 5 deprecates "
                             f"warmup_ratio and reads warmup_steps){replaced}")
    return out


def _devices(env: dict[str, str], report: Report) -> str:
    present = {name: env[name] for name in DEVICE_VARS if env.get(name, "").strip()}
    if len(present) > 1 and len(set(present.values())) > 1:
        report.add("advice", f"{' and '.join(present)} both set: ROCm applies one after the other, so the job sees "
                             "other cards than either says; GPUS= below takes the first")
    return next(iter(present.values()), "")


def launch_layout(given: str | None, launch: Launch, lf_args: dict[str, Any], arch: Arch,
                  report: Report) -> tuple[int, int, str]:
    """(gpus_per_node, nodes, GPUS=) from GPUS_PER_NODE=, the shell line's process counts and device lists."""
    gpus = _devices(launch.env, report)
    if "gpu_ids" in lf_args and not gpus:
        gpus = str(lf_args["gpu_ids"])
    if gpus:
        report.add("advice", f"train on GPUs {gpus} (as your command chose): GPUS={gpus} on `make train`")
    if given is not None and str(given).strip():
        try:
            count = int(str(given))
        except ValueError:
            count = 0
        if count < 1:
            raise ProblemReport([Problem("", "GPUS_PER_NODE", f"must be a whole number >= 1, got `{given}`")])
        report.add("translated", f"GPUS_PER_NODE={count} -> gpus_per_node: {count}")
    elif launch.nproc_per_node:
        count = launch.nproc_per_node
        how = ", ".join(launch.said) or f"NPROC_PER_NODE={count}"
        report.add("translated", f"{how} -> gpus_per_node: {count}")
    elif gpus:
        count = len(gpus.split(","))
        report.add("translated", f"{count} GPU(s) listed ({gpus}) -> gpus_per_node: {count}")
    else:
        count = 1
        report.add("translated", "gpus_per_node: 1 (neither GPUS_PER_NODE= nor CMD said more)")
    if arch.is_gpu and count > arch.gpus_per_node:
        raise ProblemReport([Problem("", "GPUS_PER_NODE", f"{count} GPUs per node, but a {arch.name} node holds at most "
                                     f"{arch.gpus_per_node}", "spread them over nodes (NNODES= in CMD)")])
    nodes = launch.nnodes or 1
    if launch.nnodes:
        report.add("translated", f"{launch.nnodes} node(s) in CMD -> nodes: {nodes}")
    for words in launch.ignored:
        report.add("dropped", f"`{words}` in CMD (not a training command)")
    if "FORCE_TORCHRUN" in launch.env:
        report.add("dropped", f"FORCE_TORCHRUN={launch.env['FORCE_TORCHRUN']} (rocmft starts torchrun itself whenever "
                              "gpus_per_node x nodes > 1)")
    return count, nodes, gpus


def environment(launch: Launch, arch: Arch, report: Report) -> dict[str, str]:
    """The shell line's variables: what the job needs goes to `env:`, the rest is said and left out."""
    env: dict[str, str] = {}
    for name, value in launch.env.items():
        why = _env_drop(name, value, arch)
        if why is None:
            env[name] = value
            report.add("translated", f"{name}={value} -> env: (passed to the job)")
        elif why:
            report.add("dropped", f"{name}={value if name not in SECRET_ENV else '...'} ({why})")
    for name in recipe_env.guarded(env):
        report.add("advice", f"{name}={env[name]} carried into env: it redirects the job's requests or loads code "
                             f"into it; `make train` runs it only with {recipe_env.OPT_IN}=1")
    for name in recipe_env.withheld(env, SECRET_ENV):
        report.add("advice", f"{name} is never passed to this recipe's jobs: its env redirects the service "
                             "it authenticates to")
    if "NCCL_DEBUG" in launch.env:
        report.add("advice", f"NCCL_DEBUG={launch.env['NCCL_DEBUG']} for one run you debug: "
                             f"`make train SET=\"env.NCCL_DEBUG={launch.env['NCCL_DEBUG']}\"`")
    return env


def remote_code(args: dict[str, Any], report: Report) -> None:
    """Said, never carried silently: training runs the model repository's own Python as the user."""
    if args.get("trust_remote_code") is True:
        report.add("advice", "trust_remote_code: true carried: training runs Python code from the model's "
                             f"repository as you; `make train` runs it only with {run_trust.OPT_IN}=1")
    pushing = hub_push.keys(args)
    if pushing:  # the job would publish the fine-tune with the user's token (issue 43, N3)
        public = (f"; hub_private_repo: false makes it public only with {hub_push.PUBLIC}=0"
                  if args.get("hub_private_repo") is False else "; the repo is private")
        report.add("advice", f"{', '.join(pushing)} carried: training uploads the model to the Hugging Face Hub with "
                             f"your token; `make train` runs it only with {hub_push.OPT_IN}=1{public}")


def _env_drop(name: str, value: str, arch: Arch) -> str | None:
    """Why a variable stays out of the recipe; "" to leave it out without a line (said elsewhere); None to keep it."""
    if name in SECRET_ENV:
        return "a secret never goes in a recipe: export it in your shell, rocmft passes it to the job by name"
    if name in DEVICE_VARS or name in ("NPROC_PER_NODE", "NNODES", "FORCE_TORCHRUN"):
        return ""  # GPUS= and gpus_per_node/nodes, above
    if name in LAUNCHER_ENV:
        return "set by rocmft's launcher for each run and node"
    if name == "HSA_OVERRIDE_GFX_VERSION":
        claimed = "gfx" + value.replace(".", "") if value.count(".") == 2 else value
        if arch.is_gpu:
            also = "" if claimed == arch.name else f"; {value} would make ROCm load {claimed}'s kernels on a {arch.name}"
            return (f"{arch.name} needs no override: ROCm supports it as it is; the override is for RDNA cards "
                    f"ROCm does not list{also}")
        return "no GPU on arch cpu"
    if name == "PYTORCH_ROCM_ARCH":
        return "a build setting: the image is built for the recipe's arch (`make image ARCH=...`)"
    if name == "NCCL_DEBUG":
        return "for debugging, not for every run: it logs every collective"
    if name in ("PYTORCH_HIP_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"):
        unknown = [opt.split(":")[0] for opt in value.split(",") if opt.split(":")[0].strip() not in ALLOC_OPTIONS]
        if unknown:
            return (f"{', '.join(unknown)} is not an allocator option PyTorch documents (its asynchronous allocator "
                    "is backend:cudaMallocAsync); check what the ROCm build accepts before setting one")
        return None
    if arch.env.get(name) == value:
        return f"already set for {arch.name} (docker/arches.yaml)"
    return None
