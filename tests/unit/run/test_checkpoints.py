"""Complete checkpoints only: what the HF Trainer and DeepSpeed write, and each way a save can be cut short.

The files are written in their real formats (a safetensors header + data, torch.save's zip), so the checks
read what a real checkpoint holds; a real one from a real run is checked by tests/train/test_faults_cpu.py.
"""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import pytest

from rocmft.run import checkpoints


def safetensors(path: Path, n_floats: int = 64) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [n_floats], "data_offsets": [0, 4 * n_floats]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * (4 * n_floats))


def torch_file(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as z:  # torch.save's format: a zip holding data.pkl and the tensors
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        z.writestr("archive/data/0", b"\0" * 4096)


def fake_checkpoint(path: Path, step: int, *, deepspeed: bool = False) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    torch_file(path / "rng_state.pth")
    if deepspeed:
        tag = path / f"global_step{step}"
        tag.mkdir()
        torch_file(tag / "mp_rank_00_model_states.pt")
        for rank in (0, 1):
            torch_file(tag / f"bf16_zero_pp_rank_{rank}_mp_rank_00_optim_states.pt")
        (path / "latest").write_text(tag.name)
    else:
        safetensors(path / "adapter_model.safetensors")
        torch_file(path / "optimizer.pt")
        torch_file(path / "scheduler.pt")
    return path


def cut(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def test_a_complete_lora_and_a_complete_deepspeed_checkpoint(tmp_path):
    assert checkpoints.problem(fake_checkpoint(tmp_path / "checkpoint-6", 6)) is None
    assert checkpoints.problem(fake_checkpoint(tmp_path / "checkpoint-8", 8, deepspeed=True)) is None


@pytest.mark.parametrize("damage, why", [
    (lambda c: (c / "trainer_state.json").unlink(), "no trainer_state.json: the save did not finish"),
    (lambda c: cut(c / "trainer_state.json"), "trainer_state.json is cut off"),
    (lambda c: (c / "trainer_state.json").write_text('{"global_step": 5}'), "trainer_state.json names step 5"),
    (lambda c: cut(c / "adapter_model.safetensors"), "adapter_model.safetensors is cut off (164 of 328 bytes)"),
    (lambda c: cut(c / "adapter_model.safetensors", 0.1), "adapter_model.safetensors is cut off (32 bytes, its header alone needs 72)"),
    (lambda c: (c / "adapter_model.safetensors").write_bytes(b""), "adapter_model.safetensors is empty or cut off"),
    (lambda c: cut(c / "optimizer.pt", 0.9), "optimizer.pt is cut off (no zip directory at its end)"),
    (lambda c: cut(c / "rng_state.pth", 0.9), "rng_state.pth is cut off (no zip directory at its end)"),
    (lambda c: (c / "optimizer.pt").unlink(), "no optimizer.pt: the optimizer would restart from zero"),
    (lambda c: (c / "adapter_model.safetensors").unlink(), "no weights (adapter_model / model safetensors)"),
])
def test_each_way_a_lora_save_is_cut_short(tmp_path, damage, why):
    checkpoint = fake_checkpoint(tmp_path / "checkpoint-6", 6)
    damage(checkpoint)
    assert checkpoints.problem(checkpoint) == why


@pytest.mark.parametrize("damage, why", [
    (lambda c: (c / "latest").unlink(), "global_step* without DeepSpeed's `latest`: the save did not finish"),
    (lambda c: (c / "latest").write_text("global_step9"), "`latest` names global_step9, which is not there"),
    (lambda c: cut(c / "global_step8" / "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt", 0.9),
     "global_step8/bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt is cut off (no zip directory at its end)"),
    (lambda c: [p.unlink() for p in (c / "global_step8").glob("*optim_states.pt")],
     "global_step8/ holds no optimizer states"),
])
def test_each_way_a_deepspeed_save_is_cut_short(tmp_path, damage, why):
    checkpoint = fake_checkpoint(tmp_path / "checkpoint-8", 8, deepspeed=True)
    damage(checkpoint)
    assert checkpoints.problem(checkpoint) == why


def test_sharded_weights_need_every_shard(tmp_path):
    checkpoint = fake_checkpoint(tmp_path / "checkpoint-4", 4)
    (checkpoint / "adapter_model.safetensors").unlink()
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        safetensors(checkpoint / name)
    (checkpoint / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    assert checkpoints.problem(checkpoint) is None
    (checkpoint / "model-00002-of-00002.safetensors").unlink()
    assert checkpoints.problem(checkpoint) == "no weights (adapter_model / model safetensors)"


def test_the_newest_complete_one_wins_by_step_not_by_name(tmp_path):
    for step in (2, 4, 10, 12):
        fake_checkpoint(tmp_path / f"checkpoint-{step}", step)
    cut(tmp_path / "checkpoint-12" / "adapter_model.safetensors")
    (tmp_path / "checkpoint-10" / "trainer_state.json").unlink()
    (tmp_path / "checkpoint-11.incomplete").mkdir()  # set aside earlier: never a checkpoint again
    (tmp_path / "trainer_log.jsonl").write_text("")
    found, skipped = checkpoints.newest_complete(tmp_path)
    assert found == tmp_path / "checkpoint-4"
    assert [s.path.name for s in skipped] == ["checkpoint-12", "checkpoint-10"]
    assert skipped[0].line() == "checkpoint-12 is incomplete (adapter_model.safetensors is cut off (164 of 328 bytes)): skipped"
    assert [step for step, _ in checkpoints.listed(tmp_path)] == [2, 4, 10, 12]
    assert checkpoints.newest_complete(tmp_path / "nothing-here") == (None, [])


def test_set_aside_renames_once_and_keeps_an_earlier_one(tmp_path):
    first = fake_checkpoint(tmp_path / "checkpoint-12", 12)
    assert checkpoints.set_aside(first) == tmp_path / "checkpoint-12.incomplete"
    assert checkpoints.set_aside(first) is None  # another rank got there first
    again = fake_checkpoint(tmp_path / "checkpoint-12", 12)
    assert checkpoints.set_aside(again) == tmp_path / "checkpoint-12.incomplete-2"
    assert checkpoints.listed(tmp_path) == []
