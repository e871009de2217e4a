"""What a job wrote in its run dir (status, progress events, the divergence cause) reaches the terminal as
text: an escape sequence in it (retitle the window, clear the screen, set the clipboard with OSC 52) is shown
escaped, never sent. Each test plants one and reads what was printed."""

from __future__ import annotations

import io
import json

from rocmft.cli.main import main
from rocmft.launch import outcome
from rocmft.launch.terminal import Display
from rocmft.run import runs

# OSC 52 (set the clipboard), BEL, CSI clear-screen; then the same as 8-bit C1 controls, which terminals that
# take 8-bit controls (xterm with eightBitControls, many serial consoles) read as ESC [ and ESC ]: CSI (0x9b),
# OSC (0x9d) and ST (0x9c).
ESC = "\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2J\x9d0;owned\x9c\x9b2J"
C0_C1 = ("\x1b", "\x07", "\x9b", "\x9c", "\x9d")


def _clean(printed: str) -> bool:
    return not any(c in printed for c in C0_C1)


def test_a_line_and_a_step_event_from_the_job(tmp_path):
    out = io.StringIO()
    display = Display(out, live=False)
    display.line(f"[rocmft] {ESC}")
    display.event({"event": "begin", "stage": ESC})
    display.event({"event": "step", "step": 1, "max_steps": 2, "loss": 1.0})
    assert _clean(out.getvalue()) and "\\x1b]52" in out.getvalue() and "\\x9b2J" in out.getvalue()


def test_make_runs_lists_a_planted_status_as_text(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    run = runs.create(runs.choose("tiny", "planted"))
    (run / "train.yaml").write_text("stage: sft\n")
    (run / "status.json").write_text(json.dumps({"state": "diverged", "recipe": f"x{ESC}", "stage": ESC,
                                                 "cause": ESC, "last_good_checkpoint": ESC}))
    assert main(["runs"]) == 0
    printed = capsys.readouterr().out
    assert "planted" in printed and _clean(printed)


def test_the_divergence_cause_and_the_summary(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    run = runs.create(runs.choose("tiny", "diverged"))
    (run / "diverged.json").write_text(json.dumps({"reason": f"nan{ESC}", "cause": ESC, "step": 3}))
    assert outcome.finish(run, 3, "cpu") == outcome.EXIT_DIVERGED
    printed = capsys.readouterr().out
    assert _clean(printed) and "\\x1b]52" in printed and "\\x9d0;owned" in printed
