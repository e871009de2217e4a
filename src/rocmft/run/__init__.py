"""A run directory: created once, its status, checkpoints, job files and progress events (the format the launcher,
the worker and the readers share), what a run trained (target), and the chain of runs one starts from.

May import: io, hardware, recipe.
"""
