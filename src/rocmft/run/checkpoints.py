"""Which HF Trainer checkpoints a run can resume from: complete ones only, judged from the files (no torch).

transformers picks the checkpoint to resume from by its number alone (`trainer_utils.get_last_checkpoint`,
which LLaMA-Factory calls when `resume_from_checkpoint` is unset): a checkpoint a dying node left half
written would be the one loaded, and the run would crash on it again, or worse, go on with an optimizer
that restarted from zero (the Trainer skips a missing optimizer.pt silently). Here a checkpoint is complete when

- `trainer_state.json` parses and names the folder's step. The Trainer writes it after the weights, the
  optimizer, the scheduler and the RNG states (`Trainer._save_checkpoint`), and with DeepSpeed after
  `save_checkpoint`'s closing barrier, so every rank's shard is on disk before it exists;
- the weights are there (an adapter, a model, or every shard a `*.index.json` lists), and the optimizer and
  scheduler states: `optimizer.pt` + `scheduler.pt`, or DeepSpeed's `latest` naming a `global_stepN/` that
  holds model and optimizer states;
- no file is cut short: a safetensors file is as long as its header says; a torch.save file (a zip) has its
  central directory, which is written last, at the end.

The job wrote these files (a container's code, as your uid), and the host reads them (RESUME=, the "continue it"
line, a diverged run's last good checkpoint): like every job file (io/hostio.py), never through a link (a linked
checkpoint folder is not one of this run's), never a FIFO, a JSON within hostio's cap, a safetensors header
within safetensors' own (issue 43, N12: a FIFO hung the launcher, an 8 GiB header was a MemoryError).
"""

from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from ..io import hostio

_NAME = re.compile(r"^checkpoint-(\d+)$")
WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin", "model.safetensors", "pytorch_model.bin")
INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
_BINARY = (".safetensors", ".bin", ".pt", ".pth")
SAFETENSORS_HEADER_LIMIT = 100_000_000  # the safetensors library's own cap on a header (MAX_HEADER_SIZE)
ZIP_END, ZIP_END_SEARCH = b"PK\x05\x06", 22 + 65535  # a zip's end record and how far from the end it can start
TAG_LIMIT = 4096  # DeepSpeed's `latest`: a tag name


@dataclass(frozen=True)
class Skipped:
    path: Path
    why: str

    def line(self) -> str:
        return f"{self.path.name} is incomplete ({self.why}): skipped"


def listed(output_dir: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every checkpoint-N folder, oldest first."""
    found = []
    try:
        entries = list(Path(output_dir).iterdir())
    except OSError:
        return []
    for path in entries:
        match = _NAME.match(path.name)
        if match and hostio.is_folder(path):
            found.append((int(match.group(1)), path))
    return sorted(found)


def problem(checkpoint: Path) -> str | None:
    """Why `checkpoint` cannot be resumed from, or None when it is complete."""
    match = _NAME.match(checkpoint.name)
    if not match:
        return "not a checkpoint-N folder"
    state_file = checkpoint / "trainer_state.json"
    if not os.path.lexists(state_file):
        return "no trainer_state.json: the save did not finish"
    if not hostio.is_regular(state_file):
        return "trainer_state.json is not a regular file"
    state = hostio.read_json(state_file, kind=object)
    if state is None:
        return "trainer_state.json is cut off"
    if not isinstance(state, dict) or state.get("global_step") != int(match.group(1)):
        return f"trainer_state.json names step {state.get('global_step') if isinstance(state, dict) else '?'}"
    tag_dir, why = _deepspeed_tag(checkpoint)
    if why:
        return why
    if tag_dir is None:
        if not _has_weights(checkpoint):
            return "no weights (adapter_model / model safetensors)"
        missing = [n for n in ("optimizer.pt", "scheduler.pt") if not hostio.is_regular(checkpoint / n)]
        if missing:
            return f"no {' or '.join(missing)}: the optimizer would restart from zero"
    for folder in (checkpoint, tag_dir):
        if folder is None:
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix in _BINARY and hostio.is_regular(path):
                cut = _cut_short(path)
                if cut:
                    return f"{path.relative_to(checkpoint)} {cut}"
    return None


def newest_complete(output_dir: Path) -> tuple[Path | None, list[Skipped]]:
    """The newest complete checkpoint, and the newer ones skipped (with why), newest first."""
    skipped = []
    for _, path in reversed(listed(output_dir)):
        why = problem(path)
        if why is None:
            return path, skipped
        skipped.append(Skipped(path, why))
    return None, skipped


def set_aside(checkpoint: Path) -> Path | None:
    """Rename an incomplete checkpoint to checkpoint-N.incomplete (kept to look at, never loaded: the Trainer
    only knows checkpoint-N names). Every rank may call this at once: the first rename wins, the others find
    the folder gone and return None."""
    for n in range(1, 100):
        target = checkpoint.with_name(f"{checkpoint.name}.incomplete" + (f"-{n}" if n > 1 else ""))
        try:
            os.rename(checkpoint, target)
            return target
        except FileNotFoundError:
            return None
        except OSError:  # that name is taken by an earlier incomplete save of the same step
            continue
    return None


def _deepspeed_tag(checkpoint: Path) -> tuple[Path | None, str | None]:
    """(DeepSpeed's tag folder, problem) for a DeepSpeed checkpoint; (None, None) for any other."""
    latest = checkpoint / "latest"
    tags = sorted(checkpoint.glob("global_step*"))
    text = hostio.read_text(latest, TAG_LIMIT)
    if text is None:
        return (None, "global_step* without DeepSpeed's `latest`: the save did not finish") if tags else (None, None)
    tag = text.strip()
    folder = checkpoint / tag
    if not tag or "/" in tag or tag in (".", "..") or not hostio.is_folder(folder):
        return None, f"`latest` names {tag or 'nothing'}, which is not there"
    if not list(folder.glob("*model_states.pt")):
        return None, f"{tag}/ holds no model states"
    if not list(folder.glob("*optim_states.pt")):
        return None, f"{tag}/ holds no optimizer states"
    return folder, None


def _has_weights(checkpoint: Path) -> bool:
    if any(hostio.is_regular(checkpoint / name) for name in WEIGHTS):
        return True
    for name in INDEXES:
        index = hostio.read_json(checkpoint / name)
        weight_map = index.get("weight_map") if index else None
        shards = {str(v) for v in weight_map.values()} if isinstance(weight_map, dict) else set()
        if shards and all("/" not in shard and hostio.is_regular(checkpoint / shard) for shard in shards):
            return True
    return False


def _cut_short(path: Path) -> str | None:
    """Why the file is cut short, or None. Reads a header or the zip's end record only (cheap for large files)."""
    fh = hostio.open_regular(path)
    if fh is None:
        return "cannot be read (not a regular file)"
    try:
        with fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(8)
            if path.suffix == ".safetensors":
                if len(head) < 8:
                    return "is empty or cut off"
                (length,) = struct.unpack("<Q", head)
                if length > SAFETENSORS_HEADER_LIMIT:
                    return f"claims a {length}-byte header: not a safetensors file"
                if 8 + length > size:
                    return f"is cut off ({size} bytes, its header alone needs {8 + length})"
                header = json.loads(fh.read(length))
                end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
                if 8 + length + end > size:
                    return f"is cut off ({size} of {8 + length + end} bytes)"
                return None
            if head[:2] == b"PK":  # torch.save's zip format; older pickles are not judged
                # the end of central directory record, written last: in the file's last 22 bytes + its comment
                fh.seek(max(0, size - ZIP_END_SEARCH))
                if ZIP_END not in fh.read(ZIP_END_SEARCH):
                    return "is cut off (no zip directory at its end)"
    except (OSError, ValueError, KeyError, TypeError, IndexError, struct.error):
        return "cannot be read"
    return None if size else "is empty"
