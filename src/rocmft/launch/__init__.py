"""Launch: one pure function builds the plan (plan.py); each runtime executes or renders that same plan.

May import: io, hardware, recipe, run, image.
"""
