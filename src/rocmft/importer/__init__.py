"""`rocmft import`: a LLaMA-Factory train YAML (+ its DeepSpeed JSON, + the shell line it ran with) -> a recipe.

The flow, one module each: read the files (`source`, `command`) -> judge them as `validate` would (`check`) ->
translate what rocmft owns (`translate`) -> pick the base and what differs from it (`base`) -> match the
DeepSpeed JSON to a preset or keep it (`deepspeed`) -> write the recipe (`write`), render and validate it,
plan it (`check`) -> say all of it (`report`). Nothing is written for input that cannot become a recipe, and
a written recipe that does not validate is removed again: the user's files are only ever read.

May import: io, hardware, recipe, run, plan, validate, launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..io import paths
from ..io.problems import Problem, ProblemReport
from ..recipe import ds_presets, precision, recipes
from ..validate import where
from ..validate.llamafactory import UNKNOWN_KEY
from . import base, check, command, deepspeed, source, translate, write
from .report import Report

DS_SUFFIX = ".ds.json"


@dataclass
class Request:
    file: str
    to: str
    ds: str | None = None
    arch: str | None = None
    gpus_per_node: str | None = None
    cmd: str | None = None
    keep_ds: bool = False  # KEEP_DS=1: the DeepSpeed JSON byte for byte as the recipe's own, never a preset


def _drop_refused(args: dict[str, Any], problems: list[Problem], file: str, report: Report) -> dict[str, Any]:
    """Keys LLaMA-Factory does not know (it would refuse the file), and inference settings it refuses for
    training (an invalid `infer_backend`): left out, each said."""
    out = dict(args)
    for p in problems:
        if p.file != file or p.key not in out or p.severity != "error":
            continue
        if p.message == UNKNOWN_KEY:
            report.add("dropped", f"{p.key}: {out.pop(p.key)} (unknown to LLaMA-Factory{': ' + p.suggestion if p.suggestion else ''})")
        elif p.key.startswith("infer_"):
            report.add("dropped", f"{p.key}: {out.pop(p.key)} (an inference setting, irrelevant to training: {p.message})")
    return out


def _fields(layered: base.Layered, wanted: dict[str, Any]) -> dict[str, Any]:
    """The project fields the recipe states: arch and GPUs always, the rest where they differ from the base."""
    merged = layered.merged
    fields = {"base": layered.base, "arch": wanted["arch"], "gpus_per_node": wanted["gpus_per_node"]}
    defaults = {"nodes": 1, "deepspeed": "none", "precision": "auto", "env": {}}
    for key in ("nodes", "deepspeed", "precision"):
        if wanted[key] != merged.get(key, defaults[key]):
            fields[key] = wanted[key]
    new_env = {k: v for k, v in wanted["env"].items() if (merged.get("env") or {}).get(k) != v}
    if new_env:
        fields["env"] = new_env
    return fields


def run(req: Request) -> Report:
    target = recipes.new_path(req.to)  # a bad or taken name is refused before anything is read
    report = Report()
    launch = command.parse(req.cmd)
    unreadable = [p for p in launch.problems if p.message.startswith("not a shell line")]
    if unreadable:
        raise ProblemReport(unreadable)
    src = source.read_train_yaml(req.file, launch.lf_args)
    if launch.lf_args:
        overridden = [k for k in launch.lf_args if k in src.yaml_args and not base.same(src.yaml_args[k], launch.lf_args[k])]
        report.add("translated", f"CMD's {len(launch.lf_args)} LLaMA-Factory arguments taken with the file's" +
                   (f" (CMD's win, as in LLaMA-Factory: {', '.join(overridden)})" if overridden else ""))
    if launch.config_file and Path(launch.config_file).name != src.path.name:
        report.add("advice", f"CMD trains {launch.config_file}; this recipe was made from {req.file}")
    ds_path = Path(req.ds).expanduser() if req.ds else (
        source.find_ds(str(src.args["deepspeed"]), src.path) if src.args.get("deepspeed") else None)
    ds_cfg = source.read_ds_json(ds_path) if ds_path else None
    if req.ds and src.args.get("deepspeed") and Path(str(src.args["deepspeed"])).name != ds_path.name:
        report.add("advice", f"the YAML names deepspeed: {src.args['deepspeed']}; DS={req.ds} was imported instead")

    arch = translate.choose_arch(req.arch, src, launch, report)
    gpus_per_node, nodes, gpus = translate.launch_layout(req.gpus_per_node, launch, src.args, arch, report)
    file_label, ds_label = req.file, str(ds_path or "")
    place = where.auto(arch)  # where LLaMA-Factory's and DeepSpeed's checks run: this venv, or the arch's image
    judged = check.source(src.args, ds_cfg, arch, gpus_per_node * nodes, file_label, ds_label, place)
    report.problems = launch.problems + [p for p in judged if p.severity != "note"]  # notes say how it was judged
    prec_name = translate.choose_precision(src.args, arch, report)
    args = _drop_refused(translate.drop_owned(src.args, arch, report), report.problems, file_label, report)
    args = translate.warmup(args, report)
    layered = base.choose(args)
    base.describe(layered, report)

    preset, match = "none", None
    if ds_cfg is not None:
        prec, _ = precision.resolve(prec_name, arch)
        judged_here = place.kind != "none"  # else nothing says which of its keys DeepSpeed refuses
        match = deepspeed.verbatim(ds_cfg, prec_name) if req.keep_ds else \
            deepspeed.match(ds_cfg, prec, deepspeed.refused_keys(report.problems, ds_label) if judged_here else None)
        preset = match.preset or f"{req.to}{DS_SUFFIX}"
        shape = "ZeRO stage {}, optimizer offload {}, weights offload {}".format(*ds_presets.shape(ds_cfg))
        report.add("translated", f"deepspeed: {ds_path.name} -> deepspeed: {preset} ({shape})")
        report.lines["deepspeed"] += match.differences or [f"{ds_path.name} renders as preset {preset} does"]
    env = translate.environment(launch, arch, report)
    translate.remote_code(args, report)
    wanted = {"arch": arch.name, "gpus_per_node": gpus_per_node, "nodes": nodes, "deepspeed": preset,
              "precision": prec_name, "env": env}
    fields = _fields(layered, wanted)
    train = f"make train RECIPE={req.to}" + (f" GPUS={gpus}" if gpus else "")
    header = _header(req, src.args, wanted, train)
    null_notes = {k: f"{base.default_text(k)}, as in {Path(req.file).name} ({layered.base}: {base.text(v)})"
                  for k, v in (layered.merged.get("llamafactory") or {}).items() if k in layered.carried}
    text = write.recipe_text(header, fields, layered.carried, null_notes)

    created: list[Path] = []
    try:
        if match is not None and match.kept is not None:
            ds_target = recipes.new_path(req.to, DS_SUFFIX)
            write.create(ds_target, ds_path.read_bytes().decode("utf-8") if req.keep_ds else write.ds_text(match.kept))
            created.append(ds_target)
        write.create(target, text)
        created.append(target)
        rec = recipes.load(str(target))
        report.validated, missing = check.recipe(rec, arch, place)
        report.plan = check.plan(rec)
    except BaseException as exc:
        for path in created:
            path.unlink(missing_ok=True)
        if isinstance(exc, ProblemReport):
            raise ProblemReport([*report.problems, *exc.problems, Problem(
                "", "TO", f"{target.name} not written: the recipe would not validate (the errors above)",
                "fix them in your file and import again")]) from None
        raise
    for p in missing:
        report.add("advice", f"before training: {p.line().removeprefix('error: ')}")
    report.written = [paths.shown(p) for p in reversed(created)]
    report.summary = (f"base {layered.base}, {arch.name}, {gpus_per_node} GPU(s) x {nodes} node(s), "
                      f"deepspeed {preset}, precision {prec_name}")
    report.command = train
    return report


def _header(req: Request, args: dict[str, Any], wanted: dict[str, Any], train: str) -> list[str]:
    sources = " + ".join(x for x in (req.file, req.ds or "") if x) + (" + CMD" if req.cmd else "")
    model = str(args.get("model_name_or_path", "?")).rsplit("/", 1)[-1]
    what = f"{model} {args.get('finetuning_type', base.LF_METHOD)} {args.get('stage', base.LF_STAGE)}"
    ds = "" if wanted["deepspeed"] == "none" else f", DeepSpeed {wanted['deepspeed']}"
    return [f"Imported from {sources}: {what} on {wanted['gpus_per_node']}x {wanted['arch']}{ds}.",
            f"  {train}",
            ("Written by `rocmft import` (docs/recipes.md#import): a key set to null uses LLaMA-Factory's default, "
             "as the imported file did.")]
