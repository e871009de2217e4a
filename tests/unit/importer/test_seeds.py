"""The two posts' configurations (seeds/, written out from /work/shared/seeds) import with every mistake
ERRATA.md lists that concerns the config reported, and what the recipe does about each."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmft import importer
from rocmft.recipe import recipes
from tests.unit.importer.conftest import SEEDS, make_project

LORA = SEEDS / "rocm-lora-low-cost"
ZERO3 = SEEDS / "rocm-deepspeed-zero3"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Both posts imported into one project: {name: (report, recipe, text of the report)}."""
    tmp = tmp_path_factory.mktemp("seeds")
    root = make_project(tmp / "project")
    fixed = tmp / "meant"  # the ZeRO-3 post with the model id it meant (Meta's repo is Meta-Llama-3-8B-Instruct)
    fixed.mkdir()
    (fixed / "train_lora_rocm.yaml").write_text((ZERO3 / "train_lora_rocm.yaml").read_text().replace(
        "meta-llama/Llama-3-8B-Instruct", "meta-llama/Meta-Llama-3-8B-Instruct"))
    (fixed / "ds_z3_config.json").write_text((ZERO3 / "ds_z3_config.json").read_text())
    cases = {
        "seed-lora": importer.Request(str(LORA / "lora_rocm.yaml"), "seed-lora", arch="gfx1100",
                                      cmd=(LORA / "launch.sh").read_text()),
        "seed-z3": importer.Request(str(ZERO3 / "train_lora_rocm.yaml"), "seed-z3", cmd=(ZERO3 / "launch.sh").read_text()),
        "seed-z3-meant": importer.Request(str(fixed / "train_lora_rocm.yaml"), "seed-z3-meant",
                                          cmd=(ZERO3 / "launch.sh").read_text()),
    }
    out = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROCMFT_ROOT", str(root))
        for name, request in cases.items():
            report = importer.run(request)
            out[name] = (report, recipes.load(name), report.text())
    return out


def lines_with(text: str, *words: str) -> list[str]:
    return [line for line in text.splitlines() if all(w in line for w in words)]


def test_lora_post_every_config_mistake_reported(imported):
    report, recipe, text = imported["seed-lora"]
    # `llama-cli train ...` is llama.cpp's binary
    assert lines_with(text, "error: CMD: llama-cli:", "llama.cpp", "llamafactory-cli")
    # `--gpu_ids 0` is no LLaMA-Factory argument: the GPUs become GPUS=, the count gpus_per_node
    assert lines_with(text, "error:", "lora_rocm.yaml: gpu_ids: unknown to LLaMA-Factory")
    assert lines_with(text, "gpu_ids: 0 (not a LLaMA-Factory argument")
    assert lines_with(text, "GPUS=0 on `make train`") and report.command == "make train RECIPE=seed-lora GPUS=0"
    assert recipe.gpus_per_node == 1
    # `infer_backend: pt` is no valid value, and an inference setting
    assert lines_with(text, "error:", "infer_backend: `pt` is not a valid choice", "huggingface, vllm, sglang")
    assert lines_with(text, "infer_backend: pt (an inference setting, irrelevant to training")
    # `torch_dtype` does not pick training precision; bf16 (the command's --bf16) does
    assert lines_with(text, "error:", "torch_dtype: unknown to LLaMA-Factory", "bf16/fp16")
    assert lines_with(text, "torch_dtype: float16 (not a LLaMA-Factory training argument", "here bf16: true")
    assert recipe.precision == "auto" and lines_with(text, "bf16: true -> precision: auto", "gfx1100 has bf16")
    # PYTORCH_HIP_ALLOC_CONF=malloc_async:true is no allocator option PyTorch documents
    assert lines_with(text, "PYTORCH_HIP_ALLOC_CONF=malloc_async:true (malloc_async is not an allocator option",
                      "backend:cudaMallocAsync")
    assert "PYTORCH_HIP_ALLOC_CONF" not in recipe.env
    # `--overwrite_cache` is harmless: carried; the output_dir is rocmft's (a new run dir, never overwritten)
    assert recipe.llamafactory["overwrite_cache"] is True
    assert lines_with(text, "output_dir: ./saves/qwen25-lora-rocm (every run writes to its own runs/<name>/output")
    # none of it reaches the recipe
    for key in ("gpu_ids", "infer_backend", "torch_dtype", "output_dir", "ddp_backend", "bf16"):
        assert key not in recipe.llamafactory, key
    # "7B LoRA under 20 GB on a 7900 XTX": a claim the planner weighs for the card
    assert lines_with(text, "memory:", "of 24 GiB per GPU")


def test_zero3_post_every_config_mistake_reported(imported):
    _, recipe, text = imported["seed-z3"]
    # the misspelt stage3_parition_grads, which no DeepSpeed knows
    assert lines_with(text, "error:", "ds_z3_config.json: zero_optimization.stage3_parition_grads: unknown DeepSpeed key")
    assert lines_with(text, "zero_optimization.stage3_parition_grads: (value not shown) -> (not set) in preset zero3-offload",
                      "unknown DeepSpeed key")
    # `torchrun ... src/train.py --config_file x.yaml` is not LLaMA-Factory's interface
    assert lines_with(text, "error: CMD: src/train.py:", "llamafactory-cli train x.yaml", "FORCE_TORCHRUN=1 NPROC_PER_NODE=8")
    # HSA_OVERRIDE_GFX_VERSION=9.4.2 on gfx942: needless
    assert lines_with(text, "HSA_OVERRIDE_GFX_VERSION=9.4.2 (gfx942 needs no override", "RDNA cards")
    # NCCL_DEBUG=INFO is for debugging, not every run
    assert lines_with(text, "NCCL_DEBUG=INFO (for debugging, not for every run")
    assert lines_with(text, "NCCL_DEBUG=INFO for one run you debug", 'SET="env.NCCL_DEBUG=INFO"')
    assert recipe.env == {}
    # what the script meant is kept: gfx942 (its PYTORCH_ROCM_ARCH), 8 processes, the offload preset, bf16
    assert (recipe.arch, recipe.gpus_per_node, recipe.deepspeed, recipe.precision) == ("gfx942", 8, "zero3-offload", "auto")
    assert lines_with(text, "arch: gfx942 (from PYTORCH_ROCM_ARCH in CMD")
    # its model id is not Meta's (meta-llama/Meta-Llama-3-8B-Instruct): the planner says so instead of guessing
    assert lines_with(text, "model `meta-llama/Llama-3-8B-Instruct` is not a local dir")


def test_zero3_post_cpu_offload_on_a_card_that_does_not_need_it(imported):
    """With the model id the post meant, the planner's note: 8B LoRA states on 192 GB cards need no offload."""
    _, recipe, text = imported["seed-z3-meant"]
    assert recipe.deepspeed == "zero3-offload"
    note = lines_with(text, "note: CPU offload is not needed on MI300X", 'SET="deepspeed=zero3"')
    assert note and "GiB spare per GPU" in note[0] and "host RAM" in note[0]


def test_the_recipes_name_their_source_and_keep_llamafactorys_defaults(imported):
    _, recipe, _ = imported["seed-z3"]
    text = Path(recipe.path).read_text()
    assert text.startswith(f"# Imported from {ZERO3 / 'train_lora_rocm.yaml'} + CMD: Llama-3-8B-Instruct lora sft on 8x gfx942")
    assert recipe.chain[0].endswith("_base/sft.yaml") and recipe.chain[1].endswith("_base/lora.yaml")
    # the post set no LoRA rank: LLaMA-Factory's default (8) as before, not the base's 16
    assert "lora_rank" not in recipe.llamafactory and "  lora_rank: null" in text
    assert recipe.llamafactory["learning_rate"] == 1e-4 and recipe.llamafactory["warmup_steps"] == 0.1 and "warmup_ratio" not in recipe.llamafactory
