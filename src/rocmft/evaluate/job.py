"""`python -m rocmft.evaluate.job --spec-file=PATH`: the eval passes, run where the model runs (this venv or the
arch's image), by LLaMA-Factory's own SFT workflow (`run_exp` with do_eval / do_predict). Prints one JSON
object on stdout (metrics and example answers per pass); every library line goes to stderr, as in serve/ask.py.
The run dir is not written here: the host writes eval.json from this output. The spec (JSON) comes in a private
file (serve/private_file.py), never in argv, where every local user's `ps` would show it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from array import array
from pathlib import Path
from typing import Any

from ..serve.private_file import read


def copies(train, held) -> int | None:
    """How many held-out rows are token for token a training row: what the run held out is then partly what it
    trained on (a dataset of repeated rows, or `num_samples` repeating a small one, as the demo's identity set).
    Counted on the rows LLaMA-Factory split and tokenised, so no guess of its split can be wrong. The training
    rows are read in batches and kept as 16-byte digests: a large set never sits in memory as token lists."""
    if train is None or held is None or "input_ids" not in getattr(held, "column_names", ()):
        return None

    def digests(rows):
        for batch in rows.iter(batch_size=1024):
            for ids in batch["input_ids"]:
                yield hashlib.blake2b(array("q", ids).tobytes(), digest_size=16).digest()

    trained = set(digests(train))
    return sum(d in trained for d in digests(held))


def _loader(get_dataset, rows: int | None, found: dict[str, Any] | None):
    """LLaMA-Factory's get_dataset, noting the held-out rows that are copies of training rows (into `found`, when
    given), with the eval rows cut to the first `rows`. It has no max-predict-rows setting, and its `max_samples`
    cuts the raw rows before the split, which would hold out other rows."""

    def get(*args, **kwargs):
        module = get_dataset(*args, **kwargs)
        evals = module.get("eval_dataset")
        if found is not None and hasattr(evals, "column_names"):
            found.update(held_out_rows=len(evals), held_out_copies=copies(module.get("train_dataset"), evals))
        if rows is not None and evals is not None and hasattr(evals, "select") and len(evals) > rows:
            module["eval_dataset"] = evals.select(range(rows))
        return module

    return get


def run_pass(args: dict[str, Any], rows: int | None, out: Path, count_copies: bool = False) -> dict[str, Any]:
    from llamafactory.train import tuner
    from llamafactory.train.sft import workflow

    original = workflow.get_dataset
    found: dict[str, Any] = {}
    workflow.get_dataset = _loader(original, rows, found if count_copies else None)
    try:
        tuner.run_exp({**args, "output_dir": str(out)})
    finally:
        workflow.get_dataset = original
    results = json.loads((out / "all_results.json").read_text())
    predictions = []
    file = out / "generated_predictions.jsonl"
    if file.is_file():
        predictions = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
    return {"metrics": results, "predictions": predictions, **found}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocmft.evaluate.job")
    parser.add_argument("--spec-file", required=True,
                        help="a file holding the plan's passes as JSON (rocmft.evaluate.plan, serve/private_file.py)")
    spec = json.loads(read(parser.parse_args(argv).spec_file))

    answer_fd = os.dup(1)
    os.dup2(2, 1)  # libraries that hold sys.stdout print to stderr; stdout carries the JSON alone
    results: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="rocmft-eval-") as tmp:
            for name, args in spec["passes"].items():
                print(f"[rocmft] eval pass {name}", file=sys.stderr, flush=True)
                rows = spec["rows"] if name.endswith(".predict") else None
                result = run_pass(args, rows, Path(tmp) / name, count_copies=name == "base.loss")
                result["rows"] = len(result["predictions"]) or None  # predict passes: the rows generated for
                result["predictions"] = result["predictions"][: spec["examples"]]
                results[name] = result
    finally:
        sys.stdout.flush()
        os.dup2(answer_fd, 1)
        os.close(answer_fd)
    print(json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
