"""The worker's gpt-oss shim (rocmft.worker.gpt_oss_eager), against LLaMA-Factory 0.9.5's own attention setup:
unpatched, a gpt-oss config stops at LLaMA-Factory's import of a function transformers 5.6 lacks; patched, it gets
transformers' eager attention (its sinks), and any other model what LLaMA-Factory gives it."""

from __future__ import annotations

import pytest

pytest.importorskip("llamafactory", reason="the job side's stack (make setup)")


def _config(model_type: str):
    import transformers

    shape = dict(hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, vocab_size=100)
    if model_type == "gpt_oss":
        return transformers.GptOssConfig(num_local_experts=4, num_experts_per_tok=2, **shape)
    return transformers.Qwen3Config(**shape)


def test_llamafactory_alone_cannot_set_up_gpt_oss_attention():
    from llamafactory.hparams import ModelArguments
    from llamafactory.model import patcher

    with pytest.raises(ImportError, match="load_and_register_kernel"):
        patcher.configure_attn_implementation(_config("gpt_oss"), ModelArguments(model_name_or_path="x"))


def test_the_shim_gives_gpt_oss_eager_attention_and_leaves_other_models_alone():
    from llamafactory.extras.constants import AttentionFunction
    from llamafactory.hparams import ModelArguments
    from llamafactory.model import patcher

    from rocmft.worker import gpt_oss_eager

    configure = gpt_oss_eager(patcher.configure_attn_implementation)
    config, args = _config("gpt_oss"), ModelArguments(model_name_or_path="x", flash_attn="fa2")
    configure(config, args)
    assert config._attn_implementation == "eager" and args.flash_attn == AttentionFunction.DISABLED
    other, other_args = _config("qwen3"), ModelArguments(model_name_or_path="x", flash_attn="sdpa")
    configure(other, other_args)
    assert other._attn_implementation == "sdpa" and other_args.flash_attn == AttentionFunction.SDPA
