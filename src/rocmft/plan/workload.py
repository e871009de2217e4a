"""Recipe -> `Workload`: every fact the memory and throughput models read, with LLaMA-Factory's defaults.

A Workload is plain data, so a suggestion is a `dataclasses.replace` of it plus the override that makes
the same change in the recipe (e.g. `disable_gradient_checkpointing=true`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from ..hardware import arches
from ..io import paths
from ..io.problems import Problem, ProblemReport, did_you_mean
from ..recipe import ds_presets, precision, quantization, rules
from ..recipe.recipes import Recipe
from . import models, product
from .lengths import Lengths

# Planner settings a recipe may put under `plan:`.
PLAN_KEYS = ("product", "gpu_memory_gb", "host_memory_gb", "mfu", "model", "avg_tokens")
# Model FLOPs utilisation range (model FLOPs, recompute not counted) when neither the recipe (`plan.mfu`) nor
# the arch table (`mfu:`, per arch with its sources) gives one: a planning assumption, not a measurement.
# PaLM 540B reached 46% MFU on TPUv4 (Chowdhery et al. 2022, table 3); Hugging Face Trainer / DeepSpeed
# fine-tunes of 7-70B dense models on H100/A100 are commonly reported at 25-45%. `make bench` measures it.
DEFAULT_MFU = (0.25, 0.45)

# LLaMA-Factory 0.9.5 defaults (llamafactory/hparams/*.py) for the arguments the planner reads.
LF_DEFAULTS = {
    "finetuning_type": "lora",        # finetuning_args.py
    "lora_rank": 8,
    "lora_target": "all",
    "lora_dropout": 0.0,
    "freeze_trainable_layers": 2,
    "cutoff_len": 2048,               # data_args.py
    "per_device_train_batch_size": 8,  # transformers TrainingArguments
    "per_device_eval_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "num_train_epochs": 3.0,
    "max_steps": -1,
    "double_quantization": True,      # model_args.py
    # transformers 5.6 training_args.py: `optim` defaults to adamw_torch_fused when torch >= 2.8 (the ROCm images'
    # 2.10 and the CPU venv's 2.13 both), else adamw_torch.
    "optim": "adamw_torch_fused",
}


@dataclass(frozen=True)
class Workload:
    recipe: str
    model: models.ModelSpec
    arch: str
    capacity_gib: float | None  # GPU memory per GPU; None: unknown (CPU arch)
    peak_tflops: float | None  # dense peak for `precision`; None: unknown
    precision: str  # bf16 | fp16 | fp32
    is_gpu: bool
    gpus_per_node: int
    nodes: int
    deepspeed: str  # none | zero0 | zero2 | zero3 | zero3-replicated | zero3-offload-optimizer | zero3-offload
    method: str  # lora | full | freeze
    lora_rank: int = 8
    lora_targets: tuple[str, ...] = models.LINEAR_MODULES
    lora_dropout: float = 0.0
    extra_trainable: tuple[str, ...] = ()  # additional_target / freeze_extra_modules: embed_tokens, lm_head
    freeze_layers: int = 2
    quant_bits: int | None = None
    double_quant: bool = True
    pure_bf16: bool = False
    optim: str = "adamw_torch_fused"
    micro_batch: int = 1
    cutoff_len: int = 2048
    grad_accum: int = 1
    gradient_checkpointing: bool = True
    attention: str = "sdpa"  # fa2 | sdpa | auto | disabled (eager)
    liger: bool = False  # as rendered (liger_rendered)
    liger_asked: bool = False  # enable_liger_kernel in the recipe
    stage: str = "sft"  # sft | pt | dpo | kto (rm and ppo are planned as sft)
    pref_loss: str = "sigmoid"  # dpo: sigmoid (DPO) | orpo | simpo | ...
    separate_reference: bool = False  # `ref_model` names a model of its own (loaded beside the policy)
    epochs: float = 3.0
    max_steps: int = -1
    mfu: tuple[float, float] = DEFAULT_MFU
    mfu_source: str = "planner default"  # plan.mfu | docker/arches.yaml <arch> | planner default
    arch_family: str = ""  # cdna3, rdna3...: which link speeds ZeRO-3's gathers run at (throughput.py)
    avg_tokens: int | None = None
    host_memory_gb: float | None = None
    ds_reduce_bucket: float | None = None  # elements; None: "auto" (hidden_size^2)
    ds_live_params: float = 1e9  # stage3_max_live_parameters
    ds_sub_group_size: float = 1e9  # ZeRO-3 optimizer steps this many elements at a time (DeepSpeed's default)
    product: str = ""  # whose figures (capacity, peak, GPUs per node) the plan uses: MI300X, MI300A...
    product_source: str = ""  # plan.product | detected on this host | the arch's first product
    node_gpus: int = 8  # GPUs one node of that product holds (what a "more GPUs" suggestion may use)
    unified_memory: bool = False  # an APU: "CPU" offload lands in the same memory
    packing: str = "padded"  # padded | packing | neat_packing (LLaMA-Factory's data arguments)
    lengths: Lengths | None = None  # the rows' token counts (lengths.py); None: every row at cutoff_len
    liger_available: bool = False  # the target image has liger-kernel (the arch table's packages, never the daemon)
    ds_prefetch: float | None = None  # stage3_prefetch_bucket_size, elements; None: "auto" (0.9 hidden_size^2)
    ds_persistence: float | None = None  # stage3_param_persistence_threshold; None: "auto" (10 hidden_size)
    ds_overlap_comm: bool = False
    ds_allgather_bucket: float | None = None  # ZeRO-1/2 allgather_bucket_size
    ds_mem_efficient_linear: bool = True  # zero_optimization.memory_efficient_linear (DeepSpeed's default: true)
    eval_batch: int = 8  # per_device_eval_batch_size (transformers' default)
    evaluates: bool = False  # rows held out (val_size) or an eval_dataset, and an eval strategy

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def zero_stage(self) -> int | None:
        """None without DeepSpeed (plain DDP or one GPU); 0-3 with it."""
        return {"none": None, "zero0": 0, "zero1": 1, "zero2": 2, "zero3": 3, "zero3-replicated": 3,
                "zero3-offload-optimizer": 3,
                "zero3-offload": 3}[self.deepspeed]

    @property
    def offload(self) -> bool:
        """Optimizer states (and master weights, fp32 gradients) in host RAM."""
        return "offload" in self.deepspeed

    @property
    def offload_params(self) -> bool:
        """The 16-bit weights in host RAM too, streamed in for every forward and backward."""
        return self.deepspeed == "zero3-offload"

    @property
    def sequences_per_sample(self) -> int:
        """DPO's micro-batch of b pairs runs 2b sequences, chosen and rejected, concatenated (LLaMA-Factory's
        PairwiseDataCollatorWithPadding; train/dpo/trainer.py concatenated_forward)."""
        return 2 if self.stage == "dpo" else 1

    @property
    def reference(self) -> str:
        """The reference model: none (ORPO, SimPO, SFT, PT), `adapter off` (LoRA: the same weights with the adapter
        disabled, LLaMA-Factory's create_ref_model returns None for LoRA) or `copy` (a frozen second model)."""
        uses = self.stage == "kto" or (self.stage == "dpo" and self.pref_loss not in ("orpo", "simpo"))
        if not uses:
            return "none"
        return "copy" if self.method != "lora" or self.separate_reference else "adapter off"

    @property
    def extra_forwards(self) -> int:
        """Forward passes without gradients per trained sequence: DPO's reference over the same sequences; KTO's
        KL estimate (the policy on mismatched prompt/answer pairs) and the reference over both (train/kto/trainer.py)."""
        if self.stage == "kto":
            return 3
        return 1 if self.reference != "none" else 0

    @property
    def tokens_per_micro_batch(self) -> int:
        """The longest micro-batch in tokens (what memory must hold). Padded rows are padded to the longest in
        their batch, so with the rows' lengths known none is longer than the longest row (rounded up to 8, as
        LLaMA-Factory pads): gpu_truth measured 20.7 GiB on an H200 for 4 padded demo rows where cutoff_len
        x 4 planned 72.7 (results/gpu_truth-nvidia-h200.csv, lora-padded)."""
        length = self.cutoff_len
        if self.packing == "padded" and self.lengths is not None and self.lengths.tokens:
            longest = -(-max(self.lengths.tokens) // 8) * 8
            length = min(self.cutoff_len, longest)
        return self.micro_batch * self.sequences_per_sample * length

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.grad_accum * self.world_size


# ---------------------------------------------------------------- DeepSpeed settings from ds_configs/

def _mfu_owner(arch) -> str:
    """Whose utilisation range the plan uses: the arch's, or a calibration product's (another vendor's card)."""
    return f"calibration_products.{arch.product}" if arch.product in arches.calibration_products() else arch.name


def _ds_source(recipe: Recipe) -> tuple[str, str]:
    """(the preset modelled, the file its settings are read from): a recipe's own JSON is modelled as the
    shipped preset of its shape (ZeRO stage, offload targets) with its own bucket sizes."""
    if recipe.deepspeed_file:
        return ds_presets.planned_as(ds_presets.read_file(Path(recipe.deepspeed_file), recipe.path)), recipe.deepspeed_file
    if recipe.deepspeed == "none":
        return "none", ""
    return recipe.deepspeed, str(paths.ds_configs_dir() / f"{recipe.deepspeed}.json.j2")


@cache
def _ds_settings(source: str) -> dict[str, float | None]:
    """Bucket sizes from the preset's template (the file rocmft renders) or the recipe's JSON, so the plan
    follows edits to it."""
    found: dict[str, float | None] = {}
    if not source:
        return found
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return found
    for key in ("reduce_bucket_size", "stage3_max_live_parameters", "sub_group_size", "stage3_prefetch_bucket_size",
                "stage3_param_persistence_threshold", "allgather_bucket_size"):
        match = re.search(rf'"{key}"\s*:\s*("auto"|[0-9.eE+]+)', text)
        if match:
            value = match.group(1)
            found[key] = None if value == '"auto"' else float(value)
    for key, default in (("overlap_comm", False), ("memory_efficient_linear", True)):
        match = re.search(rf'"{key}"\s*:\s*(true|false)', text)
        found[key] = match.group(1) == "true" if match else default
    return found


def _ds_fields(ds: dict[str, float | None]) -> dict[str, Any]:
    """The Workload fields a DeepSpeed preset or JSON sets (DeepSpeed's defaults where it is silent)."""
    return dict(ds_reduce_bucket=ds.get("reduce_bucket_size"), ds_live_params=ds.get("stage3_max_live_parameters") or 1e9,
                ds_sub_group_size=ds.get("sub_group_size") or 1e9, ds_prefetch=ds.get("stage3_prefetch_bucket_size"),
                ds_persistence=ds.get("stage3_param_persistence_threshold"), ds_overlap_comm=bool(ds.get("overlap_comm")),
                ds_allgather_bucket=ds.get("allgather_bucket_size"),
                ds_mem_efficient_linear=bool(ds.get("memory_efficient_linear", True)))


def with_preset(w: Workload, preset: str) -> Workload:
    """`w` under another shipped preset, with that preset's own settings (what `SET=deepspeed=<preset>` renders)."""
    source = "" if preset == "none" else str(paths.ds_configs_dir() / f"{preset}.json.j2")
    new = replace(w, deepspeed=preset, **_ds_fields(_ds_settings(source)))
    return replace(new, liger=liger_rendered(new))


def liger_rendered(w: Workload) -> bool:
    """Liger as the run gets it: what the recipe asks, unless rocmft.recipe.rules renders it off (ZeRO-3 with a
    trainable lm_head breaks its fused loss: linkedin/Liger-Kernel#1048)."""
    lm_head = w.method == "full" or "lm_head" in w.extra_trainable
    return w.liger_asked and not (w.zero_stage == 3 and w.stage in rules.FLCE_STAGES and lm_head)


# ---------------------------------------------------------------- reading the recipe

def _int(lf: Mapping[str, Any], key: str, file: str, problems: list[Problem], minimum: int = 1) -> int:
    value = lf.get(key, LF_DEFAULTS.get(key))
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        problems.append(Problem(file, f"llamafactory.{key}", f"must be a whole number >= {minimum}, got {value!r}"))
        return max(minimum, 1)
    return value


def _targets(lf: Mapping[str, Any], spec: models.ModelSpec, file: str, problems: list[Problem]) -> tuple[str, ...]:
    """The linears LoRA adapts: `all` is every nn.Linear of the model (LLaMA-Factory's find_all_linear_modules),
    which for a MoE model leaves out the routed experts (architecture.py)."""
    raw = lf.get("lora_target", LF_DEFAULTS["lora_target"])
    names = [n.strip() for n in (raw if isinstance(raw, list) else str(raw).split(",")) if str(n).strip()]
    own = spec.linear_names
    if not names or "all" in names:
        return own
    for name in names:
        if name in own:
            continue
        if spec.is_moe and name in models.LINEAR_MODULES:
            problems.append(Problem(file, "llamafactory.lora_target", f"`{name}` is no nn.Linear in {spec.name}'s MoE "
                                    "layers: transformers 5.6 keeps the routed experts as 3D parameters, which "
                                    "LLaMA-Factory's LoRA does not adapt", f"planned without it; its linears: {', '.join(own)}",
                                    severity="warning"))
        else:
            problems.append(Problem(file, "llamafactory.lora_target", f"`{name}` is not a module the planner models",
                                    did_you_mean(name, own) or f"planned without it; known: {', '.join(own)}",
                                    severity="warning"))
    return tuple(n for n in names if n in own)


def _window_under_a_4d_mask(spec: models.ModelSpec, packing: str, flash: str, lf: Mapping[str, Any], file: str,
                            problems: list[Problem]) -> None:
    """neat_packing without flash-attn hands the model a 4D block-diagonal mask, which transformers 5.6 returns
    as-is for every layer (masking_utils._preprocess_mask_arguments: "If the mask is already 4D, simply return
    as-is"), so a sliding layer attends past its window inside a sample; flash-attn's varlen path keeps the window."""
    if packing == "neat_packing" and spec.vision_params:
        problems.append(Problem(file, "llamafactory.neat_packing", f"{spec.name} is multimodal: on text-only rows "
                                "LLaMA-Factory 0.9.5's collator appends a placeholder image's tokens to the packed row "
                                "but not to its position ids, and the first step stops (RuntimeError in the rotary "
                                "embedding; data/collator.py MultiModalDataCollatorForSeq2Seq, seen in the CPU "
                                "rehearsal)", "padded rows: neat_packing=false", severity="warning"))
    local = spec.num_hidden_layers - spec.layers_of("full_attention")
    cutoff = lf.get("cutoff_len", LF_DEFAULTS["cutoff_len"])
    if packing == "neat_packing" and flash != "fa2" and local and spec.window and isinstance(cutoff, int) \
            and cutoff > spec.window:
        problems.append(Problem(file, "llamafactory.neat_packing", f"neat_packing's 4D mask reaches {spec.name}'s "
                                f"{local} sliding-window layers unchanged (transformers' masking_utils): a sample longer "
                                f"than {spec.window} tokens attends past the window there, unlike the model's own "
                                "training", f"cutoff_len <= {spec.window}, or padded rows (neat_packing=false), or "
                                "flash_attn=fa2 where the image has flash-attn", severity="warning"))


def _extra(lf: Mapping[str, Any], key: str) -> tuple[str, ...]:
    raw = lf.get(key)
    if not raw:
        return ()
    names = raw if isinstance(raw, list) else str(raw).split(",")
    return tuple(n.strip() for n in names if n.strip() in ("embed_tokens", "lm_head"))


def _mfu(plan: Mapping[str, Any], arch: arches.Arch, file: str, problems: list[Problem]) -> tuple[float, float]:
    default = arch.mfu or DEFAULT_MFU
    value = plan.get("mfu")
    if value is None:
        return default
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value, value]
    if (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1 for v in value)):
        lo, hi = sorted(float(v) for v in value)
        return lo, hi
    problems.append(Problem(file, "plan.mfu", f"must be a fraction or a [low, high] pair in (0, 1], got {value!r}",
                            "e.g. plan: {mfu: [0.3, 0.4]}"))
    return default


def from_recipe(recipe: Recipe, gpus=None) -> tuple[Workload, list[Problem]]:
    """The workload of a loaded recipe, plus warnings; a ProblemReport for input the planner cannot use.
    `gpus`: the host's GPUs to recognise the product by (host.GPU list); None reads this host's KFD topology."""
    wl, problems, cannot = _read(recipe, gpus)
    if wl is None or any(p.severity == "error" for p in problems):
        raise ProblemReport(problems + cannot)
    return wl, problems


def value_errors(recipe: Recipe) -> list[Problem]:
    """What is wrong in the recipe's values whatever the model (`lora_rank: 0`, a batch below 1, no step to
    train): what the job would die on. A model or method the planner cannot model is none of them."""
    return [p for p in _read(recipe, None)[1] if p.severity == "error"]


def _read(recipe: Recipe, gpus) -> tuple[Workload | None, list[Problem], list[Problem]]:
    """(the workload, or None when the planner cannot model the recipe; the problems with its values, warnings
    included; why the planner cannot model it)."""
    file = recipe.path
    problems: list[Problem] = []
    lf = dict(recipe.llamafactory)
    plan = dict(recipe.plan or {})
    for key in plan:
        if key not in PLAN_KEYS:
            problems.append(Problem(file, f"plan.{key}", "unknown planner setting",
                                    did_you_mean(key, PLAN_KEYS) or f"known: {', '.join(PLAN_KEYS)}", severity="warning"))
    arch, product_source = product.choose(plan, arches.get(recipe.arch, file=file), gpus, file, problems)
    if arch.is_gpu and recipe.gpus_per_node > arch.gpus_per_node:
        problems.append(Problem(file, "gpus_per_node", f"{recipe.gpus_per_node} GPUs per node planned, but an "
                                f"{arch.product} node holds {arch.gpus_per_node}", "set gpus_per_node or NODES= to match",
                                severity="warning"))
    prec, _ = precision.resolve(recipe.precision, arch, file)  # precision problems are render's to report
    cannot: list[Problem] = []
    try:
        spec = models.resolve(str(lf.get("model_name_or_path") or ""), plan.get("model"), file=file)
    except ProblemReport as report:
        spec, cannot = None, report.problems
    method = str(lf.get("finetuning_type", LF_DEFAULTS["finetuning_type"]))
    if method not in ("lora", "full", "freeze"):
        cannot.append(Problem(file, "llamafactory.finetuning_type", f"`{method}` is not modelled by the planner",
                              "it plans lora, freeze and full"))
    quant = lf.get("quantization_bit")
    if quant is not None and (isinstance(quant, bool) or not isinstance(quant, int) or quant not in (2, 3, 4, 5, 6, 8)):
        problems.append(Problem(file, "llamafactory.quantization_bit", f"must be 2, 3, 4, 5, 6 or 8, got {quant!r}"))
        quant = None
    preset, ds_source = _ds_source(recipe)
    if quant is not None:  # LLaMA-Factory's quantization rules, in its words (rocmft.recipe.quantization)
        for refusal in quantization.lf_refusals(lf, zero3=preset.startswith("zero3")):
            problems.append(Problem(file, f"llamafactory.{refusal.key}", f'LLaMA-Factory refuses it: "{refusal.message}"'))
    stage = str(lf.get("stage", "sft"))
    if stage not in ("sft", "pt", "dpo", "kto"):
        problems.append(Problem(file, "llamafactory.stage", f"stage `{stage}` is planned as sft",
                                "its value head and (ppo) generation and reward model are not modelled",
                                severity="warning"))

    capacity = plan.get("gpu_memory_gb", arch.gpu_memory_gb)
    if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, (int, float)) or capacity <= 0):
        problems.append(Problem(file, "plan.gpu_memory_gb", f"must be a positive number of GB, got {capacity!r}"))
        capacity = None
    host = plan.get("host_memory_gb")
    if host is not None and (isinstance(host, bool) or not isinstance(host, (int, float)) or host <= 0):
        problems.append(Problem(file, "plan.host_memory_gb", f"must be a positive number of GB, got {host!r}"))
        host = None
    avg = plan.get("avg_tokens")
    if avg is not None and (isinstance(avg, bool) or not isinstance(avg, int) or avg <= 0):
        problems.append(Problem(file, "plan.avg_tokens", f"must be a whole number of tokens > 0, got {avg!r}"))
        avg = None
    epochs = lf.get("num_train_epochs", LF_DEFAULTS["num_train_epochs"])
    max_steps = lf.get("max_steps", LF_DEFAULTS["max_steps"])
    if isinstance(max_steps, bool) or not isinstance(max_steps, int):
        problems.append(Problem(file, "llamafactory.max_steps", f"must be a whole number, got {max_steps!r}"))
        max_steps = -1
    if isinstance(epochs, bool) or not isinstance(epochs, (int, float)):
        problems.append(Problem(file, "llamafactory.num_train_epochs", f"must be a number, got {epochs!r}"))
        epochs = 0.0
    if max_steps <= 0 and epochs <= 0:
        problems.append(Problem(file, "llamafactory.num_train_epochs", f"{epochs!r} epochs and no max_steps: nothing to train",
                                "set num_train_epochs > 0 or max_steps > 0"))
    rank = _int(lf, "lora_rank", file, problems) if method == "lora" else LF_DEFAULTS["lora_rank"]
    freeze_layers = lf.get("freeze_trainable_layers", LF_DEFAULTS["freeze_trainable_layers"])
    if method == "freeze" and (isinstance(freeze_layers, bool) or not isinstance(freeze_layers, int) or freeze_layers == 0):
        problems.append(Problem(file, "llamafactory.freeze_trainable_layers", f"must be a non-zero whole number, got {freeze_layers!r}"))
        freeze_layers = 2
    ds = _ds_settings(ds_source)
    flash = str(lf.get("flash_attn", arch.attention))
    if spec is not None and spec.model_type == "gpt_oss" and flash != "disabled":
        # gpt-oss has no SDPA path (GptOssPreTrainedModel._supports_sdpa = False) and its attention sinks need
        # eager; LLaMA-Factory's own choice, a CUDA FlashAttention-3 hub kernel, cannot load here (rocmft.worker)
        problems.append(Problem(file, "llamafactory.flash_attn", f"gpt-oss trains with eager attention (its sinks), "
                                f"not `{flash}`: planned as eager (seq x seq scores per layer)", severity="note"))
        flash = "disabled"
    # LLaMA-Factory packs only supervised and pretraining rows; pairs and KTO rows are always padded
    packing = ("padded" if stage not in ("sft", "pt") else "neat_packing" if lf.get("neat_packing")
               else "packing" if lf.get("packing", stage == "pt") else "padded")
    micro_batch, cutoff_len = _int(lf, "per_device_train_batch_size", file, problems), _int(lf, "cutoff_len", file, problems)
    grad_accum = _int(lf, "gradient_accumulation_steps", file, problems)
    mfu = _mfu(plan, arch, file, problems)
    if spec is None or cannot:
        return None, problems, cannot
    _window_under_a_4d_mask(spec, packing, flash, lf, file, problems)
    targets = _targets(lf, spec, file, problems) if method == "lora" else spec.linear_names
    wl = Workload(
        recipe=recipe.name, model=spec, arch=arch.name, arch_family=arch.family,
        capacity_gib=float(capacity) if capacity is not None else None,
        peak_tflops=arch.peak(prec.name), precision=prec.name, is_gpu=arch.is_gpu,
        gpus_per_node=recipe.gpus_per_node, nodes=recipe.nodes, deepspeed=preset,
        method=method if method in ("lora", "full", "freeze") else "lora",
        lora_rank=rank, lora_targets=targets,
        lora_dropout=float(lf.get("lora_dropout", LF_DEFAULTS["lora_dropout"]) or 0.0),
        extra_trainable=_extra(lf, "additional_target" if method == "lora" else "freeze_extra_modules"),
        freeze_layers=int(freeze_layers),
        quant_bits=quant, double_quant=bool(lf.get("double_quantization", True)),
        pure_bf16=bool(lf.get("pure_bf16", False)) and prec.name == "bf16",
        optim=str(lf.get("optim", LF_DEFAULTS["optim"])),
        micro_batch=micro_batch, cutoff_len=cutoff_len, grad_accum=grad_accum,
        gradient_checkpointing=not bool(lf.get("disable_gradient_checkpointing", False)),
        attention=flash, liger=bool(lf.get("enable_liger_kernel", False)), liger_asked=bool(lf.get("enable_liger_kernel", False)),
        stage=stage,
        pref_loss=str(lf.get("pref_loss") or "sigmoid"), separate_reference=bool(lf.get("ref_model")),
        epochs=float(epochs), max_steps=int(max_steps),
        mfu=mfu, mfu_source="plan.mfu" if "mfu" in plan else
        (f"docker/arches.yaml {_mfu_owner(arch)}" if arch.mfu else "planner default"), avg_tokens=avg,
        host_memory_gb=float(host) if host is not None else None,
        product=arch.product if arch.is_gpu else "", product_source=product_source if arch.is_gpu else "",
        node_gpus=arch.gpus_per_node, unified_memory=arch.unified_memory,
        packing=packing, liger_available=arch.liger_kernel,
        **_ds_fields(ds),
        eval_batch=_int(lf, "per_device_eval_batch_size", file, problems),
        evaluates=bool(lf.get("val_size") or lf.get("eval_dataset")) and str(lf.get("eval_strategy", "no")) != "no",
    )
    if not any(p.severity == "error" for p in problems):  # a preset is applied to values that make sense only
        wl = with_preset(wl, preset) if not recipe.deepspeed_file else replace(wl, liger=liger_rendered(wl))
    return wl, problems, cannot
