"""The optional packages a recipe's settings need, judged against the list of what the arch's image carries
(docker/arches.yaml `packages:`, `Arch.image_packages`), never against this host's venv.

A setting whose package the image lacks is an error: LLaMA-Factory would stop every rank at start-up
(`check_version(..., mandatory=True)`), or, for `flash_attn: fa2` without flash-attn, silently train with
another attention than the recipe asked for. Each rule names the LLaMA-Factory 0.9.5 code that needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..hardware.arches import Arch
from ..io.problems import Problem, did_you_mean
from ..recipe import tracking


@dataclass(frozen=True)
class Need:
    key: str
    package: str  # canonical pip name, as in docker/arches.yaml
    wants: Callable[[Any, dict[str, Any]], bool]  # (the key's value, all args) -> the setting needs the package
    source: str
    neutral: Any = False  # the value that needs nothing, for LLaMA-Factory's own parser on this host


def _truthy(value: Any, _args: dict) -> bool:
    return bool(value)


def _bnb(value: Any, args: dict) -> bool:
    return value is not None and str(args.get("quantization_method") or "bnb") == "bnb"


def _method(name: str) -> Callable[[Any, dict], bool]:
    return lambda value, args: value is not None and str(args.get("quantization_method") or "bnb") == name


PARSER = "llamafactory/hparams/parser.py _check_extra_dependencies"
QUANT = "llamafactory/model/model_utils/quantization.py"
NEEDS = (
    Need("enable_liger_kernel", "liger-kernel", _truthy, f"{PARSER}: check_version('liger-kernel', mandatory=True)"),
    Need("flash_attn", "flash-attn", lambda v, a: str(v) == "fa2",
         "llamafactory/model/model_utils/attention.py: without flash-attn, fa2 only warns and is not used",
         neutral="auto"),
    Need("quantization_bit", "bitsandbytes", _bnb, f"{QUANT}: check_version('bitsandbytes>=0.39.0', mandatory=True)",
         neutral=None),
    Need("quantization_bit", "hqq", _method("hqq"), f"{QUANT}: transformers' HqqConfig needs hqq", neutral=None),
    Need("quantization_bit", "eetq", _method("eetq"), f"{QUANT}: transformers' EetqConfig needs eetq", neutral=None),
    Need("use_galore", "galore-torch", _truthy, f"{PARSER}: check_version('galore_torch', mandatory=True)"),
    Need("use_apollo", "apollo-torch", _truthy, f"{PARSER}: check_version('apollo_torch', mandatory=True)"),
    Need("use_badam", "badam", _truthy, f"{PARSER}: check_version('badam>=1.2.1', mandatory=True)"),
    Need("use_adam_mini", "adam-mini", _truthy, f"{PARSER}: check_version('adam-mini', mandatory=True)"),
    Need("mixture_of_depths", "mixture-of-depth", lambda v, a: v is not None,
         f"{PARSER}: check_version('mixture-of-depth>=1.1.6', mandatory=True)", neutral=None),
    Need("use_unsloth", "unsloth", _truthy, f"{PARSER}: check_version('unsloth', mandatory=True)"),
    Need("use_kt", "kt-kernel", _truthy, f"{PARSER}: check_version('kt-kernel', mandatory=True)"),
    Need("use_swanlab", "swanlab", _truthy, f"{PARSER}: check_version('swanlab', mandatory=True)"),
    Need("plot_loss", "matplotlib", _truthy, f"{PARSER}: check_version('matplotlib', mandatory=True)"),
    Need("infer_backend", "vllm", lambda v, a: str(v) == "vllm", f"{PARSER}: check_version('vllm', mandatory=True)",
         neutral="huggingface"),
    Need("infer_backend", "sglang", lambda v, a: str(v) == "sglang", f"{PARSER}: check_version('sglang', mandatory=True)",
         neutral="huggingface"),
    Need("deepspeed", "deepspeed", lambda v, a: v is not None, f"{PARSER}: check_version('deepspeed', mandatory=True)",
         neutral=None),
    *(Need("predict_with_generate", p, _truthy, f"{PARSER}: check_version('{p.replace('-', '_')}', mandatory=True)")
      for p in ("jieba", "nltk", "rouge-chinese")),
    # transformers builds the trackers' callbacks when the Trainer starts, after the model loaded: each raises
    # RuntimeError ("... requires ... to be installed") without its package. `all` turns on only what is there.
    *(Need("report_to", package, lambda v, a, t=tracker: t in tracking.names(v),
           f"transformers/integrations/integration_utils.py: its {tracker} callback needs {package}", neutral=None)
      for tracker, package in tracking.PACKAGES.items()),
)


def needed(args: dict[str, Any]) -> list[Need]:
    """The rules a recipe's settings trigger."""
    return [n for n in NEEDS if n.key in args and n.wants(args[n.key], args)]


def judge(args: dict[str, Any], arch: Arch, file: str) -> tuple[list[Problem], list[Problem], dict[str, Any]]:
    """(errors, notes, args for this host's parser): an error per setting whose package the arch's image lacks;
    a setting the image serves is judged done; where this host lacks its package (liger-kernel is not in the
    CPU venv) and LLaMA-Factory's parser would check it, it is neutralised so this host does not decide."""
    errors: list[Problem] = [Problem(file, "report_to", f"transformers has no tracker `{name}`",
                                     did_you_mean(name, tracking.PACKAGES) or f"one of {', '.join(tracking.PACKAGES)}")
                             for name in tracking.unknown(args.get("report_to"))]
    notes: list[Problem] = []
    trial = dict(args)
    for need in needed(args):
        have = arch.image_packages.get(need.package)
        if have is None:
            errors.append(Problem(file, need.key, f"needs `{need.package}`, which the {arch.name} image does not have "
                                  f"(docker/arches.yaml arches.{arch.name} packages; {need.source})",
                                  f"remove `{need.key}`, or pin `{need.package}` (requirements/lock.txt or "
                                  f"hardware/versions.py), list it in the {arch.name} packages, `make image ARCH={arch.name}`"))
        elif not _on_this_host(need.package):
            notes.append(Problem(file, need.key, f"judged for {arch.name}: its image has {need.package} {have} "
                                 "(docker/arches.yaml), this host does not", severity="note"))
        else:
            continue
        if need.source.startswith(PARSER) and need.key in trial:
            trial[need.key] = need.neutral
    return errors, notes, trial


def _on_this_host(package: str) -> bool:
    from importlib import metadata

    try:
        metadata.version(package)
    except metadata.PackageNotFoundError:
        return False
    return True
