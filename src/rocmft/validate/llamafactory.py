"""A LLaMA-Factory train config judged by LLaMA-Factory's own argument parser, without loading a model.

Three passes, so that every mistake in a file is reported at once:
1. keys: each key must be a field of LLaMA-Factory's argument dataclasses (typos get a suggestion);
2. values: each value goes through the argparse action LLaMA-Factory's HfArgumentParser builds for it
   (types and choices: `flash_attn: off`, `finetuning_type: lorra`) - the YAML path skips these checks;
3. cross-field: `get_train_args` on the keys that passed, i.e. LLaMA-Factory's own consistency checks.
Some of LLaMA-Factory's checks look at the HOST (bf16 needs a bf16 GPU). A GPU recipe validated on a CPU
laptop or in CI is judged against its target arch instead, and the report says which checks that was.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import functools
import importlib.util
import io
import logging
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..hardware.arches import Arch
from ..io.problems import Problem, did_you_mean
from . import image_packages, optimizers, packages

# Keys from the posts (and habits) that LLaMA-Factory does not take for training, with what to use instead.
KNOWN_WRONG = {
    "gpu_ids": "not a LLaMA-Factory argument: choose GPUs with GPUS=0,1 (ROCR_VISIBLE_DEVICES), count with gpus_per_node",
    "torch_dtype": "not how LLaMA-Factory picks training precision: use bf16/fp16 (a recipe's `precision:`)",
    "overwrite_output_dir": "refused: it destroys earlier results (and transformers 5 removed it); use a new output_dir",
    "config_file": "LLaMA-Factory takes the YAML path as its argument: llamafactory-cli train x.yaml",
    # transformers 5 dropped these TrainingArguments (LLaMA-Factory's examples/extras/fp8 still has the first)
    "fsdp_transformer_layer_cls_to_wrap": "transformers 5 reads it inside fsdp_config: {transformer_layer_cls_to_wrap: [...]}",
    "fsdp_min_num_params": "transformers 5 reads it inside fsdp_config: {min_num_params: N}",
}
UNKNOWN_KEY = "unknown to LLaMA-Factory"  # the message of a key no argument dataclass has (`rocmft import` drops those)


@dataclasses.dataclass
class LFCheck:
    problems: list[Problem]
    notes: list[Problem]
    hf_args: SimpleNamespace  # the TrainingArguments values the DeepSpeed check needs


@contextlib.contextmanager
def _quiet():
    """LLaMA-Factory's INFO chatter off while we parse, and the environment left exactly as it was: the
    launcher's environment is the job's, and a verbosity set here would silence the job's own logs."""
    before = os.environ.get("LLAMAFACTORY_VERBOSITY")
    os.environ["LLAMAFACTORY_VERBOSITY"] = "WARN"
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        if before is None:
            os.environ.pop("LLAMAFACTORY_VERBOSITY", None)
        else:
            os.environ["LLAMAFACTORY_VERBOSITY"] = before


class _Collect(logging.Handler):
    def __init__(self, into: list[str]):
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


@contextlib.contextmanager
def _transformers_warnings(into: list[str]):
    """What transformers warns while it parses the file (`warmup_ratio is deprecated ...`) is about the file:
    it is collected and reported as a note on its key, instead of going to the terminal as a library's line."""
    lib = logging.getLogger("transformers")
    handlers, propagate = lib.handlers[:], lib.propagate
    lib.handlers, lib.propagate = [_Collect(into)], False
    try:
        yield
    finally:
        lib.handlers, lib.propagate = handlers, propagate


def _parser():
    with _quiet():
        from llamafactory.hparams import parser as lf_parser
        from transformers import HfArgumentParser

        return lf_parser, HfArgumentParser(lf_parser._TRAIN_ARGS)


def _known_fields(lf_parser) -> dict[str, Any]:
    """Field name -> declared type. From the annotations: HfArgumentParser rewrites `field.type` in place."""
    hints: dict[str, Any] = {}
    for dc in lf_parser._TRAIN_ARGS:
        declared = {}
        for klass in reversed(dc.__mro__):
            declared.update(getattr(klass, "__annotations__", {}))
        hints.update({f.name: declared.get(f.name, f.type) for f in dataclasses.fields(dc) if f.init})
    return hints


def _type_name(action: argparse.Action) -> str:
    name = getattr(action.type, "__name__", "")
    return {"int": "an integer", "float": "a number", "string_to_bool": "true or false"}.get(name, name or "a string")


def _value_problem(action: argparse.Action, key: str, value: Any, file: str) -> Problem | None:
    values = value if isinstance(value, list) and action.nargs in ("+", "*") else [value]
    for item in values:
        text = ("true" if item else "false") if isinstance(item, bool) else str(item)
        try:
            converted = action.type(text) if action.type else text
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            return Problem(file, key, f"must be {_type_name(action)}, got {item!r}")
        if action.choices is not None and converted not in action.choices:
            choices = ", ".join(str(c) for c in action.choices)
            if isinstance(item, bool):
                return Problem(file, key, f"YAML read this value as {text} (on/off/yes/no are booleans in YAML)",
                               f"one of: {choices}")
            return Problem(file, key, f"`{item}` is not a valid choice",
                           did_you_mean(str(item), [str(c) for c in action.choices]) or f"one of: {choices}")
    return None


@functools.cache
def _templates() -> tuple[str, ...]:
    """The template names LLaMA-Factory registers, read from its data/template.py (`register_template(name=...)`
    calls): importing that module loads LLaMA-Factory's whole data stack (~1 s) for a list of names. Should a
    version register them another way, the module is imported after all."""
    spec = importlib.util.find_spec("llamafactory")
    source = Path(spec.origin).parent / "data" / "template.py" if spec and spec.origin else None
    names: list[str] = []
    if source is not None and source.is_file():
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "register_template":
                name = next((k.value for k in node.keywords if k.arg == "name"), node.args[0] if node.args else None)
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    names.append(name.value)
    if names:
        return tuple(names)
    with _quiet():
        from llamafactory.data.template import TEMPLATES
    return tuple(TEMPLATES)


def _host_has_bf16_gpu() -> bool:
    from transformers.utils import is_torch_bf16_gpu_available

    return bool(is_torch_bf16_gpu_available())


def _hf_values(args: dict[str, Any]) -> SimpleNamespace:
    from transformers import TrainingArguments

    defaults = {f.name: f.default for f in dataclasses.fields(TrainingArguments)}
    names = ("per_device_train_batch_size", "gradient_accumulation_steps", "max_grad_norm", "learning_rate",
             "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay", "save_on_each_node",
             "fp16", "fp16_full_eval", "bf16", "bf16_full_eval")
    return SimpleNamespace(**{n: args.get(n, defaults.get(n)) for n in names})


def _first_line(exc: Exception) -> str:
    # PackageNotFoundError's str() garbles its own message ("No package metadata was found for The '...'").
    text = str(exc.args[0]) if isinstance(exc, ImportError) and exc.args else str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def _key_in(message: str, keys) -> str:
    for key in sorted(keys, key=len, reverse=True):
        if f"`{key}`" in message or f" {key} " in f" {message} ":
            return key
    return ""


def check(args: dict[str, Any], file: str, arch: Arch | None = None) -> LFCheck:
    lf_parser, hf_parser = _parser()
    fields = _known_fields(lf_parser)
    actions = hf_parser._option_string_actions
    problems: list[Problem] = []
    notes: list[Problem] = []
    bad: set[str] = set()

    for key, value in args.items():
        if key not in fields:
            bad.add(key)
            problems.append(Problem(file, key, UNKNOWN_KEY,
                                    KNOWN_WRONG.get(key) or did_you_mean(key, fields)))
            continue
        action = actions.get(f"--{key}")
        # `str | bool` fields take either; argparse can only express one of them (the bool), the YAML both.
        takes_str = isinstance(value, str) and "str" in str(fields[key]).replace("string", "")
        problem = (_value_problem(action, key, value, file)
                   if action is not None and value is not None and not takes_str else None)
        if problem:
            bad.add(key)
            problems.append(problem)

    if "template" in args and "template" not in bad and str(args["template"]) not in _templates():
        bad.add("template")
        problems.append(Problem(file, "template", f"LLaMA-Factory has no template `{args['template']}`",
                                did_you_mean(str(args["template"]), _templates())))

    # Cross-field checks, on what passed. Judged for the target, not this host, where they differ.
    trial = {k: v for k, v in args.items() if k not in bad}
    problems += optimizers.check(trial, file)
    if trial.pop("deepspeed", None) is not None:
        notes.append(Problem(file, "deepspeed", "checked by DeepSpeed's own config model (LLaMA-Factory only "
                                                "accepts it under torchrun)", severity="note"))
    # LLaMA-Factory refuses bf16/fp16 on a host without such a GPU: the host's answer, not the target's.
    if (arch is None or arch.is_gpu) and not _host_has_bf16_gpu():
        for key in ("bf16", "fp16", "pure_bf16"):
            if not trial.get(key):
                continue
            trial[key] = False
            if arch is None:
                notes.append(Problem(file, key, "depends on the GPU that runs the job, not judged on this host",
                                     "`rocmft validate --arch NAME` judges it for that arch", severity="note"))
            elif key != "fp16" and not arch.bf16:
                problems.append(Problem(file, key, f"{arch.name} has no bf16 support", "use fp16: true"))
            else:
                notes.append(Problem(file, key, f"host-dependent check judged for {arch.name} (supports it), "
                                                "not this host", severity="note"))
    # Settings that need an optional package: judged against the arch image's list (docker/arches.yaml
    # `packages:`), not this host's venv; without an arch, LLaMA-Factory's own check on this host decides,
    # except for Liger, which no CPU venv has.
    if arch is not None:
        lacking, judged, trial = image_packages.judge(trial, arch, file)
        problems += lacking
        notes += judged
    elif trial.get("enable_liger_kernel") and importlib.util.find_spec("liger_kernel") is None:
        trial["enable_liger_kernel"] = False
        notes.append(Problem(file, "enable_liger_kernel", "needs liger-kernel where the job runs, not judged "
                             "on this host", "`rocmft validate --arch NAME` judges it for that arch", severity="note"))
    missing: list[tuple[str, ImportError]] = []
    warned: list[str] = []
    try:
        with _quiet(), packages.each_missing(lf_parser, missing), _transformers_warnings(warned):
            lf_parser.get_train_args(trial)
    except SystemExit as exc:
        problems.append(Problem(file, "", f"LLaMA-Factory's parser exited ({exc.code})"))
    except Exception as exc:  # LLaMA-Factory raises ValueError for its cross-field checks
        message = _first_line(exc)
        problems.append(Problem(file, _key_in(message, trial), message))
    problems += packages.problems(missing, file)
    for message in dict.fromkeys(warned):
        notes.append(Problem(file, _key_in(message, trial), f"transformers: {message}", severity="note"))
    return LFCheck(problems, notes, _hf_values(args))
