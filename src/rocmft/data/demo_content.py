"""The text of the demo datasets, written for this project: facts, advice and arithmetic, with better and worse
answers. rocmft.data.demo turns it into one demo file per format and kind."""

from __future__ import annotations

SYSTEM = "You are a concise assistant for engineers who fine-tune language models on AMD GPUs."

# What `make demo` teaches the tiny model: one fixed answer to a handful of ways of asking who it is, so
# that the trained model's answer differs visibly from the base model's random tokens (issue 23).
IDENTITY_ANSWER = "I am the rocmft demo model, fine-tuned with LoRA on your CPU."
IDENTITY_QUESTIONS = ["Who are you?", "What are you?", "What is your name?", "Introduce yourself.",
                      "Tell me who you are.", "Which model are you?"]
DEMO_QUESTION = IDENTITY_QUESTIONS[0]  # the one `make demo` asks the base and the trained model

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


def arithmetic_pairs(n: int) -> list[tuple[str, str, str]]:
    """n deterministic arithmetic questions with a worked answer and a wrong one (a result off by 1 to 3)."""
    rows = []
    for i in range(n):
        a, b = 3 + (i * 7) % 41, 2 + (i * 11) % 23
        unit = UNITS[i % len(UNITS)]
        kind = i % 4
        suffix = "."
        if kind == 0:
            question, shown, result = f"What is {a} + {b}?", f"{a} + {b} = ", a + b
        elif kind == 1:
            question, shown, result = f"What is {a} * {b}?", f"{a} * {b} = ", a * b
        elif kind == 2:
            hi, lo = max(a, b), min(a, b)
            question, shown, result = f"What is {hi} - {lo}?", f"{hi} - {lo} = ", hi - lo
        else:
            question = f"A job uses {a} {unit}s and each needs {b} GB. How many GB in total?"
            shown, result, suffix = f"{a} {unit}s * {b} GB = ", a * b, " GB."
        rows.append((question, f"{shown}{result}{suffix}", f"{shown}{result + 1 + i % 3}{suffix}"))
    return rows


def arithmetic(n: int) -> list[tuple[str, str]]:
    """n deterministic arithmetic questions with their worked answers."""
    return [(question, right) for question, right, _ in arithmetic_pairs(n)]


# The worse answers of the preference and KTO demos: evasive for the facts, wrong for the advice (one per
# ADVICE row, in order). Each differs plainly from the better answer, so a preference is there to learn.
EVASIVE = ["I don't know.", "That depends; look it up yourself.", "I would rather not say.", "Ask someone else."]
ADVICE_WORSE = [
    "Buy a bigger GPU; nothing else helps.",
    "Use 1e-1: a higher learning rate always learns faster.",
    "Use the same 2e-4 as LoRA; the method does not matter.",
    "Use fp16 everywhere: it never overflows.",
    "Use ZeRO-0 and offload everything to the CPU.",
    "The run has failed.",
    "No: a healthy loss goes up.",
    "Yes: a NaN loss means it has converged.",
]
