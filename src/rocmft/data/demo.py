"""The demo datasets in data/: small, deterministic, written for this project, one per format.

`python -m rocmft.data.demo [DIR]` rewrites data/demo_{alpaca,messages,sharegpt}.jsonl; a unit test checks
the committed files equal what this module generates, so they never drift.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SYSTEM = "You are a concise assistant for engineers who fine-tune language models on AMD GPUs."

# Facts about ROCm and fine-tuning, written for this project: (question, answer).
FACTS = [
    ("What is ROCm?", "ROCm is AMD's open software stack for GPU computing: drivers, the HIP runtime, compilers and math libraries."),
    ("What is HIP?", "HIP is ROCm's C++ runtime and kernel language; code written for it runs on AMD GPUs and can be ported from CUDA."),
    ("Which PyTorch build runs on AMD GPUs?", "The ROCm build of PyTorch; it keeps the torch.cuda API, so most training code runs unchanged."),
    ("How do I list the AMD GPUs on a node?", "Run rocm-smi or amd-smi; both show each GPU with its memory use and temperature."),
    ("Which variable picks the visible AMD GPUs?", "HIP_VISIBLE_DEVICES, for example HIP_VISIBLE_DEVICES=0,1; CUDA_VISIBLE_DEVICES is honoured too."),
    ("What is LoRA?", "LoRA trains small low-rank matrices added to the frozen weights, so a fine-tune needs far less memory than a full one."),
    ("What does lora_rank control?", "The rank of the adapter matrices: a higher rank adds capacity and memory; 8 to 64 is a common range."),
    ("What is a full fine-tune?", "A fine-tune that updates every weight of the model; it needs much more memory than LoRA."),
    ("What does cutoff_len do?", "It truncates each tokenized example to at most that many tokens before training."),
    ("Why use gradient accumulation?", "It sums gradients over several micro-batches, giving a larger effective batch without more memory."),
    ("What is DeepSpeed ZeRO-3?", "ZeRO stage 3 shards parameters, gradients and optimizer states across GPUs so larger models fit."),
    ("When should I offload to CPU?", "When the model does not fit in GPU memory even with ZeRO-3; it trades speed for memory."),
    ("Why prefer bf16 over fp16?", "bf16 has the range of fp32, so losses rarely overflow to NaN; fp16 needs loss scaling."),
    ("Which AMD GPUs support bf16?", "The Instinct MI200 and MI300 series and the Radeon RX 7000 series support bf16."),
    ("What is a learning rate warmup?", "A short period at the start where the learning rate rises from zero, so early Adam steps do not overshoot."),
    ("What does max_grad_norm do?", "It clips the gradient norm so one bad batch cannot blow up the weights."),
    ("What is an SFT dataset?", "Pairs of prompts and the answers the model should learn to give, used for supervised fine-tuning."),
    ("What is the alpaca format?", "One JSON object per example with instruction, input and output fields."),
    ("What is the sharegpt format?", "One JSON object per conversation with a conversations list of turns, each with from and value."),
    ("What is a chat template?", "The rules that turn a list of messages into the exact token sequence a model was trained on."),
    ("Why does the loss go to NaN?", "Usually a learning rate that is too high, fp16 overflow, or a corrupt batch; lower the rate or use bf16."),
    ("How do I resume a training run?", "Point the trainer at the last checkpoint directory; the optimizer and scheduler state are restored."),
    ("What is an epoch?", "One full pass over the training dataset."),
    ("What is RCCL?", "RCCL is ROCm's collective communication library, the counterpart of NCCL, used for multi-GPU training."),
    ("What does gfx942 mean?", "It is the LLVM target name of the MI300 series GPUs; gfx90a is the MI200 series."),
    ("Why pin library versions?", "So the same recipe gives the same result next month; unpinned upgrades change defaults silently."),
    ("What is a tokenizer?", "The component that splits text into tokens and maps them to ids the model reads."),
    ("How do I save GPU memory during training?", "Use LoRA, gradient checkpointing, a smaller batch with accumulation, or ZeRO sharding."),
    ("What is gradient checkpointing?", "It recomputes activations in the backward pass instead of storing them, trading compute for memory."),
    ("What is a validation split?", "A held-out part of the data used to measure loss on examples the model did not train on."),
]

ADVICE = [
    ("Explain why my run ran out of GPU memory.", "batch size 16, cutoff_len 4096, full fine-tune of an 8B model on one GPU",
     "A full fine-tune of an 8B model needs its weights, gradients and Adam states: far more than one GPU holds. Use LoRA or ZeRO-3 across GPUs, and lower the batch size."),
    ("Suggest a learning rate.", "LoRA on a 7B model",
     "Start at 1e-4; if the loss is flat after a few hundred steps try 2e-4, and lower it if the loss spikes."),
    ("Suggest a learning rate.", "full fine-tune on a 7B model",
     "Start around 1e-5; full fine-tunes move every weight, so they need a rate an order of magnitude below LoRA."),
    ("Pick a precision.", "an MI300X node",
     "Use bf16: the MI300X supports it natively and it avoids the overflow problems of fp16."),
    ("Pick a DeepSpeed stage.", "a 70B model on 8 GPUs with 192 GB each",
     "ZeRO-3 shards the weights across the 8 GPUs; add CPU offload only if it still does not fit."),
    ("Summarize this log line.", "step 120 loss 1.84 grad_norm 0.91 lr 9.8e-05",
     "At step 120 the loss is 1.84 with a healthy gradient norm under 1 and a learning rate near 1e-4."),
    ("Is this loss curve healthy?", "2.9, 2.4, 2.1, 1.9, 1.8, 1.75",
     "Yes: it falls quickly and then flattens, which is what a working fine-tune looks like."),
    ("Is this loss curve healthy?", "2.1, 2.0, 5.7, nan",
     "No: the jump and the NaN mean the run diverged. Lower the learning rate, clip gradients and prefer bf16."),
]

UNITS = ["GPU", "node", "worker", "process", "container", "rank"]


def _arithmetic(n: int) -> list[tuple[str, str]]:
    """n deterministic arithmetic questions with their worked answers."""
    rows = []
    for i in range(n):
        a, b = 3 + (i * 7) % 41, 2 + (i * 11) % 23
        unit = UNITS[i % len(UNITS)]
        kind = i % 4
        if kind == 0:
            rows.append((f"What is {a} + {b}?", f"{a} + {b} = {a + b}."))
        elif kind == 1:
            rows.append((f"What is {a} * {b}?", f"{a} * {b} = {a * b}."))
        elif kind == 2:
            hi, lo = max(a, b), min(a, b)
            rows.append((f"What is {hi} - {lo}?", f"{hi} - {lo} = {hi - lo}."))
        else:
            rows.append((f"A job uses {a} {unit}s and each needs {b} GB. How many GB in total?",
                         f"{a} {unit}s * {b} GB = {a * b} GB."))
    return rows


def alpaca_rows() -> list[dict]:
    rows: list[dict] = []
    for i, (q, a) in enumerate(FACTS):
        row = {"instruction": q, "input": "", "output": a}
        if i % 5 == 0:
            row["system"] = SYSTEM
        rows.append(row)
    for instruction, context, answer in ADVICE:
        rows.append({"instruction": instruction, "input": context, "output": answer})
    for i, (q, a) in enumerate(_arithmetic(40)):
        row = {"instruction": q, "input": "", "output": a}
        if i % 8 == 3:  # a few with a previous exchange, as alpaca `history`
            prev_q, prev_a = FACTS[i % len(FACTS)]
            row["history"] = [[prev_q, prev_a]]
        rows.append(row)
    return rows


def _conversations() -> list[list[tuple[str, str]]]:
    """Role/content turn lists (roles: system, user, assistant), shared by the two chat formats."""
    convs: list[list[tuple[str, str]]] = []
    arith = _arithmetic(30)
    for i, (q, a) in enumerate(FACTS):
        turns: list[tuple[str, str]] = []
        if i % 3 == 0:
            turns.append(("system", SYSTEM))
        turns += [("user", q), ("assistant", a)]
        if i % 4 == 1:  # a follow-up turn
            fq, fa = arith[i % len(arith)]
            turns += [("user", fq), ("assistant", fa)]
        convs.append(turns)
    for instruction, context, answer in ADVICE:
        convs.append([("user", f"{instruction}\n{context}"), ("assistant", answer)])
    for i, (q, a) in enumerate(arith):
        turns = [("system", SYSTEM)] if i % 6 == 0 else []
        convs.append(turns + [("user", q), ("assistant", a)])
    return convs


def messages_rows() -> list[dict]:
    return [{"messages": [{"role": r, "content": c} for r, c in conv]} for conv in _conversations()]


SHAREGPT_ROLE = {"system": "system", "user": "human", "assistant": "gpt"}


def sharegpt_rows() -> list[dict]:
    rows = []
    for conv in _conversations():
        # sharegpt keeps the system prompt as a first turn or as a `system` column; show both.
        if conv[0][0] == "system" and len(conv) % 2 == 1 and len(rows) % 2 == 0:
            rows.append({"conversations": [{"from": "human" if r == "user" else "gpt", "value": c} for r, c in conv[1:]],
                         "system": conv[0][1]})
        else:
            rows.append({"conversations": [{"from": SHAREGPT_ROLE[r], "value": c} for r, c in conv]})
    return rows


FILES = {
    "demo_alpaca.jsonl": alpaca_rows,
    "demo_messages.jsonl": messages_rows,
    "demo_sharegpt.jsonl": sharegpt_rows,
}


def render(make_rows) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in make_rows())


def write(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make_rows in FILES.items():
        path = folder / name
        path.write_text(render(make_rows), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("data")
    for p in write(target):
        print(p)
