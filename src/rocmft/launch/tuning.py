"""TUNE=1: PyTorch TunableOp picks the fastest GEMM kernel per shape (hipBLASLt or rocBLAS on ROCm), and the
results are kept for every later run of the same image and model shape.

From PyTorch's TunableOp documentation (torch/cuda/tunable.py, aten/src/ATen/cuda/tunable/README.md):
- PYTORCH_TUNABLEOP_ENABLED=1 routes GEMMs through TunableOp; PYTORCH_TUNABLEOP_TUNING=1 benchmarks every
  solution of a shape it has no result for (each up to 100 iterations or 30 ms), =0 only reads results.
- PYTORCH_TUNABLEOP_FILENAME names the results CSV; `%d` in it becomes the device ordinal, so the processes of
  one node write one file each. It is read at the first GEMM and written when the process exits.
- The CSV starts with `Validator` lines (PyTorch, ROCm, hipBLASLt, rocBLAS versions): a file from other
  versions is rejected, so a rebuilt image never runs stale solutions.

The first TUNE=1 run of an image+shape tunes (its speed includes the tuning); later ones reuse the file with
tuning off. The file lives under the project's caches (.cache/tunableop/<image>/<shape>/), never in a run dir:
a container rewrites its run dir, and a run dir belongs to one run. Packed recipes (neat_packing) have few
fixed GEMM shapes, so one tuning covers the run. Not measured here (no AMD GPU): what it gains is for
`make bench TUNE=1` to say, run against the same bench without it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

FOLDER = ".cache/tunableop"
RESULTS = "tunableop_results%d.csv"  # %d: the device ordinal (one file per process of a node)
ENV = ("PYTORCH_TUNABLEOP_ENABLED", "PYTORCH_TUNABLEOP_TUNING", "PYTORCH_TUNABLEOP_FILENAME")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def shape_key(args: Mapping[str, Any], precision: str) -> str:
    """What fixes a run's GEMM shapes: the model (its dimensions), the dtype, LoRA's rank or full, and the tokens of a
    micro-batch (cutoff x batch; packed rows are always cutoff long). Readable, plus a digest of the same fields."""
    fields = {
        "model": str(args.get("model_name_or_path") or ""), "precision": precision,
        "method": str(args.get("finetuning_type") or "lora"),
        "rank": str(args.get("lora_rank") or "") if (args.get("finetuning_type") or "lora") == "lora" else "",
        "batch": str(args.get("per_device_train_batch_size") or 1), "cutoff": str(args.get("cutoff_len") or ""),
        "packed": "neat" if args.get("neat_packing") else "packed" if args.get("packing") else "",
    }
    digest = hashlib.sha256(repr(sorted(fields.items())).encode()).hexdigest()[:10]
    model = Path(fields["model"].rstrip("/")).name
    rank = f"-r{fields['rank']}" if fields["rank"] else ""
    packed = f"-{fields['packed']}" if fields["packed"] else ""
    return _slug(f"{model}-{precision}-{fields['method']}{rank}-{fields['batch']}x{fields['cutoff']}{packed}-{digest}")


def image_key(runtime: str, arch: str, image: str | None, torch_version: str | None = None) -> str:
    """The stack the GEMMs run on: the image for the container runtimes, this venv's torch for RUNTIME=local."""
    if runtime == "local":
        return _slug(f"venv-{arch}-torch{torch_version or 'unknown'}")
    from ..image.plan import tags

    return _slug(image or tags(arch)[0])


@dataclass(frozen=True)
class Tuning:
    folder: Path  # absolute: a container mounts it writable at the same path
    tuning: bool  # True: no results yet, this run tunes; False: reuse them

    @property
    def state(self) -> str:
        return "tuning" if self.tuning else "tuned"

    def env(self) -> dict[str, str]:
        return {"PYTORCH_TUNABLEOP_ENABLED": "1", "PYTORCH_TUNABLEOP_TUNING": "1" if self.tuning else "0",
                "PYTORCH_TUNABLEOP_FILENAME": str(self.folder / RESULTS)}

    def overrides(self) -> list[str]:
        """As recipe overrides (`env.X=...`): the plan, plan.json and a bench row's overrides all carry them."""
        return [f"env.{k}={v}" for k, v in self.env().items()]

    def line(self) -> str:
        if self.tuning:
            return (f"TUNE=1: no TunableOp results for this image and shape yet: this run tunes every GEMM shape "
                    f"(its first steps are slower) and writes {self.folder}/")
        return f"TUNE=1: reusing the TunableOp results in {self.folder}/ (tuning off)"


def results(folder: Path) -> list[Path]:
    return sorted(folder.glob(RESULTS.replace("%d", "*")))


def plan(root: Path, image: str, shape: str) -> Tuning:
    """The reuse rule: results of this image and shape exist -> tuning off; none -> tuning on."""
    folder = (root / FOLDER / image / shape).resolve()
    return Tuning(folder, tuning=not results(folder))


def state_of(overrides: Iterable[str]) -> str:
    """untuned | tuning | tuned, from a run's (or bench row's) overrides."""
    found = dict(o.partition("=")[::2] for o in overrides if o.startswith("env.PYTORCH_TUNABLEOP_"))
    if found.get("env.PYTORCH_TUNABLEOP_ENABLED") != "1":
        return "untuned"
    return "tuning" if found.get("env.PYTORCH_TUNABLEOP_TUNING") == "1" else "tuned"
