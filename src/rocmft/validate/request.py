"""`python -m rocmft.validate.request FILE`: LLaMA-Factory's and DeepSpeed's checks for one rendered run,
answered as one JSON line on stdout.

This is what `validate.where` runs inside the arch's image (or SIF): the versions that will run the job
judge its files, and the host needs none of them. The request and the answer are plain data, so the
same entry point serves a container, an Apptainer image or this venv.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..io.problems import Problem

MARK = "ROCMFT-VALIDATION "  # the answer's line: LLaMA-Factory or DeepSpeed may print their own lines around it


def request(args: dict[str, Any], ds_config: str | None, arch: str, world_size: int,
            train_file: str, ds_file: str) -> dict[str, Any]:
    return {"args": args, "ds_config": ds_config, "arch": arch, "world_size": world_size,
            "train_file": train_file, "ds_file": ds_file}


def answer(problems: list[Problem]) -> str:
    return MARK + json.dumps([asdict(p) for p in problems])


def parse_answer(output: str) -> list[Problem] | None:
    """The problems from a run's output, or None when it holds no answer (the checker died first)."""
    for line in reversed(output.splitlines()):
        if line.startswith(MARK):
            return [Problem(**item) for item in json.loads(line[len(MARK):])]
    return None


def main(argv: list[str] | None = None) -> int:
    from . import check_stack

    argv = sys.argv[1:] if argv is None else argv
    req = json.loads(Path(argv[0]).read_text())
    problems = check_stack(req["args"], req["ds_config"], req["arch"], int(req["world_size"]),
                           req["train_file"], req["ds_file"])
    print(answer(problems), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
