"""Run a BuildPlan through the Docker SDK (legacy builder: no BuildKit in the SDK), streaming the output
with a per-step progress display into a log, then tag the image and print a one-screen summary."""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterable

from ..io.problems import Problem, ProblemReport
from . import context as build_context
from .plan import BuildPlan

_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
# Metadata-only steps: instant, and not worth a line each unless --verbose.
_QUIET = ("ARG ", "ENV ", "SHELL ", "LABEL ", "WORKDIR ", "ENTRYPOINT ", "CMD ")
_NOT_FOUND = re.compile(r"No matching distribution found for ([^\s]+)")
_FROM = re.compile(r"^FROM\s+\S+(?:\s+AS\s+(\S+))?\s*$", re.IGNORECASE)
# The legacy builder ends every step with the id of the image it left (a stage's last one is the stage).
_LAYER = re.compile(r"^\s*---> ([0-9a-f]{12,64})\s*$")
# Steps that do work (the rest are metadata): a stage is "cached" when every one of them was.
_WORK = ("RUN ", "COPY ", "ADD ")


@dataclass
class StageResult:
    """One Dockerfile stage as the daemon's own output told it: steps, cache hits, time, last image id."""
    name: str
    steps: int = 0
    work_steps: int = 0
    work_cached: int = 0
    seconds: float = 0.0
    image_id: str = ""

    @property
    def cached(self) -> bool:
        return self.work_steps > 0 and self.work_cached == self.work_steps


@dataclass
class BuildResult:
    ok: bool
    image_id: str = ""
    seconds: float = 0.0
    steps: int = 0
    cached: int = 0
    error: str = ""
    failed_step: str = ""
    log: str = ""
    tail: list[str] = field(default_factory=list)
    stages: list[StageResult] = field(default_factory=list)

    def stage(self, name: str) -> StageResult | None:
        return next((s for s in self.stages if s.name == name), None)


def _fmt_seconds(s: float) -> str:
    from .kernels import fmt_duration

    return fmt_duration(s)


def stage_line(stage: StageResult) -> str:
    how = "cached" if stage.cached else ("metadata only" if not stage.work_steps else
                                         f"{stage.work_cached} of {stage.work_steps} steps cached")
    return f"==> stage {stage.name:<8} {_fmt_seconds(stage.seconds):>8}  ({how})"


class StepDisplay:
    """One line per Dockerfile step (`[ 3/25] RUN ...`), its time and whether it was cached. On a terminal
    a spinner line also shows the running step's latest output; in CI the output stays in the log."""

    def __init__(self, out: IO[str], verbose: bool = False):
        self.out = out
        self.verbose = verbose
        self.tty = hasattr(out, "isatty") and out.isatty()
        self.current: tuple[int, int, str] | None = None
        self.started = 0.0
        self.cached = False
        self.status = None
        if self.tty:
            from rich.console import Console

            self.console = Console(file=out)
            self.status = self.console.status("starting the build")
            self.status.start()

    def _finish(self) -> None:
        if not self.current:
            return
        n, total, text = self.current
        took = time.monotonic() - self.started
        self.current = None
        if text.startswith(_QUIET) and took < 2 and not self.verbose:
            return
        how = "cached" if self.cached else _fmt_seconds(took)
        line = f"[{n:>2}/{total}] {text[:88]:<88} {how:>8}"
        if self.status:
            self.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.out, flush=True)

    def step(self, n: int, total: int, text: str) -> None:
        self._finish()
        self.current, self.started, self.cached = (n, total, text), time.monotonic(), False
        if self.status:
            self.status.update(f"[{n}/{total}] {text[:70]}")

    def output(self, line: str) -> None:
        if line.strip() == "---> Using cache":
            self.cached = True
        if self.verbose and not self.status:
            print(f"        {line}", file=self.out, flush=True)
        elif self.status and self.current and line.strip():
            n, total, text = self.current
            self.status.update(f"[{n}/{total}] {text[:50]}  [dim]{line.strip()[:70]}[/dim]")

    def stage_done(self, stage: StageResult) -> None:
        self._finish()
        line = stage_line(stage)
        if self.status:
            self.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.out, flush=True)

    def close(self) -> None:
        self._finish()
        if self.status:
            self.status.stop()


def consume(events: Iterable[dict], display: StepDisplay, log: IO[str]) -> BuildResult:
    """Fold the daemon's JSON events into a BuildResult (pure apart from the display and the log)."""
    result = BuildResult(ok=False)
    started = time.monotonic()
    pending = ""
    tail: list[str] = []
    step_text = ""
    stage: StageResult | None = None
    stage_started = started
    step_kind = ""

    def close_stage(now: float) -> None:
        if stage is not None:
            stage.seconds = now - stage_started
            display.stage_done(stage)

    for event in events:
        if "stream" in event:
            pending += event["stream"]
            *lines, pending = pending.split("\n")
            for line in lines:
                log.write(line + "\n")
                tail = (tail + [line])[-40:]
                match = _STEP.match(line)
                if match:
                    result.steps = int(match.group(2))
                    step_text = f"{match.group(1)}/{match.group(2)} {match.group(3)}"
                    text = match.group(3)
                    from_match = _FROM.match(text)
                    if from_match:
                        now = time.monotonic()
                        close_stage(now)
                        stage = StageResult(from_match.group(1) or f"#{len(result.stages) + 1}")
                        stage_started = now
                        result.stages.append(stage)
                    if stage is not None:
                        stage.steps += 1
                        step_kind = text.split(" ", 1)[0].upper() + " "
                        if step_kind in _WORK:
                            stage.work_steps += 1
                    display.step(int(match.group(1)), int(match.group(2)), text)
                else:
                    if line.strip() == "---> Using cache":
                        result.cached += 1
                        if stage is not None and step_kind in _WORK:
                            stage.work_cached += 1
                    layer = _LAYER.match(line)
                    if layer and stage is not None:
                        stage.image_id = layer.group(1)
                    display.output(line)
        elif "status" in event:  # a pull by the daemon (online builds only), or other progress
            log.write(f"{event.get('status')} {event.get('progress', '')}\n")
        elif "aux" in event and isinstance(event["aux"], dict) and "ID" in event["aux"]:
            result.image_id = event["aux"]["ID"]
        elif "error" in event:
            result.error = event["error"].strip()
            log.write("ERROR: " + result.error + "\n")
            tail = (tail + ["ERROR: " + result.error])[-40:]
    if pending:
        log.write(pending + "\n")
    result.ok = bool(result.image_id) and not result.error
    if result.ok:
        close_stage(time.monotonic())
    display.close()
    result.seconds = time.monotonic() - started
    result.tail = tail
    result.failed_step = "" if result.ok else step_text
    return result


def run(client, plan: BuildPlan, *, log_path: Path, no_cache: bool = False, verbose: bool = False,
        out: IO[str] | None = None) -> BuildResult:
    """Build, then tag with every tag of the plan. Never pulls: pull=False, and the caller checked the base."""
    out = out or sys.stdout  # looked up now: a default bound at import would outlive a replaced stdout
    log_path.parent.mkdir(parents=True, exist_ok=True)
    print(f"==> sending the build context ({build_context.describe(plan)}); the daemon's full log: {log_path}",
          file=out, flush=True)
    with build_context.write(plan) as ctx, open(log_path, "w") as log:
        events = client.api.build(
            fileobj=ctx,
            custom_context=True,
            dockerfile=plan.dockerfile,
            tag=plan.tags[0],
            buildargs=dict(plan.buildargs),
            network_mode=plan.network_mode,
            target=plan.target,
            pull=False,
            rm=True,
            forcerm=True,
            nocache=no_cache,
            decode=True,
        )
        result = consume(events, StepDisplay(out, verbose), log)
    result.log = str(log_path)
    if result.ok:
        image = client.images.get(result.image_id)
        for tag in plan.tags:
            repo, _, name = tag.rpartition(":")
            image.tag(repo, name)
    return result


def failed_step_lines(result: BuildResult, limit: int = 25) -> list[str]:
    """The failing step's own last lines (not the steps before it), shaped like a failed training run's:
    a header, the lines prefixed with `|`; the report after them names the step, the stage and the log."""
    starts = [i for i, line in enumerate(result.tail) if _STEP.match(line)]
    lines = [line for line in result.tail[starts[-1] + 1 if starts else 0:] if line.strip()][-limit:]
    if not lines:
        return []
    return [f"==> the failing step's last lines (step {result.failed_step}):", *(f"  | {line}" for line in lines)]


def failure_report(result: BuildResult, plan: BuildPlan, make_hint: str) -> ProblemReport:
    text = "\n".join(result.tail)
    missing = _NOT_FOUND.findall(text)
    if missing:
        return ProblemReport([Problem(plan.wheelhouse or "wheelhouse", name, "the build found no wheel for it",
                                      f"run `{make_hint}` (full log: {result.log})") for name in missing])
    stage = f" (stage {result.stages[-1].name})" if result.stages else ""
    return ProblemReport([Problem(plan.dockerfile, f"step {result.failed_step}{stage}" if result.failed_step else "",
                                  result.error or "the build failed", f"full log: {result.log}")])


def summary_lines(plan: BuildPlan, result: BuildResult, image) -> list[str]:
    from .info import label_lines

    size = (image.attrs.get("Size") or 0) / 1e9
    return [
        f"==> rocmft image for {plan.arch} built in {_fmt_seconds(result.seconds)} "
        f"({result.cached} of {result.steps} steps cached)",
        f"  tags      {', '.join(plan.tags)}",
        f"  image     {result.image_id.split(':')[-1][:12]}  {size:.2f} GB",
        f"  base      {plan.base_image}",
        *label_lines(image),
        f"  check it  docker run --rm {plan.tags[-1]}   (prints the self-check; "
        "ROCm images need --device=/dev/kfd --device=/dev/dri)",
        f"  log       {result.log}",
    ]


def kernel_record(client, image_ref: str, path: str = "/kernels/record.json") -> dict:
    """The kernel stage's record (source, detail, seconds, ...) from an image; {} when it has none."""
    import json

    from .docker_api import read_files

    files = read_files(client, image_ref, path)
    try:
        return json.loads(next(iter(files.values()))) if files else {}
    except ValueError:
        return {}


def keep_kernel_wheel(client, plan: BuildPlan, result: BuildResult) -> tuple[dict, list[Path]]:
    """After a build: the kernel stage's record, and, when the stage compiled a wheel, that wheel copied to
    the host cache (plan.kernel_cache), so no later build compiles it again, even after `docker builder prune`."""
    import json

    from .docker_api import read_files
    from .kernels import RECORD, STAGE, file_sha256

    stage = result.stage(STAGE)
    if stage is None or not stage.image_id:
        return {}, []
    record = kernel_record(client, stage.image_id)
    kept: list[Path] = []
    if record.get("source") == "built" and plan.kernel_cache:
        folder = Path(plan.kernel_cache)
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in read_files(client, stage.image_id, "/kernels/wheels").items():
            if name.endswith(".whl"):
                tmp = folder / (name + ".part")
                tmp.write_bytes(data)
                tmp.rename(folder / name)  # never a half-written wheel under its real name
                kept.append(folder / name)
        spec = plan.kernel.__dict__ if plan.kernel else {}
        # each wheel's sha256, as it came out of the stage: a later build sends it only if it is still that file
        (folder / RECORD).write_text(json.dumps({**record, "spec": {k: list(v) if isinstance(v, tuple) else v
                                                                     for k, v in spec.items()},
                                                 "sha256": {p.name: file_sha256(p) for p in kept}}, indent=1) + "\n")
    return record, kept


def kernel_line(record: dict, kept: list[Path], stage: StageResult | None) -> str:
    if not record:
        return "==> kernel: no record (an image from before the kernel stage)"
    source = record.get("source", "?")
    took = _fmt_seconds(float(record.get("seconds") or 0))
    what = {"built": f"compiled here in {took} (MAX_JOBS {record.get('max_jobs')})",
            "host": "reused the wheel kept on this host (no compile)",
            "base": f"from the base image: {record.get('detail', '')}",
            "none": record.get("detail", "none")}.get(source, source)
    cached = " - kernel stage cached by Docker" if stage is not None and stage.cached else ""
    kept_text = f"; kept in {kept[0].parent}" if kept else ""
    backend = record.get("backend", "")
    name = f"flash-attn {record.get('version')} ({backend}, {record.get('gpu_archs')})" if backend != "none" else "kernels"
    return f"==> {name}: {what}{cached}{kept_text}"
