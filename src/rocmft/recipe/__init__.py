"""A recipe and what it means: loading with inheritance and key=value overrides, its precision, stage, DeepSpeed
preset, env and quantization, the rules a source says break on GPUs, and rendering into LLaMA-Factory/DeepSpeed files.

May import: io, hardware.
"""
