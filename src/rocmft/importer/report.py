"""What an import did, said once at the end: the recipe written, each translation, each key dropped and why,
what the base brings, the DeepSpeed differences, the planner's verdict and the command to train it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..io.problems import Problem
from ..io.safe_text import one_line

SECTIONS = {
    "translated": "translated (rocmft owns these)",
    "dropped": "dropped",
    "defaults": "LLaMA-Factory's default kept (your file did not set it; the base would)",
    "inherited": "inherited from the base (your file did not set it)",
    "deepspeed": "DeepSpeed",
    "advice": "to do",
}


@dataclass
class Report:
    problems: list[Problem] = field(default_factory=list)  # the source files' own, as `validate` reports them
    lines: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in SECTIONS})
    written: list[str] = field(default_factory=list)
    summary: str = ""  # one line: base, arch, GPUs, preset, precision
    validated: list[str] = field(default_factory=list)  # where the written recipe was checked, its warnings
    plan: list[str] = field(default_factory=list)
    command: str = ""

    def add(self, section: str, text: str) -> None:
        self.lines[section].append(text)

    def text(self) -> str:
        out: list[str] = []
        if self.problems:
            out.append("problems in your files (as `rocmft validate` reports them; the recipe does not carry them):")
            out += [f"  {p.line()}" for p in sorted(self.problems, key=lambda p: ("error", "warning", "note").index(p.severity))]
        out.append(f"wrote {' and '.join(self.written)}: {self.summary}")
        for name, title in SECTIONS.items():
            if self.lines[name]:
                out.append(f"{title}:")
                out += [f"  {line}" for line in self.lines[name]]
        if self.validated:
            out.append("the recipe:")
            out += [f"  {line}" for line in self.validated]
        if self.plan:
            out.append("plan:")
            out += [f"  {line}" for line in self.plan]
        out.append(f"train it: {self.command}")
        return "\n".join(one_line(line) for line in out)  # the user's values, never the terminal's commands
