"""rocmft: LLaMA-Factory recipes for AMD GPUs.

The flow, one module (or package) per step: recipes -> render -> validate -> plan -> launch -> runs.
"""

__version__ = "0.1.0"
