"""`rocmft render RECIPE [k=v...]`: render + validate into a new run dir, print where and the key settings."""

from __future__ import annotations

from .. import pipeline
from ..run import runs
from .common import add_recipe_arguments, overrides, warn

HELP = "render + validate a recipe into a new run dir (train.yaml, ds_config.json)"


def add_arguments(parser) -> None:
    add_recipe_arguments(parser)
    parser.add_argument("--arch", default=None)
    parser.add_argument("--nodes", default=None)
    parser.add_argument("--run-name", default=None)
    parser.add_argument("--no-validate", action="store_true", help="skip LLaMA-Factory/DeepSpeed validation")


def summary(prep: pipeline.Prepared) -> list[str]:
    r, a = prep.recipe, prep.rendered.args
    lines = [
        f"recipe     {r.name} ({r.arch} x{r.gpus_per_node} GPU{'s' if r.gpus_per_node > 1 else ''}"
        + (f" x{r.nodes} nodes" if r.nodes > 1 else "") + ")",
        f"model      {a.get('model_name_or_path')} (template {a.get('template')})",
        f"method     {a.get('finetuning_type')}, deepspeed {r.deepspeed}, precision {prep.rendered.precision.name}"
        f" ({prep.rendered.precision.reason})",
        f"data       {a.get('dataset')} (cutoff {a.get('cutoff_len')}, batch {a.get('per_device_train_batch_size')}"
        f" x accum {a.get('gradient_accumulation_steps', 1)} x {r.world_size} = "
        f"{(a.get('per_device_train_batch_size') or 1) * (a.get('gradient_accumulation_steps') or 1) * r.world_size})",
        f"lr         {a.get('learning_rate')}, epochs {a.get('num_train_epochs')}"
        + (f", max_steps {a['max_steps']}" if a.get("max_steps") else ""),
    ]
    return lines


def run(args) -> int:
    prep = pipeline.prepare(args.recipe, overrides(args), arch=args.arch, nodes=args.nodes,
                            run_name=args.run_name, validate=not args.no_validate, made_by="render")
    warn(prep.messages)
    run_dir = pipeline.commit(prep)
    for line in summary(prep):
        print(line)
    print(f"wrote      {runs.relative(run_dir)}/train.yaml" + (f", {runs.relative(run_dir)}/ds_config.json" if prep.rendered.ds_config else ""))
    checks = "LLaMA-Factory parser" + (" + DeepSpeed config model" if prep.rendered.ds_config else "")
    if args.no_validate:
        verdict = "no (--no-validate)"
    elif prep.validated_in:
        verdict = f"yes: {checks}, in {prep.validated_in}"
    else:
        verdict = "inputs only: the stack checks could not run here (see the warning above)"
    print(f"validated  {verdict}")
    return 0
