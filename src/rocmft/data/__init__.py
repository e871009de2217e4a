"""`make data`: a user's file read in its format (JSONL, JSON, text), every row checked for its stage (SFT, pairs,
KTO, text), the good ones written and registered in dataset_info.json, the rejects kept with their reason.

May import: io, recipe.
"""
