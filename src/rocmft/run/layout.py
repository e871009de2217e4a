"""What changes when a run's world size differs from the one its recipe (or checkpoint) was made for.

Every runtime asks this before a run dir exists: GPUS=2,3 on an 8-GPU recipe, NODES=3 on Slurm, a RESUME
from a checkpoint another number of ranks wrote.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable

from ..io.problems import Problem
from ..recipe import recipes
from ..recipe.recipes import Recipe

BATCH_KEYS = ("per_device_train_batch_size", "gradient_accumulation_steps")
LF_BATCH_DEFAULTS = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1}  # transformers' defaults


def user_batch_overrides(overrides: Iterable[str]) -> set[str]:
    """The batch keys the user set on the command line (SET=...): an explicit choice is never second-guessed."""
    found = set()
    for item in overrides:
        key = item.partition("=")[0].strip()
        last = key.split(".")[-1]
        if last in BATCH_KEYS:
            found.add(last)
    return found


def _batch(recipe: Recipe) -> tuple[int, int]:
    lf = recipe.llamafactory
    return (int(lf.get("per_device_train_batch_size", LF_BATCH_DEFAULTS["per_device_train_batch_size"])),
            int(lf.get("gradient_accumulation_steps", LF_BATCH_DEFAULTS["gradient_accumulation_steps"])))


def layout_text(recipe: Recipe) -> str:
    unit = "process" if recipe.arch == "cpu" else "GPU"
    n = recipe.gpus_per_node
    return f"{recipe.nodes} node{'s' if recipe.nodes != 1 else ''} x {n} {unit}{('es' if unit == 'process' else 's') if n != 1 else ''}"


def batch_problems(recipe: Recipe, written: Recipe, pinned: set[str]) -> list[Problem]:
    """The global batch across nodes x GPUs, judged against the one the recipe file was written for.

    A recipe's global batch (per_device x grad_accum x GPUs x nodes, as its file says) is what its learning
    rate was tuned for. Moving it to another node count keeps per-device settings, so the global batch
    silently scales. Refused when the recipe's batch cannot be split evenly over the new world size at all
    (no per_device x grad_accum gives it back); a warning with the exact SET= when it can be kept. Setting
    per_device_train_batch_size / gradient_accumulation_steps on the command line states the batch you want.
    """
    world, written_world = recipe.world_size, written.world_size
    if world == written_world or pinned:
        return []
    per_device, accum = _batch(recipe)
    w_per_device, w_accum = _batch(written)
    target = w_per_device * w_accum * written_world
    now = per_device * accum * world
    if now == target:
        return []
    layout = layout_text(recipe)
    if target % world:
        divides = [n for n in range(1, 65) if target % (n * recipe.gpus_per_node) == 0][:6]
        hint = f"NODES={' or '.join(map(str, divides))} keep it" if divides else "no node count keeps it"
        return [Problem(recipe.path, "global batch",
                        f"the recipe's global batch {target} ({w_per_device} per device x {w_accum} accumulation x "
                        f"{written_world} GPUs) does not divide across {layout} = {world} processes",
                        f"{hint}; or state the batch you want with SET=\"per_device_train_batch_size=P gradient_accumulation_steps=A\" "
                        f"(global batch P x A x {world})")]
    per_rank = target // world
    keep_pd = max(d for d in range(1, per_device + 1) if per_rank % d == 0)
    keep = f"per_device_train_batch_size={keep_pd} gradient_accumulation_steps={per_rank // keep_pd}"
    return [Problem(recipe.path, "global batch",
                    f"the global batch {'grows' if now > target else 'shrinks'} from {target} (as the recipe was written) to {now} on {layout}: "
                    f"its learning rate was tuned for {target}",
                    f"to keep {target}: SET=\"{keep}\"", severity="warning")]


def checkpoint_world_size(checkpoint: Path) -> tuple[int | None, bool]:
    """(data-parallel ranks that wrote the DeepSpeed ZeRO shards, universal?) of an HF Trainer checkpoint."""
    latest = checkpoint / "latest"
    tag = latest.read_text().strip() if latest.is_file() else None
    folders = [checkpoint / tag] if tag and (checkpoint / tag).is_dir() else sorted(checkpoint.glob("global_step*"))
    for folder in folders:
        if (folder / "zero").is_dir() and folder.name.endswith("_universal"):
            return None, True
        ranks = set()
        for f in folder.glob("*zero_pp_rank_*_mp_rank_*_optim_states.pt"):
            match = re.search(r"zero_pp_rank_(\d+)_", f.name)
            if match:
                ranks.add(int(match.group(1)))
        if ranks:
            return len(ranks), False
    return None, False


def resume_problems(recipe: Recipe, resume_from: str | None, root: Path) -> list[Problem]:
    """Resuming on a different node count: fine for plain DDP (LoRA), refused for sharded DeepSpeed state."""
    if not resume_from:
        return []
    checkpoint = Path(resume_from)
    checkpoint = checkpoint if checkpoint.is_absolute() else root / checkpoint
    old_run = checkpoint.parent.parent
    saved, universal = checkpoint_world_size(checkpoint)
    if universal:
        return [Problem("", "RESUME", f"{resume_from} holds a DeepSpeed universal checkpoint: it loads on any world size "
                        "only with \"checkpoint\": {\"load_universal\": true} in the DeepSpeed config", severity="note")]
    old_world, old_ds = saved, None
    try:
        plan = json.loads((old_run / "plan.json").read_text())
        old_world = old_world or int(plan["nproc_per_node"]) * int(plan["nnodes"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        resolved = recipes.parse_yaml((old_run / "recipe.resolved.yaml").read_text()) or {}
        old_ds = resolved.get("deepspeed")
        old_world = old_world or int(resolved["gpus_per_node"]) * int(resolved["nodes"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    if old_world is None or old_world == recipe.world_size:
        return []
    sharded = saved is not None or (old_ds not in (None, "none") and recipe.deepspeed != "none")
    if sharded:
        return [Problem("", "RESUME",
                        f"{resume_from} was saved by {old_world} DeepSpeed ranks and this run has {recipe.world_size} "
                        f"({layout_text(recipe)}): ZeRO optimizer shards only load on the same "
                        "world size",
                        f"resume with the old layout (NODES/gpus_per_node giving {old_world} ranks), or convert the "
                        "checkpoint to a DeepSpeed universal checkpoint first (docs/multinode.md, "
                        "\"Resume on a different node count\")")]
    return [Problem("", "RESUME", f"resuming a {old_world}-process checkpoint on {recipe.world_size} processes: "
                    "the optimizer state is complete (no DeepSpeed shards); the data order differs from an "
                    "uninterrupted run", severity="note")]
