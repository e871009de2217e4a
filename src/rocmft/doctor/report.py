"""What `make doctor` says: one finding per check (level, what, fix), the report, and its lines on the terminal."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

GiB = 1024 ** 3


@dataclass(frozen=True)
class Finding:
    level: str  # ok | info | warn | fail
    what: str
    fix: str = ""


@dataclass
class Report:
    findings: list[Finding]
    gpus: list[str]  # one line per GPU
    suggested_arch: str | None
    no_gpu: bool

    @property
    def failed(self) -> bool:
        return any(f.level == "fail" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {"findings": [asdict(f) for f in self.findings], "gpus": self.gpus,
                "suggested_arch": self.suggested_arch, "no_gpu": self.no_gpu, "failed": self.failed}


def size(n: int | None) -> str:
    return "?" if n is None else f"{n / GiB:.1f} GiB"


def render(report: Report) -> list[str]:
    marks = {"ok": "ok  ", "info": "note", "warn": "WARN", "fail": "FAIL"}
    lines = ["rocmft doctor: is this host ready for `make train` in a container?"]
    for f in report.findings:
        lines.append(f"  {marks[f.level]}  {f.what}")
        if f.fix and f.level in ("warn", "fail", "info"):
            lines.append(f"        {'next' if f.level == 'info' else 'fix'}: {f.fix}")
    if report.gpus:
        lines.append("GPUs (ROCr order, what GPUS= counts in):")
        lines += [f"  {g}" for g in report.gpus]
    if report.no_gpu:
        lines.append("No GPU here: the GPU path needs an AMD GPU. Try `make demo` (a tiny model on CPU: "
                     "~1.5 min from a fresh clone, ~45 s once .venv is set up; docs/development.md).")
    elif report.suggested_arch:
        lines.append(f"Suggested: ARCH={report.suggested_arch}  (e.g. make train RECIPE=... ARCH={report.suggested_arch})")
    # Devices and drivers present say nothing of what they compute: the canary trains on this stack.
    lines.append("Numerics: `make canary RECIPE=...` checks this stack's precision/attention/Liger against an fp32 "
                 "reference in a few steps of the tiny model (`make train CANARY=1` runs it before launching)")
    fails = sum(f.level == "fail" for f in report.findings)
    warns = sum(f.level == "warn" for f in report.findings)
    lines.append(f"{fails} failure(s), {warns} warning(s)" + (": fix the FAIL lines first" if fails else ""))
    return lines
