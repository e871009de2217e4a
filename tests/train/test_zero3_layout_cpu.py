"""callbacks/metrics.parameter_storage on the layout DeepSpeed itself makes: a model built under a one-rank
`deepspeed.zero.Init` (ZeRO-3, bf16), as LLaMA-Factory builds one under a ZeRO-3 config. DeepSpeed empties each
parameter's `data` and keeps this rank's shard in `ds_tensor` (runtime/zero/partition_parameters.py): the shard is
what a rank holds and what must be counted. In a process of its own: DeepSpeed's process group and its
os.environ settings stay there. `pytest -m train`: DeepSpeed's CPU communication op is compiled on first use
(TORCH_EXTENSIONS_DIR, shared with the ZeRO trainings of this folder)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, offline_env

pytestmark = pytest.mark.train

LAYOUT = r"""
import json, sys
import torch
import torch.distributed as dist
import deepspeed
from rocmft.callbacks.metrics import parameter_storage

dist.init_process_group("gloo", init_method=f"file://{sys.argv[1]}", rank=0, world_size=1)
config = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}, "bf16": {"enabled": True}}
with deepspeed.zero.Init(config_dict_or_path=config, dtype=torch.bfloat16):
    model = torch.nn.Sequential(torch.nn.Linear(64, 32, bias=False), torch.nn.Linear(32, 8, bias=False))
model[0].requires_grad_(False)  # a frozen base layer and a trainable one, as in LoRA
print(json.dumps({"storage": parameter_storage(model),
                  "data": [p.data.numel() for p in model.parameters()],
                  "shards": [[p.ds_tensor.numel(), str(p.ds_tensor.dtype)] for p in model.parameters()]}))
dist.destroy_process_group()
"""


def test_a_zero3_shard_is_counted_not_its_empty_placeholder(tmp_path):
    env = offline_env(tmp_path, LOCAL_RANK="0", RANK="0", WORLD_SIZE="1")
    proc = subprocess.run([sys.executable, "-c", LAYOUT, str(tmp_path / "rendezvous")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # DeepSpeed's layout: every parameter's data emptied, one rank's shard the whole tensor, in bf16
    assert got["data"] == [0, 0]
    assert got["shards"] == [[64 * 32, "torch.bfloat16"], [32 * 8, "torch.bfloat16"]]
    gib = 1024 ** 3
    assert got["storage"] == {"bfloat16": {"trainable_gib": pytest.approx(32 * 8 * 2 / gib),
                                           "frozen_gib": pytest.approx(64 * 32 * 2 / gib)}}
