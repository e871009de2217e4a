"""What the forward pass keeps for backward: per-layer activations, LoRA adapter inputs, logits (GiB).

Counted per token and per decoder layer, the way autograd saves tensors in transformers' LlamaDecoderLayer
(LlamaRMSNorm upcasts to fp32; SwiGLU MLP; fused attention), like Korthikanti et al. 2022 ("Reducing
Activation Recomputation in Large Transformer Models", sec. 4.1) count a GPT layer. Two rules of autograd
decide most of it: a linear layer or a norm keeps its input only when its weight needs a gradient (a frozen
weight saves nothing for a weight gradient), and a cast or an add keeps nothing.

LoRA (peft/tuners/lora/layer.py, Linear.forward: `lora_B(lora_A(dropout(x))) * scaling`, after
`_cast_input_dtype(x, lora_A.weight.dtype)`) depends on the device, and the plan says which it used:
- GPU (CUDA/HIP): dropout is fused (aten native_dropout) and keeps a 1-byte mask; lora_A keeps the dropout
  output, which under autocast with fp32 adapters (LLaMA-Factory upcasts trainable parameters unless
  DeepSpeed or pure_bf16) is a 16-bit copy made by autocast: 1 + 2 bytes per adapter input element;
- CPU: dropout is not fused (aten _dropout_impl: `input * noise`) and keeps the noise tensor in the adapter's
  dtype (fp32 when upcast) on top of that copy: 4 + 2 bytes per element;
- without dropout each adapter still keeps its own 16-bit copy when upcast (2 bytes), or, with 16-bit
  adapters, the very tensor its base layer received (counted once per distinct input).
Checked on CPU by summing the tensors autograd saves (torch.autograd.graph.saved_tensors_hooks) for one
LlamaDecoderLayer (h=512, i=1376, 8/2 heads, bf16) with PEFT LoRA r8 on all linears:
tests/unit/plan/test_plan_calibration.py keeps those measurements and runs the measurement itself.

Liger (enable_liger_kernel, applied by LLaMA-Factory to Llama/Qwen/Mistral/Gemma): its RMSNorm keeps its
16-bit input and rstd (not the fp32 upcast), its SwiGLU keeps gate and up (SiLU recomputed), and its fused
linear cross-entropy never holds the logits (liger_kernel/ops/rms_norm.py, swiglu.py).
"""

from __future__ import annotations

from . import zero3
from .workload import Workload

GIB = float(1 << 30)
LOGITS_BYTES_PER_ENTRY = 12  # measured, see logits_gib
# Model types LLaMA-Factory 0.9.5 applies Liger to (llamafactory/model/model_utils/liger_kernel.py).
LIGER_MODEL_TYPES = ("llama", "qwen2", "qwen3", "qwen3_moe", "qwen3_next", "mistral", "mixtral", "gemma", "gemma2",
                     "gemma3_text", "gpt_oss", "phi3", "granite", "olmo2", "glm", "glm4")


def act_bytes(w: Workload) -> int:
    return 2 if w.precision in ("bf16", "fp16") else 4


def fused_attention(w: Workload) -> bool:
    """fa2/sdpa/auto run a fused (flash or memory-efficient) kernel: no seq x seq score matrix is kept.
    `disabled` is eager attention, which keeps fp32 softmax probabilities and their 16-bit copy."""
    return w.attention not in ("disabled", "eager")


def liger_applies(w: Workload) -> bool:
    return w.liger and (w.model.model_type or "llama") in LIGER_MODEL_TYPES


def upcast_adapters(w: Workload) -> bool:
    """LLaMA-Factory trains LoRA weights in fp32 under autocast (model/adapter.py init_adapter), except with
    pure_bf16 or DeepSpeed, whose engine runs the whole model in 16 bits."""
    return act_bytes(w) == 2 and w.zero_stage is None and not w.pure_bf16


def lora_device(w: Workload) -> str:
    return "GPU" if w.is_gpu else "CPU"


def lora_bytes(w: Workload) -> float:
    """Bytes per token one decoder layer's LoRA adapters keep for backward (see the module docstring)."""
    if w.method != "lora" or not w.lora_targets:
        return 0.0
    a = act_bytes(w)
    inputs = w.model.adapter_inputs(w.lora_targets)
    upcast = upcast_adapters(w)
    copy = 2 if upcast else a  # the tensor lora_A keeps: autocast's 16-bit copy, or the adapter-dtype input
    if w.lora_dropout > 0:
        kept = 1 if w.is_gpu else (4 if upcast else a)  # fused: bool mask; CPU: the noise tensor
        per_input = (kept + copy) * inputs
    elif upcast:
        per_input = copy * inputs
    else:  # 16-bit adapters without dropout keep the base layer's own input: one per distinct tensor
        per_input = a * w.model.distinct_adapter_inputs(w.lora_targets)
    return per_input + copy * w.lora_rank * len(w.lora_targets)  # + each lora_B's rank-sized input


def zero3_linear_bytes(w: Workload) -> float:
    """Bytes per token one decoder layer's frozen base projections keep under DeepSpeed's linear swap
    (zero3.linear_swap: `LinearFunctionForZeroStage3` saves its input whatever the weight needs). One tensor per
    distinct input - q/k/v share theirs, gate/up theirs - unless something keeps it anyway: o_proj's input is the
    attention output (counted with attention), and 16-bit adapters without dropout keep the base input itself
    (lora_bytes). Measured on CPU with DeepSpeed's own zero3_linear_wrap in place of F.linear: +2 x (2h + i)
    bytes per token with dropout 0.05, nothing without (tests/unit/plan/test_plan_activations_measured.py)."""
    if w.method != "lora" or not zero3.linear_swap(w):
        return 0.0
    h, i = w.model.hidden_size, w.model.intermediate_size
    adapter_keeps = w.lora_dropout == 0 and not upcast_adapters(w)
    targets = set(w.lora_targets)
    inputs = ((h, {"q_proj", "k_proj", "v_proj"}), (h, {"gate_proj", "up_proj"}), (i, {"down_proj"}))
    return act_bytes(w) * sum(size for size, modules in inputs if not (adapter_keeps and targets & modules))


def layer_activation_bytes(w: Workload) -> float:
    """Bytes one token's pass through one decoder layer keeps for backward (fused attention). a = 2 or 4.

    RMSNorm (x2): its fp32 upcast input (4h; Liger: the 16-bit input, a*h), plus, when its weight trains,
    the normalized tensor the weight multiplies (a*h). Linears whose weights train keep their inputs: the two
    norm outputs (a*h each) and the down_proj input (a*i). Attention: rotated q, k, v and the output, which is
    also o_proj's input (a*(2*q_dim + 2*kv_dim)). SwiGLU: gate, SiLU(gate), up (3*a*i; Liger: gate and up).
    Plus the LoRA adapters' inputs (`lora_bytes`) and, under ZeRO-3's linear swap, the frozen projections' inputs
    (`zero3_linear_bytes`). Full/freeze layers train their weights; LoRA layers do not.
    """
    m = w.model
    a = act_bytes(w)
    h, i = m.hidden_size, m.mlp_width  # MoE: the top-k experts' and the shared expert's width a token runs
    liger = liger_applies(w)
    trains_weights = w.method != "lora"
    norm = a * h if liger else 4 * h
    if trains_weights and not liger:
        norm += a * h
    inputs = (2 * a * h + a * i) if trains_weights else 0
    attention = a * (2 * m.q_dim + 2 * m.kv_dim)
    # SwiGLU keeps gate, SiLU(gate) and up; Liger's replaces dense MLPs (gate and up), not fused experts; gpt-oss's
    # clamped SwiGLU (GptOssExperts._apply_gate: clamp, sigmoid, glu, up + 1) keeps ~5 i per expert token, measured
    # (test_plan_activations_measured.py)
    mlp = (5 if m.model_type == "gpt_oss" else 2 if liger and not m.is_moe else 3) * a * i
    return 2 * norm + inputs + attention + mlp + routing_bytes(w) + lora_bytes(w) + zero3_linear_bytes(w)


def routing_bytes(w: Workload) -> float:
    """A MoE layer's routing, per token on average over the layers: the fp32 router logits and softmax (transformers'
    TopKRouter), each of the top-k expert inputs gathered and each expert output weighted by its router score
    (Qwen3MoeExperts.forward: `hidden_states[token_idx]`, `* top_k_weights`)."""
    e = w.model.experts
    if e is None:
        return 0.0
    a = act_bytes(w)
    per_token = 2 * 4 * e.count + 2 * a * e.top_k * w.model.hidden_size
    return per_token * e.layers / w.model.num_hidden_layers


def saved_layers(w: Workload) -> int:
    """Layers whose activations are kept: all, except below the trainable top layers of freeze tuning."""
    if w.method == "freeze" and w.freeze_layers > 0:
        return min(w.freeze_layers, w.model.num_hidden_layers)
    return w.model.num_hidden_layers


def activations_gib(w: Workload) -> float:
    """Activations of one full-length micro-batch (every sample at cutoff_len: the batch that runs out of memory).

    With gradient checkpointing (transformers checkpoints each decoder layer) only each layer's input is kept
    (a*h per token per layer), plus one layer's recomputed activations and their gradients during backward.
    Without it every layer keeps all of them, plus the backward transients of one layer.
    """
    m = w.model
    a = act_bytes(w)
    tokens = w.tokens_per_micro_batch
    per_layer = tokens * layer_activation_bytes(w)
    if not fused_attention(w):
        per_layer += w.micro_batch * w.sequences_per_sample * m.num_attention_heads * w.cutoff_len ** 2 * (4 + a)
    layers = saved_layers(w)
    if w.gradient_checkpointing:
        total = layers * tokens * a * m.hidden_size + 2 * per_layer
    else:
        total = layers * per_layer + per_layer
    total += tokens * (a * m.hidden_size + 4 * m.hidden_size)  # embedding output + final norm
    return total / GIB


def layer_tokens_gib(w: Workload, per_token_layer: float) -> float:
    """GiB of `per_token_layer` bytes kept in every saved layer for one full micro-batch (as activations_gib counts)."""
    layers = 2 if w.gradient_checkpointing else saved_layers(w) + 1
    return layers * w.tokens_per_micro_batch * per_token_layer / GIB


def logits_gib(w: Workload) -> float:
    """transformers' ForCausalLMLoss upcasts the logits to fp32 before cross-entropy (bf16 logits 2 + fp32 copy 4 +
    fp32 log-softmax 4 in forward); the Trainer's compute_loss returns the loss alone, so the model's outputs,
    bf16 logits included, are gone before backward, whose peak is the saved log-softmax 4 + its gradient 4 +
    the fp32 logits' gradient 4: 12 bytes per token per vocabulary entry. Measured as the peak of the bytes in
    live tensors (PyTorch's CPU allocator, through the profiler) over that forward + backward of a 1-layer bf16
    LlamaForCausalLM with a 32k vocabulary on CPU: 12.09, the model's gradients included (14.09 when the caller
    keeps the outputs through backward, which the Trainer does not): tests/unit/plan/test_plan_activations_measured.py.
    11.7 GiB for 4x2048 tokens of a 128k vocabulary."""
    tokens = w.tokens_per_micro_batch
    if fused_loss(w):
        # Liger's fused linear cross-entropy computes the loss in chunks and never holds the full logits.
        return tokens * w.model.hidden_size * 8 / GIB
    return tokens * w.model.vocab_size * LOGITS_BYTES_PER_ENTRY / GIB


def fused_loss(w: Workload) -> bool:
    """Liger's fused cross-entropy replaces the logits of the causal-LM loss only: DPO and KTO pop the labels and
    take the full logits to compute their log-probabilities themselves (train/dpo/trainer.py concatenated_forward)."""
    return liger_applies(w) and w.stage in ("sft", "pt")


# Of the logits' bytes per entry, the forward holds 10 (bf16 logits, their fp32 copy, the fp32 log-softmax);
# backward's peak is the LOGITS_BYTES_PER_ENTRY counted for the policy.
LOGITS_FORWARD_BYTES = 10


def reference_logits_gib(w: Workload) -> float:
    """The forwards without gradients (DPO's reference; KTO's KL estimate and reference) run after the policy's
    forward, which still holds its logits: each makes the same 10 bytes per entry for its own batch, transiently
    (get_batch_logps: the fp32 logits and their log-softmax). At that moment the logits take 10 + 10 bytes per
    entry, 20 - LOGITS_BYTES_PER_ENTRY (8) more than counted for the policy's (its backward peak)."""
    if not w.extra_forwards:
        return 0.0
    extra = 2 * LOGITS_FORWARD_BYTES - LOGITS_BYTES_PER_ENTRY
    return w.tokens_per_micro_batch * w.model.vocab_size * extra / GIB
