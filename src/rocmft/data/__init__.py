"""`make data`: a user's file read as LLaMA-Factory reads it (JSONL, JSON array, Parquet, CSV, text), every row
checked for its stage (SFT, pairs, KTO, text), exact duplicates counted (and dropped on request), the good ones
written and registered in the user's dataset_info.json, the rejects kept with their reason.

May import: io, recipe.
"""
