"""The shell line a config ran with, read as data (nothing runs): environment, process counts, config file,
LLaMA-Factory arguments, and the posts' habits said as problems."""

from __future__ import annotations

from rocmft.importer import command


def test_exports_assignments_comments_and_continued_lines():
    launch = command.parse("export A=1 B='two words'  # why\n"
                           "C=3 FORCE_TORCHRUN=1 NPROC_PER_NODE=4 NNODES=2 llamafactory-cli train x.yaml \\\n"
                           "    learning_rate=5e-5 dataset=a,b; echo done")
    assert launch.env == {"A": "1", "B": "two words", "C": "3", "FORCE_TORCHRUN": "1", "NPROC_PER_NODE": "4", "NNODES": "2"}
    assert (launch.nproc_per_node, launch.nnodes, launch.config_file) == (4, 2, "x.yaml")
    assert launch.lf_args == {"learning_rate": 5e-5, "dataset": "a,b"}
    assert launch.problems == [] and launch.ignored == ["echo done"] and launch.said == []


def test_flags_as_hfargumentparser_takes_them():
    launch = command.parse("lmf train --stage sft --do_train --lora_target q_proj,v_proj --learning_rate=1e-4 "
                           "--bf16 --per-device-train-batch-size 2 --plot_loss")
    assert launch.lf_args == {"stage": "sft", "do_train": True, "lora_target": "q_proj,v_proj", "learning_rate": 1e-4,
                              "bf16": True, "per_device_train_batch_size": 2, "plot_loss": True}


def test_torchrun_counts_and_the_posts_script():
    launch = command.parse("torchrun --nnodes=2 --nproc_per_node 8 --master_port 29500 src/train.py --config_file t.yaml")
    assert (launch.nproc_per_node, launch.nnodes, launch.config_file) == (8, 2, "t.yaml")
    [problem] = launch.problems
    assert problem.key == "src/train.py" and "not LLaMA-Factory's interface" in problem.message
    assert "llamafactory-cli train x.yaml" in problem.suggestion
    elastic = command.parse("python -m torch.distributed.run --nproc-per-node=4 --nnodes 1:4 launcher.py t.yaml")
    assert (elastic.nproc_per_node, elastic.nnodes, elastic.config_file, elastic.problems) == (4, 4, "t.yaml", [])


def test_llama_cpp_binary_and_commands_that_do_not_train():
    launch = command.parse("llama-cli train --stage sft --gpu_ids 0")
    assert launch.problems[0].key == "llama-cli" and "llama.cpp" in launch.problems[0].message
    assert launch.lf_args == {"stage": "sft", "gpu_ids": 0}
    chat = command.parse("llamafactory-cli chat x.yaml")
    assert chat.problems[0].severity == "warning" and "does not train" in chat.problems[0].message


def test_device_lists_and_an_unclosed_quote():
    assert command.parse("CUDA_VISIBLE_DEVICES=0,1 lmf train x.yaml").env == {"CUDA_VISIBLE_DEVICES": "0,1"}
    broken = command.parse("lmf train 'x.yaml")
    assert broken.problems[0].message.startswith("not a shell line")
    assert command.parse("NPROC_PER_NODE=eight lmf train x.yaml").problems[0].key == "NPROC_PER_NODE"
