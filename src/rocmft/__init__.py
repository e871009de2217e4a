"""rocmft: LLaMA-Factory recipes for AMD GPUs.

The flow, a package per stage over a shared floor (io/): recipe (load, render) -> validate -> plan -> launch ->
run; the entry points beside them: pipeline.py (recipe -> run dir), worker.py (each training process),
tiny_model.py (the offline test model). docs/development.md draws the tree from each package's docstring.

May import: nothing of rocmft.
"""

__version__ = "0.1.0"
