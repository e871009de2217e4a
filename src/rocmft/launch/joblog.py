"""The job's text output (train.log): which lines a person sees, and the few lines that explain a failure.

Progress never comes from here (that is progress.jsonl, see events.py): this module only decides what of
the text is worth showing. Pure: feed bytes or text, get lines back.
"""

from __future__ import annotations

import re
import signal

from ..run.events import SIGNAL_LINE

PROJECT = "[rocmft]"
EXPLAIN_LINES = 30
# a tqdm bar, with or without a total ("12%|##  | 3/24 [00:01<00:05, ...]", "Generating: 0 examples [00:00, ...]"):
# everything up to its last timing bracket, since a message printed before the bar's newline follows it there
_BAR = re.compile(r"^.*(?:\d+%\|.*\||\[\d+:\d\d(?::\d\d)?(?:<[^\]]*)?,[^\]]*\])")
_MARKERS = re.compile(r"^[\s^~]+$")  # the ^^^^ under a call in a traceback
_INFO = re.compile(r"^(\[INFO\||INFO[: ]|I\d{4} \d\d:)")  # transformers/LLaMA-Factory INFO, glog-style I lines
_WARNING = re.compile(r"^(\[WARNING\||WARNING[: ]|W\d{4} \d\d:)|Warning: |warnings\.warn\(")
_RANK = re.compile(r"^\[rank(\d+)\]:(.*)$")
_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")


class Lines:
    """Bytes as they arrive -> whole lines (a carriage return ends a line too: tqdm redraws with it), never a
    split line or multi-byte character."""

    MAX_PENDING = 1 << 20  # a bar without any line end for this long is cut anyway

    def __init__(self) -> None:
        self.pending = b""
        self.raw = b""  # the bytes the last feed/flush completed, as they came (for VERBOSE's echo)

    def feed(self, chunk: bytes) -> list[str]:
        self.pending += chunk
        cut = max(self.pending.rfind(b"\n"), self.pending.rfind(b"\r")) + 1
        if cut == 0 and len(self.pending) < self.MAX_PENDING:
            self.raw = b""
            return []
        cut = cut or len(self.pending)
        self.raw, self.pending = self.pending[:cut], self.pending[cut:]
        return _split(self.raw)

    def flush(self) -> list[str]:
        self.raw, self.pending = self.pending, b""
        return _split(self.raw) if self.raw else []


def _split(data: bytes) -> list[str]:
    return [line for line in re.split(r"\r\n|\r|\n", data.decode("utf-8", "replace")) if line != ""]


def is_project_line(line: str) -> bool:
    """A line of rocmft's for the terminal; the job's own word on a signal it got is the launcher's to say."""
    return line.startswith(PROJECT) and not line.startswith(SIGNAL_LINE)


def is_warning(line: str) -> bool:
    return bool(_WARNING.search(line))


def strip_bars(line: str) -> str:
    return _BAR.sub("", line)


def is_noise(line: str) -> bool:
    """Lines that never explain a failure: INFO logging, progress bars, traceback markers, JSON dumps' braces."""
    text = line.strip()
    return not text or bool(_INFO.match(text)) or bool(_MARKERS.match(text)) or text in ("{", "}", "},", "[", "]", "],")


def failed_ranks(log_text: str) -> list[str]:
    """torchrun's failure summary -> 'rank 1 (local_rank 1) on host: exit code -9 (killed by SIGKILL), root cause'.

    The root cause (the first rank to fail) comes first; the others were usually stopped because of it.
    """
    summary = log_text[log_text.rfind("Failures:"):] if "Failures:" in log_text else log_text
    root_at = summary.find("Root Cause")
    out = []
    for block in re.finditer(r"\[\d+\]:\n((?:\s+\w[\w ]*:.*\n?)+)", summary):
        fields = dict(re.findall(r"^\s+(\w[\w ]*?)\s*:\s*(.*)$", block.group(1), re.M))
        rank = re.match(r"(\d+) \(local_rank: (\d+)\)", fields.get("rank", ""))
        code = re.match(r"(-?\d+)", fields.get("exitcode", ""))
        if not rank or not code:
            continue
        code_i = int(code.group(1))
        what = f"exit code {code_i}"
        if code_i < 0:
            try:
                what += f" (killed by {signal.Signals(-code_i).name})"
            except ValueError:
                pass
        is_root = root_at != -1 and block.start() > root_at
        line = f"rank {rank.group(1)} (local_rank {rank.group(2)}) on {fields.get('host', '?')}: {what}"
        if is_root:
            out.insert(0, line + ", root cause")
        elif not any(o.startswith(line) for o in out):
            out.append(line)
    return out


def _root_rank(ranks: list[str]) -> str | None:
    if ranks and ranks[0].endswith("root cause"):
        return ranks[0].split()[1]
    return None


def _chain(lines: list[str], start: int) -> tuple[list[str], int]:
    """A traceback (and the ones chained to it) from `start`, condensed to what explains it: each one's last
    frame and its exception. Returns the lines and the index after the chain."""
    out: list[str] = []
    i = start
    while i < len(lines) and lines[i].strip() == _TRACEBACK:
        frames: list[str] = []
        i += 1
        while i < len(lines) and lines[i].startswith((" ", "\t")):
            frames.append(lines[i])
            i += 1
        last_frame = [f for f in frames if f.lstrip().startswith("File ")][-1:]
        keep = frames[frames.index(last_frame[0]):] if last_frame else frames[-2:]
        out += [_TRACEBACK] + (["  ..."] if len(frames) > len(keep) else []) + keep
        message = 0
        while i < len(lines) and message < 6 and lines[i].strip() != _TRACEBACK \
                and not lines[i].startswith(_CHAINED) and not is_project_line(lines[i]):
            out.append(lines[i])
            message += 1
            i += 1
        if i < len(lines) and lines[i].startswith(_CHAINED):
            out.append(lines[i])
            i += 1
    return out, i


def explain(log_text: str, limit: int = EXPLAIN_LINES) -> list[str]:
    """The last lines of a failed job that explain it: the root-cause rank's traceback (condensed, with the
    lines it printed just before), else what came last before torchrun's own summary."""
    lines = [strip_bars(line) for line in _split(log_text.encode("utf-8", "replace"))]
    lines = [line for line in lines if not is_noise(_RANK.sub(r"\2", line))]
    # torchrun's own traceback and failure summary (unprefixed, ending in ChildFailedError): failed_ranks()
    # says that part in a line per rank
    failed_at = next((i for i, line in enumerate(lines) if "ChildFailedError" in line and not _RANK.match(line)), None)
    if failed_at is not None:
        start = max((i for i in range(failed_at) if lines[i].strip() == _TRACEBACK), default=failed_at)
        lines = lines[:start]
    root = _root_rank(failed_ranks(log_text))
    by_rank: dict[str | None, list[str]] = {}
    for line in lines:
        match = _RANK.match(line)
        key, text = (match.group(1), match.group(2)[1:] if match.group(2).startswith(" ") else match.group(2)) \
            if match else (None, line)
        by_rank.setdefault(key, []).append(text)
    # the root-cause rank, or the only process; another rank's traceback only when no rank is named (when one
    # is, the others' errors are mostly its consequences: "connection reset by peer")
    candidates = (root, None) if root is not None else (None, *sorted(k for k in by_rank if k is not None))
    for key in candidates:
        own = by_rank.get(key) or []
        starts = [i for i, line in enumerate(own) if line.strip() == _TRACEBACK]
        if not starts:
            continue
        # the last chain printed is the one the process died of; walk back over "During handling ..." links
        at = len(starts) - 1
        while at > 0 and starts[at] > 0 and own[starts[at] - 1].startswith(_CHAINED):
            at -= 1
        first = starts[at]
        chain, _ = _chain(own, first)
        # what the process said just before (a message, not a dump of a config: those start indented or quoted)
        before = [line for line in own[max(0, first - 3):first]
                  if not line.startswith(_CHAINED) and not line.startswith((" ", "\t", '"'))]
        prefix = f"[rank{key}] " if key is not None and key != root else ""
        shown = [prefix + line for line in before + chain]
        return shown[-limit:]
    return lines[-min(limit, 8):]
