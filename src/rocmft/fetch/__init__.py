"""`make fetch`: `plan` says what to download into the HF cache and the command that downloads it (pure, host
side); `worker` is that command (`python -m rocmft.fetch.worker`), run where huggingface_hub and lm_eval are.

May import: io, recipe, validate, evaluate.
"""
