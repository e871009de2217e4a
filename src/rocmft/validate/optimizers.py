"""LLaMA-Factory's optional optimizers: what it refuses only when it builds the optimizer, after the model has
loaded and the data been processed (llamafactory/train/trainer_utils.py, 0.9.5), said up front in its words.

GaLore takes `optim` adamw_torch, adamw_bnb_8bit/adamw_8bit/paged_adamw_8bit or adafactor (_create_galore_optimizer);
APOLLO adamw_torch only (_create_apollo_optimizer); anything else is `NotImplementedError: Unknown optim`. An unset
`optim` is transformers 5.6's default, adamw_torch_fused (training_args.py, torch >= 2.8): so LLaMA-Factory's own
examples/extras/{galore,apollo} stop there as written (seen on CPU: both train one step with optim: adamw_torch).
Their per-layer modes refuse gradient accumulation.
"""

from __future__ import annotations

from typing import Any

from ..io.problems import Problem

SOURCE = "llamafactory/train/trainer_utils.py"
DEFAULT_OPTIM = "adamw_torch_fused"  # transformers 5.6 TrainingArguments, torch >= 2.8 (the images' and the venv's)
TAKES = {
    "use_galore": ("GaLore", "galore_layerwise", "_create_galore_optimizer",
                   ("adamw_torch", "adamw_bnb_8bit", "adamw_8bit", "paged_adamw_8bit", "adafactor")),
    "use_apollo": ("APOLLO", "apollo_layerwise", "_create_apollo_optimizer", ("adamw_torch",)),
}


def check(args: dict[str, Any], file: str) -> list[Problem]:
    problems = []
    for key, (name, layerwise, where, optims) in TAKES.items():
        if not args.get(key):
            continue
        optim = str(args.get("optim") or DEFAULT_OPTIM)
        if optim not in optims:
            what = f"`{optim}`" if args.get("optim") else f"an unset optim (transformers' default, {DEFAULT_OPTIM})"
            problems.append(Problem(file, "optim", f"{name} builds its optimizer only from {', '.join(optims)}; "
                                    f"{what} stops the run at its first step: \"Unknown optim\" ({SOURCE} {where})",
                                    f"optim: {optims[0]}"))
        if args.get(layerwise) and int(args.get("gradient_accumulation_steps") or 1) != 1:
            problems.append(Problem(file, "gradient_accumulation_steps", f"per-layer {name} ({layerwise}) does not "
                                    f"support gradient accumulation ({SOURCE} {where})",
                                    f"gradient_accumulation_steps: 1, or {layerwise}: false"))
    return problems
