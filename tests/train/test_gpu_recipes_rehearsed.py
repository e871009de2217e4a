"""Every shipped GPU recipe rehearsed for real on CPU (`pytest -m train`), in one process, with the tiny model.

Each recipe is rendered as `make train` renders it (rocmft.recipe.rules included), then:
1. its train.yaml goes through LLaMA-Factory's own argument parser (`get_train_args`) with THE ARCH IMAGE'S
   package set: an optional package (liger-kernel, bitsandbytes, ...) is judged by what the arch table says the
   image installs (`image_packages` below), so a package the image lacks fails exactly as in the container
   (LLaMA-Factory's `check_version` -> PackageNotFoundError), and one it has passes, at the image's version;
   its DeepSpeed JSON goes through DeepSpeed's own config model (rocmft.validate.deepspeed);
2. LLaMA-Factory's dataset processing with the recipe's packing and cutoff;
3. LLaMA-Factory's collator with THE ARCH'S attention implementation (flash_attention_2 on gfx942, sdpa on
   gfx1100: a plain argument, the GPU branch of the data path runs on CPU) on both the train and the eval
   micro-batch, each of the rendered size;
4. one optimizer step and one evaluation through LLaMA-Factory's own workflow (`run_exp`).

Swapped, and only because the hardware forces it (each named where it is done):
  - the model: a tiny model of the recipe's family (models/tiny-llama for Llama/Qwen2.5/Mistral: its tokenizer
    carries the llama3 and qwen special tokens; models/tiny-<family> for Qwen3, Qwen3-MoE, gpt-oss and Gemma 3, built
    by scripts/make_tiny_model.py --family with experts, sliding layers and Gemma 3's vision tower and processor),
    each tokenizer carrying its template's tokens so the recipe's template is kept, for a model a CPU cannot hold;
  - precision: bf16/fp16 off (bf16 on CPU needs use_cpu and is slow);
  - DeepSpeed for step 4: ZeRO needs torch.distributed ranks and JIT-compiles its CPU comm op (~150 s); the JSON
    is judged by DeepSpeed's config model in step 1 instead;
  - step 4 only: the model's attention is SDPA (flash-attn is a GPU kernel) and Liger is off (Triton kernels
    need a GPU); steps 1-3 keep the arch's;
  - step 4 only: max_steps 1, no checkpoint, preprocessing on 1 worker (2 cores);
  - the data: 16 rows of the recipe's dataset (max_samples), packed as the recipe packs them; the pt recipe's
    placeholder (too short for one block, its own comment says so) becomes its rows repeated into a corpus;
  - the eval micro-batch of step 3 repeats the demo eval set's packed rows up to the rendered batch size (a real
    eval set packs into that many rows; the demo's few held-out rows pack into one).
What only a GPU can show (docs/gpu.md): the kernels themselves (flash-attn CK/Triton, Liger, RCCL), memory, speed.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from rocmft.hardware import arches
from rocmft.recipe import recipes, render, rules
from rocmft.validate import packages
from tests.conftest import ROOT, offline_env

pytestmark = pytest.mark.train


@pytest.fixture(autouse=True)
def _environ_as_found():
    """LLaMA-Factory's argument parser, run here in-process as the container runs it, sets WANDB_PROJECT in its
    process (hparams/parser.py): put the environment back, so the next test starts from the same one."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


GPU_RECIPES = ("llama3-8b-z3", "llama3-8b-lora", "llama3-8b-full-z3", "qwen2.5-7b-lora-7900xtx",
               "qwen2.5-7b-z3-offload", "llama3-8b-dpo-z3", "qwen2.5-7b-dpo-7900xtx", "llama3-8b-pt-z3",
               "qwen3-8b-lora", "qwen3-30b-a3b-lora-z3", "gpt-oss-20b-lora", "gemma3-12b-qlora-7900xtx",
               "qwen3-4b-lora-strixhalo")
# LLaMA-Factory 0.9.5 model/model_utils/attention.py: what `flash_attn` becomes in the model's config.
ATTENTION = {"fa2": "flash_attention_2", "sdpa": "sdpa", "eager": "eager", "disabled": "eager"}
# The recipe's model family (the planner's reading of it) -> the tiny model of that family that stands in for it
# (scripts/make_tiny_model.py --family); every other family: the tiny Llama.
FAMILY = {"qwen3": "qwen3", "qwen3_moe": "qwen3_moe", "gpt_oss": "gpt_oss", "gemma3_text": "gemma3"}
# The `stage` get_dataset is called with by LLaMA-Factory's own workflows (train/*/workflow.py).
DATA_STAGE = {"sft": "sft", "pt": "pt", "dpo": "rm", "rm": "rm", "kto": "kto"}


def image_packages(arch: str) -> Mapping[str, str]:
    """The optional packages the arch's image installs, pip name -> version: the arch table's, as the build reads it."""
    return arches.get(arch).image_packages


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-")


def optional_packages() -> set[str]:
    """Packages an image may or may not carry: judged by the image's set, not this venv's."""
    names = set(packages.PACKAGE_KEYS)
    for arch in arches.table().values():
        names |= set(arch.image_packages)
    return {_canonical(n) for n in names}


@contextlib.contextmanager
def arch_image_package_set(lf_parser, arch: str):
    """LLaMA-Factory's `check_version`, answered for an optional package from the arch image's package set:
    absent -> the PackageNotFoundError transformers' require_version raises; present -> its requirement checked
    against the image's version. Every other package: LLaMA-Factory's own check on this venv."""
    from packaging.requirements import Requirement

    original, have = lf_parser.check_version, {_canonical(k): v for k, v in image_packages(arch).items()}
    optional = optional_packages()

    def check_version(requirement: str, mandatory: bool = False) -> None:
        name = _canonical(packages.name(requirement))
        if name not in optional:
            return original(requirement, mandatory)
        if name not in have:
            raise importlib.metadata.PackageNotFoundError(
                f"The '{requirement}' distribution was not found and is required by this application. "
                f"To fix: run `pip install {requirement}`. (the {arch} image)")
        spec = Requirement(requirement.replace(" ", "")).specifier
        if spec and not spec.contains(have[name], prereleases=True):
            raise ImportError(f"{requirement} is required for a normal functioning of this module, but found "
                              f"{name}=={have[name]}. (the {arch} image)")

    lf_parser.check_version = check_version
    try:
        yield
    finally:
        lf_parser.check_version = original


@pytest.fixture(scope="module")
def stack(tmp_path_factory, tiny_model):
    """LLaMA-Factory imported once for every recipe, in an offline environment restored afterwards, with the
    worker's gpt-oss shim (rocmft.worker.gpt_oss_eager: the job applies it before run_exp)."""
    env = offline_env(tmp_path_factory.mktemp("rehearsal"), LLAMAFACTORY_VERBOSITY="WARN", DISABLE_VERSION_CHECK="0")
    with pytest.MonkeyPatch.context() as patch:
        for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HOME", "MPLCONFIGDIR", "LLAMAFACTORY_VERBOSITY"):
            patch.setenv(key, env[key])
        patch.chdir(ROOT)  # dataset_dir and the rendered paths are relative to the project root
        from llamafactory.hparams import parser as lf_parser
        from llamafactory.model import patcher

        from rocmft.worker import gpt_oss_eager

        patch.setattr(patcher, "configure_attn_implementation", gpt_oss_eager(patcher.configure_attn_implementation))
        yield lf_parser, tiny_model


def family_model(name: str, tiny_llama: Path) -> Path:
    """The tiny model of the recipe's family, built in this process the first time (the builder's imports are paid
    already: one build takes a second here, ~30 s as a fresh process)."""
    from rocmft.plan import models

    recipe = recipes.load(name)
    family = FAMILY.get(models.resolve(str(recipe.llamafactory["model_name_or_path"])).model_type)
    if family is None:
        return tiny_llama
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_tiny_model", ROOT / "scripts" / "make_tiny_model.py")
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    out = ROOT / "models" / f"tiny-{family}"
    if not builder.current(out, 0, family=family):
        with builder.output_to(out / "build.log"):
            builder.build_family(out, family)
    return out


def corpus_dir(tmp_path: Path, block: int) -> Path:
    """The pt recipe's demo_text is a placeholder that cannot fill one block (its own comment: "Bring a
    corpus"): a corpus of its rows repeated, enough for a train and an eval block of `block` tokens."""
    text = (ROOT / "data" / "demo_text.jsonl").read_text().splitlines()
    folder = tmp_path / "corpus"
    folder.mkdir()
    rows = text * max(1, (20 * block) // sum(len(line.split()) for line in text))  # eval: 5% of rows, one block
    (folder / "corpus.jsonl").write_text("\n".join(rows) + "\n")
    (folder / "dataset_info.json").write_text(json.dumps(
        {"rehearsal_corpus": {"file_name": "corpus.jsonl", "columns": {"prompt": "text"}}}))
    return folder


def rendered_for_cpu(name: str, model: Path, tmp_path: Path | None = None) -> tuple[recipes.Recipe, render.Rendered, dict]:
    recipe = recipes.load(name)
    out = render.render(recipe, "runs/rehearsal")
    args = dict(out.args)
    args["model_name_or_path"] = str(model)  # swap: the tiny model, same template
    args["bf16"] = args["fp16"] = False       # swap: precision (CPU)
    args.pop("deepspeed", None)               # swap: no ZeRO engine in one CPU process (its JSON: DeepSpeed's model)
    if args.get("dataset") == "demo_text" and tmp_path is not None:  # swap: a corpus for the placeholder (above)
        args.update(dataset="rehearsal_corpus", dataset_dir=str(corpus_dir(tmp_path, int(args["cutoff_len"]))))
    else:
        args["max_samples"] = 16  # swap: a few rows (2 CPU cores), packed as the recipe packs them
    return recipe, out, args


def parse_for_arch(lf_parser, arch: str, args: dict):
    with arch_image_package_set(lf_parser, arch):
        return lf_parser.get_train_args(dict(args))


def micro_batch(dataset, size: int) -> list[dict]:
    rows = [dataset[i % len(dataset)] for i in range(size)]
    return rows


@pytest.mark.parametrize("name", GPU_RECIPES)
def test_gpu_recipe_rehearsed_on_cpu(stack, name, tmp_path):
    lf_parser, tiny_llama = stack
    model = family_model(name, tiny_llama)  # swap: a tiny model of the recipe's own family
    recipe, out, args = rendered_for_cpu(name, model, tmp_path)
    arch = arches.get(recipe.arch)
    args["output_dir"] = str(tmp_path / "output")

    # 1. LLaMA-Factory's parser with the arch image's package set; DeepSpeed's config model on the JSON
    model_args, data_args, training_args, finetuning_args, _ = parse_for_arch(lf_parser, arch.name, args)
    assert model_args.enable_liger_kernel == bool(out.args.get("enable_liger_kernel"))
    if out.ds_config is not None:
        from rocmft.validate import deepspeed as ds_check
        from rocmft.validate.llamafactory import _hf_values

        problems = ds_check.check(json.loads(out.ds_config), "ds_config.json", _hf_values(out.args), recipe.world_size)
        assert not [p for p in problems if p.severity == "error"], [p.line() for p in problems]

    # 2. the dataset as LLaMA-Factory processes it, with the recipe's packing
    from llamafactory.data import (
        SFTDataCollatorWith4DAttentionMask,
        get_dataset,
        get_template_and_fix_tokenizer,
    )
    from llamafactory.model import load_tokenizer

    data_args.preprocessing_num_workers = 1  # swap: 2 cores
    tokenizer_module = load_tokenizer(model_args)
    template = get_template_and_fix_tokenizer(tokenizer_module["tokenizer"], data_args)
    dataset_module = get_dataset(template, model_args, data_args, training_args,
                                 stage=DATA_STAGE[finetuning_args.stage], **tokenizer_module)
    train_set = dataset_module["train_dataset"]
    assert len(train_set) > 0

    # 3. the collator with the arch's attention, on the train and the eval micro-batch of the rendered sizes
    if finetuning_args.stage == "sft":
        import torch

        dtype = torch.bfloat16 if out.args.get("bf16") else torch.float32  # the arch's compute dtype (the 4D mask's)
        collator = SFTDataCollatorWith4DAttentionMask(
            template=template, model=None, pad_to_multiple_of=8, label_pad_token_id=-100,
            block_diag_attn=model_args.block_diag_attn, attn_implementation=ATTENTION[out.args["flash_attn"]],
            compute_dtype=dtype, neat_packing=bool(data_args.neat_packing), **tokenizer_module)
        train_batch = collator(micro_batch(train_set, training_args.per_device_train_batch_size))
        assert train_batch["input_ids"].shape[0] == training_args.per_device_train_batch_size
        eval_set = dataset_module.get("eval_dataset")
        if eval_set is not None and len(eval_set):
            eval_batch = collator(micro_batch(eval_set, training_args.per_device_eval_batch_size))
            assert eval_batch["input_ids"].shape[0] == training_args.per_device_eval_batch_size

    # 4. one optimizer step and one evaluation, through LLaMA-Factory's own workflow
    from llamafactory.train.tuner import run_exp

    cpu = dict(args, enable_liger_kernel=False, flash_attn="sdpa",  # swap: no Triton/flash-attn on CPU
               max_steps=1, save_strategy="no", preprocessing_num_workers=1, dataloader_num_workers=0,
               logging_steps=1, plot_loss=False)
    run_exp(cpu)
    log = [json.loads(line) for line in (tmp_path / "output" / "trainer_log.jsonl").read_text().splitlines()]
    assert any(entry.get("current_steps") == 1 and "loss" in entry for entry in log), log
    results = json.loads((tmp_path / "output" / "all_results.json").read_text())
    if args.get("val_size"):
        assert "eval_loss" in results, results


def test_a_package_the_arch_image_lacks_fails_as_in_the_container(stack, monkeypatch):
    """liger-kernel asked of an image without it: LLaMA-Factory's own check raises PackageNotFoundError, as
    `make train` did on every rank before the images installed Liger (issue 31, run-breaker 1)."""
    lf_parser, model = stack
    _, _, args = rendered_for_cpu("llama3-8b-lora", model)
    lacking = {k: v for k, v in image_packages("gfx942").items() if _canonical(k) != "liger-kernel"}
    monkeypatch.setattr(f"{__name__}.image_packages", lambda arch: lacking)
    with pytest.raises(importlib.metadata.PackageNotFoundError, match="liger-kernel"):
        parse_for_arch(lf_parser, "gfx942", args)


def test_the_eval_micro_batch_of_the_old_base_fails_the_fa2_collator(stack):
    """What main rendered for every gfx942 SFT recipe (eval batch 4 under neat packing + fa2) stops in
    LLaMA-Factory's collator on CPU too: the rehearsal above would have caught run-breaker 2."""
    from llamafactory.data import (
        SFTDataCollatorWith4DAttentionMask,
        get_dataset,
        get_template_and_fix_tokenizer,
    )
    from llamafactory.model import load_tokenizer

    lf_parser, model = stack
    _, _, args = rendered_for_cpu("llama3-8b-lora", model)
    args["output_dir"] = "/nonexistent-never-written"
    model_args, data_args, training_args, _, _ = parse_for_arch(lf_parser, "gfx942", args)
    data_args.preprocessing_num_workers = 1
    tokenizer_module = load_tokenizer(model_args)
    template = get_template_and_fix_tokenizer(tokenizer_module["tokenizer"], data_args)
    eval_set = get_dataset(template, model_args, data_args, training_args, stage="sft", **tokenizer_module)["eval_dataset"]
    collator = SFTDataCollatorWith4DAttentionMask(template=template, model=None, pad_to_multiple_of=8,
                                                  label_pad_token_id=-100, attn_implementation="flash_attention_2",
                                                  neat_packing=True, **tokenizer_module)
    with pytest.raises(AssertionError, match="bsz should be 1 for neat packing"):
        collator(micro_batch(eval_set, 4))
    assert rules.HF_EVAL_BATCH != 1  # an unset eval batch is HF's 8: the rule renders 1 for it too
