"""`make eval RUN=...`: a run against its base model on held-out rows, by LLaMA-Factory's own eval and predict.

May import: io, data, run, serve.
"""
