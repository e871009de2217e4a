"""A DeepSpeed JSON judged by DeepSpeed's own config model, with `auto` filled as the HF integration would.

DeepSpeed rejects unknown keys inside its sections (pydantic, extra=forbid) but silently ignores unknown
TOP-LEVEL keys; a misspelt section would then just do nothing on an 8-GPU job. We catch those by watching
which top-level keys DeepSpeed's own parser reads: a key it never looks at is a key it does not know.
"""

from __future__ import annotations

import copy
import os
import re
from types import SimpleNamespace
from typing import Any, Mapping

from ..io.problems import Problem, did_you_mean

# Names of DeepSpeed's config objects that are not keys of its JSON (seen in LLaMA-Factory's examples).
KNOWN_WRONG = {
    "comms_config": "DeepSpeed reads `comms_logger`",
    "monitor_config": "DeepSpeed reads `tensorboard`, `wandb`, `csv_monitor` and `comet` as top-level keys",
}

# The top-level keys DeepSpeedConfig (0.19.8, the lock's) reads, as _Watched sees them: known without importing
# DeepSpeed, for a host that has none (`make import` on a light host judges a JSON by them: importer/source.py).
# tests/unit/validate/test_deepspeed.py keeps it equal to what the installed DeepSpeed reads.
TOP_LEVEL_KEYS = frozenset({
    "activation_checkpointing", "aio", "amp", "autotuning", "bf16", "bfloat16", "checkpoint", "comet",
    "comms_logger", "communication_data_type", "compile", "compression_training", "csv_monitor",
    "curriculum_learning", "data_efficiency", "data_types", "dataloader_drop_last", "datastates_ckpt",
    "disable_allgather", "disable_python_gc", "dump_state", "eigenvalue", "elasticity", "expert_parallel",
    "flops_profiler", "fp16", "gradient_accumulation_steps", "gradient_allreduce_op", "gradient_clipping",
    "gradient_predivide_factor", "graph_harvesting", "hybrid_engine", "log_level", "managed_gradient_accumulation",
    "memory_breakdown", "nebula", "optimizer", "pipeline", "prescale_gradients", "progressive_layer_drop",
    "quantize_training", "scheduler", "seq_parallel_communication_data_type", "sparse_attention", "sparse_gradients",
    "steps_per_print", "tensor_parallel", "tensorboard", "timers", "torch_autocast", "train_batch_size",
    "train_micro_batch_size_per_gpu", "use_data_before_expert_parallelism", "vocabulary_size",
    "wall_clock_breakdown", "wandb", "weight_quantization", "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer", "zero_optimization",
})

# Filled from the model's hidden size at train time (HF integration, trainer_config_finalize): no value yet.
_HIDDEN_SIZE_AUTO = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold")


class _Watched(dict):
    """A dict that records which keys are asked for (DeepSpeedConfig reads top-level keys with get/in/[])."""

    def __init__(self, data: Mapping[str, Any], seen: set[str]):
        super().__init__(data)
        self.seen = seen

    def _mark(self, key: Any) -> None:
        self.seen.add(key)

    def get(self, key, default=None):
        self._mark(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self._mark(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self._mark(key)
        return super().__contains__(key)

    def setdefault(self, key, default=None):
        self._mark(key)
        return super().setdefault(key, default)

    def pop(self, key, *default):
        self._mark(key)
        return super().pop(key, *default)

    def keys(self):
        watched = self

        class _Keys(set):
            def __contains__(self, key):
                watched._mark(key)
                return set.__contains__(self, key)

        return _Keys(super().keys())

    def __copy__(self):
        return _Watched(self, self.seen)


def _import_deepspeed():
    # No GPU is needed to judge a config: the CPU accelerator, set only while DeepSpeed is imported and
    # picks it. The launcher's environment becomes the job's, which must choose its own accelerator.
    before = os.environ.get("DS_ACCELERATOR")
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    try:
        import deepspeed  # noqa: F401
        from deepspeed.accelerator import get_accelerator
        from deepspeed.runtime import config as ds_config

        get_accelerator()
    finally:
        if before is None:
            os.environ.pop("DS_ACCELERATOR", None)
    return ds_config


def _pydantic_problems(exc: Exception, file: str, prefix: str) -> list[Problem]:
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return [Problem(file, prefix, str(exc).splitlines()[0])]
    problems = []
    for err in errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        key = f"{prefix}.{loc}" if loc else prefix
        if err.get("type") == "extra_forbidden":
            problems.append(Problem(file, key, "unknown DeepSpeed key", _suggest_section_key(prefix, loc)))
        else:
            problems.append(Problem(file, key, f"{err.get('msg')} (got {err.get('input')!r})"))
    return problems


def _section_fields(prefix: str) -> list[str]:
    try:
        from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
        from deepspeed.runtime.precision_config import DeepSpeedBF16Config, DeepSpeedFP16Config
    except ImportError:
        return []
    models = {"zero_optimization": DeepSpeedZeroConfig, "fp16": DeepSpeedFP16Config, "bf16": DeepSpeedBF16Config}
    model = models.get(prefix)
    if model is None:
        return []
    names = set(model.model_fields)
    for info in model.model_fields.values():
        if info.alias:
            names.add(info.alias)
    return sorted(names)


def _suggest_section_key(prefix: str, key: str) -> str:
    return did_you_mean(key.split(".")[-1], _section_fields(prefix))


def fill_auto(cfg: dict[str, Any], train_args: Any, world_size: int) -> tuple[dict[str, Any], list[str]]:
    """Replace `auto` as transformers' HfTrainerDeepSpeedConfig does; returns (filled, mismatches)."""
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    # The target's world size, not this process's: the batch arithmetic is for the real job.
    args = SimpleNamespace(**{name: getattr(train_args, name) for name in (
        "per_device_train_batch_size", "gradient_accumulation_steps", "max_grad_norm", "learning_rate",
        "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay", "save_on_each_node",
        "fp16", "fp16_full_eval", "bf16", "bf16_full_eval")}, world_size=world_size)
    hf = HfTrainerDeepSpeedConfig(copy.deepcopy(cfg))
    hf.trainer_config_process(args)
    return hf.config, list(hf.mismatches)


def _neutral_args(cfg: dict[str, Any]) -> SimpleNamespace:
    """A DeepSpeed JSON judged on its own: `auto` filled with TrainingArguments' defaults, precision as the JSON says."""
    def enabled(section: str) -> bool:
        value = (cfg.get(section) or {}).get("enabled") if isinstance(cfg.get(section), dict) else None
        return value is True

    return SimpleNamespace(
        per_device_train_batch_size=8, gradient_accumulation_steps=1, max_grad_norm=1.0, learning_rate=5e-5,
        adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8, weight_decay=0.0, save_on_each_node=False,
        fp16=enabled("fp16"), fp16_full_eval=False, bf16=enabled("bf16"), bf16_full_eval=False,
    )


def _drop_unfillable(cfg: dict[str, Any], micro_batch: int) -> None:
    zero = cfg.get("zero_optimization")
    if isinstance(zero, dict):
        for key in _HIDDEN_SIZE_AUTO:
            if zero.get(key) == "auto":
                zero.pop(key)
    for section in ("scheduler",):
        params = (cfg.get(section) or {}).get("params") or {}
        for key in [k for k, v in params.items() if v == "auto"]:
            params.pop(key)
    # DeepSpeed checks train_batch_size against THIS process's world size (1): leave the batch to the
    # HF fill check above, which used the target's world size. DeepSpeed needs one batch size to start from:
    # a JSON that gave only train_batch_size (LLaMA-Factory's examples do) gets the micro-batch in its place.
    if cfg.pop("train_batch_size", None) is not None and "train_micro_batch_size_per_gpu" not in cfg:
        cfg["train_micro_batch_size_per_gpu"] = micro_batch


def check(cfg: Any, file: str, train_args: Any = None, world_size: int = 1) -> list[Problem]:
    """All problems with a DeepSpeed config: unknown keys (any level), bad values, HF/YAML mismatches."""
    if not isinstance(cfg, dict):
        return [Problem(file, "", "a DeepSpeed config must be a JSON object")]
    ds_config = _import_deepspeed()
    problems: list[Problem] = []
    filled = copy.deepcopy(cfg)
    alone = train_args is None
    if alone:
        train_args = _neutral_args(cfg)
    # The HF integration fills `auto` before DeepSpeed ever sees the config: do the same.
    filled, mismatches = fill_auto(filled, train_args, world_size)
    for line in [] if alone else mismatches:
        match = re.match(r"- ds (\S+)=(.*) vs hf (.+?)=(.*)", line)
        if match:
            ds_key, ds_val, hf_key, hf_val = match.groups()
            problems.append(Problem(file, ds_key, f"{ds_val} here but the train YAML has {hf_key}={hf_val} (a run-time crash in the HF integration)",
                                    "set it to \"auto\" or make both agree"))
        else:
            problems.append(Problem(file, "", line))
    _drop_unfillable(filled, train_args.per_device_train_batch_size)
    remaining_auto = [k for k, v in filled.items() if v == "auto"]
    for key in remaining_auto:
        filled.pop(key)

    # Each section on its own, so one bad section does not hide the next.
    sections = (
        ("zero_optimization", ds_config.get_zero_config),
        ("fp16", ds_config.get_float16_config),
        ("bf16", ds_config.get_bfloat16_config),
    )
    broken = set()
    for name, getter in sections:
        if name in filled:
            try:
                getter(filled)
            except Exception as exc:  # pydantic ValidationError or DeepSpeed's own errors
                problems.extend(_pydantic_problems(exc, file, name))
                broken.add(name)
    # The whole config through DeepSpeedConfig, watching which top-level keys it reads. Broken sections are
    # left out so the rest is still judged (their problems are already reported).
    seen: set[str] = set()
    try:
        ds_config.DeepSpeedConfig(_Watched({k: v for k, v in filled.items() if k not in broken}, seen))
    except Exception as exc:
        problems.extend(_pydantic_problems(exc, file, ""))
    else:
        known = seen | _constant_keys()
        for key in cfg:
            if key in known:
                continue
            if key.startswith("_"):  # `"_comment": "..."`: how JSON gets comments; DeepSpeed ignores it, as meant
                problems.append(Problem(file, key, "a comment (DeepSpeed ignores it)", severity="note"))
                continue
            problems.append(Problem(file, key, "DeepSpeed does not know this top-level key (it would be silently ignored)",
                                    KNOWN_WRONG.get(key) or did_you_mean(key, known)))
    return sorted(problems, key=lambda p: p.severity != "error")


def _constant_keys() -> set[str]:
    """Top-level names DeepSpeed declares as constants: a safety net for keys read in ways we do not watch."""
    from deepspeed.runtime import constants

    return {v for k, v in vars(constants).items() if k.isupper() and isinstance(v, str) and re.fullmatch(r"[a-z0-9_]+", v)}
