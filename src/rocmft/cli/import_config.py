"""`rocmft import FILE TO [--ds JSON] [--arch A] [--gpus-per-node N] [--cmd LINE]`: your LLaMA-Factory config as a recipe."""

from __future__ import annotations

from ..io.problems import Problem, ProblemReport

NAME = "import"
HELP = ("turn a LLaMA-Factory train YAML (+ its DeepSpeed JSON, + the shell line it ran with) into my/recipes/<TO>.yaml, "
        "saying every change (never overwrites)")


def add_arguments(parser) -> None:
    parser.add_argument("file", nargs="?", default="", help="the LLaMA-Factory train YAML (what `llamafactory-cli train` takes)")
    parser.add_argument("to", nargs="?", default="", help="the new recipe's name: my/recipes/<to>.yaml")
    parser.add_argument("--ds", default=None, help="its DeepSpeed JSON (default: the one the YAML's deepspeed: names)")
    parser.add_argument("--arch", default=None, help="the GPU arch that will train it (default: a rendered file's, "
                                                     "PYTORCH_ROCM_ARCH in --cmd, or this host's GPU)")
    parser.add_argument("--gpus-per-node", default=None, help="GPUs per node (default: from --cmd, else 1)")
    parser.add_argument("--cmd", default=None, help="the shell line it ran with (env, torchrun/llamafactory-cli and "
                                                    "their process counts, extra arguments)")
    parser.add_argument("--keep-ds", action="store_true",
                        help="keep the DeepSpeed JSON byte for byte as the recipe's own file (no preset), still "
                             "validated by DeepSpeed's config model")


def run(args) -> int:
    from .. import importer

    if not args.file:
        raise ProblemReport([Problem("", "FILE", "missing: the LLaMA-Factory train YAML to import",
                                     "make import FILE=my_train.yaml TO=my-recipe")])
    report = importer.run(importer.Request(file=args.file, to=args.to, ds=args.ds, arch=args.arch,
                                           gpus_per_node=args.gpus_per_node, cmd=args.cmd, keep_ds=args.keep_ds))
    print(report.text())
    return 0
