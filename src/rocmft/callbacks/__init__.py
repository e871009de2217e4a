"""Callbacks that run inside the training processes (registered by rocmft.worker through run_exp).

May import: io, recipe, run.
"""
