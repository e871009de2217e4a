"""What a person sees while a job runs: events followed from progress.jsonl, the job's text filtered, the
live line or plain lines, and the closing summary. The real runs are in tests/train/test_progress_cpu.py."""

import io
import json
import math
import threading
import time

from rocmft.launch import joblog, summary
from rocmft.launch.progress import Watch
from rocmft.launch.terminal import Display
from rocmft.run import events
from tests.conftest import wait_until


def step(n, total=12, loss=6.5, tokens=None, elapsed=None, **extra):
    return {"event": "step", "step": n, "max_steps": total, "loss": loss, "grad_norm": 0.3, "learning_rate": 1e-3,
            "tokens_seen": tokens if tokens is not None else 100 * n, "tokens_per_s_per_gpu": 1000.0,
            "elapsed_s": elapsed if elapsed is not None else 0.5 * n, "eta_s": 0.5 * (total - n), **extra}


# ---------------------------------------------------------------- the event file

def test_non_finite_numbers_are_strict_json_and_read_back_as_floats():
    line = events.encode(step(3, loss=float("nan"), grad_norm=float("inf")))
    raw = json.loads(line, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))  # strict: no NaN literal
    assert raw["loss"] == "nan" and raw["grad_norm"] == "inf"
    back = events.decode(line)
    assert math.isnan(back["loss"]) and back["grad_norm"] == math.inf and back["step"] == 3


def test_the_follower_returns_whole_lines_only_and_each_once(tmp_path):
    follower = events.EventFile(tmp_path)
    assert follower.poll() == []  # no file yet
    first, second = events.encode(step(1)), events.encode(step(2))
    path = events.path(tmp_path)
    path.parent.mkdir()  # the job folder (runs.create)
    path.write_text(first + second[:10])  # the writer is mid-line
    assert [e["step"] for e in follower.poll()] == [1]
    with open(path, "a") as fh:
        fh.write(second[10:] + "not json\n")
    assert [e["step"] for e in follower.poll()] == [2]  # the half line completed; garbage skipped
    assert follower.poll() == []


def test_totals_from_events():
    evs = [{"event": "begin", "world_size": 2, "max_steps": 12},
           step(1, loss=6.7, tokens=1000, elapsed=2.0), step(2, loss=6.6, tokens=3000, elapsed=3.0),
           step(3, loss=6.4, tokens=5000, elapsed=4.0),
           {"event": "end", "step": 3, "max_steps": 12, "elapsed_s": 4.5, "peak_memory_gib": 1.5,
            "memory_kind": "gpu", "memory_scope": "max over 2 ranks"}]
    t = events.totals(evs)
    assert t.steps_logged == 3 and t.last_step == 3 and t.max_steps == 12
    assert t.first_loss == (1, 6.7) and t.last_loss == (3, 6.4)
    # first logged step's warm-up left out: 4000 tokens in 2 s over 2 GPUs
    assert t.tokens_per_s_per_gpu == 1000.0
    assert t.peak_memory_gib == 1.5 and t.train_s == 4.5
    assert events.clock(3725) == "1:02:05" and events.clock(None) == "-"


# ---------------------------------------------------------------- the job's text

SUMMARY = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
=======================================================
rocmft.worker FAILED
-------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-02_13:22:18
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 27565)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 27565
-------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-02_13:22:18
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 27566)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 27566
=======================================================
"""


def test_torchrun_failure_names_the_root_cause_rank_first():
    assert joblog.failed_ranks(SUMMARY) == [
        "rank 1 (local_rank 1) on localhost: exit code -9 (killed by SIGKILL), root cause",
        "rank 0 (local_rank 0) on localhost: exit code -15 (killed by SIGTERM)",
    ]
    assert joblog.failed_ranks("no summary here") == []


def test_lines_never_splits_a_line_or_a_character():
    lines = joblog.Lines()
    text = "{'loss': '1.5'} naïve\r 10%|█ | 1/10 [00:00<00:01]\n".encode()
    cut = text.index("ï".encode()) + 1  # inside the two bytes of ï
    assert lines.feed(text[:cut]) == []
    assert lines.feed(text[cut:] + b"tail") == ["{'loss': '1.5'} naïve", " 10%|█ | 1/10 [00:00<00:01]"]
    assert lines.flush() == ["tail"]


ONE_PROCESS_FAILURE = """[INFO|configuration_utils.py:763] 2026-12-03 05:59:35,101 >> Model config LlamaConfig {
  "vocab_size": 817
}
Generating train split: 0 examples [00:00, ? examples/s]Failed to load JSON from file 'bad.jsonl': Invalid value. in row 20
Generating train split: 0 examples [00:00, ? examples/s]
Traceback (most recent call last):
  File "/x/json.py", line 160, in _generate_tables
    df = pandas_read_json(f)
         ^^^^^^^^^^^^^^^^^^^
  File "/x/_json.py", line 1392, in _parse
    ujson_loads(json, precise_float=self.precise_float), dtype=None
ValueError: Trailing data

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/x/builder.py", line 1815, in _prepare_split_single
    for _, table in generator:
  File "pyarrow/error.pxi", line 92, in pyarrow.lib.check_status
pyarrow.lib.ArrowInvalid: JSON parse error: Invalid value. in row 20

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/main/src/rocmft/worker.py", line 61, in main
    run_exp(args=train_args, callbacks=_callbacks(run_dir, train_args))
  File "/x/builder.py", line 1858, in _prepare_split_single
    raise DatasetGenerationError("An error occurred while generating the dataset") from e
datasets.exceptions.DatasetGenerationError: An error occurred while generating the dataset
"""


def test_explain_condenses_a_chained_traceback_to_its_causes():
    got = joblog.explain(ONE_PROCESS_FAILURE)
    assert got[0] == "Failed to load JSON from file 'bad.jsonl': Invalid value. in row 20"  # bar stripped
    assert "ValueError: Trailing data" in got
    assert "pyarrow.lib.ArrowInvalid: JSON parse error: Invalid value. in row 20" in got
    assert got[-1].startswith("datasets.exceptions.DatasetGenerationError")
    assert not any("INFO" in line or "vocab_size" in line or line.strip().startswith("^") for line in got)
    assert len(got) <= joblog.EXPLAIN_LINES


TWO_RANK_FAILURE = """[rank0]: Traceback (most recent call last):
[rank0]:   File "/x/trainer.py", line 10, in step
[rank0]:     work()
[rank0]: RuntimeError: Connection reset by peer
[rank1]: Traceback (most recent call last):
[rank1]:   File "/x/loader.py", line 5, in load
[rank1]:     row = parse(line)
[rank1]: KeyError: 'instruction'
E1203 06:02:41.217000 9943 api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 9951) of binary: python
Traceback (most recent call last):
  File "/x/torch/distributed/run.py", line 1032, in <module>
    main()
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
""" + SUMMARY.split("\n", 1)[1].replace("-9 (pid: 27566)  (SIGKILL)", "1 (pid: 27566)")


def test_explain_shows_the_root_cause_ranks_traceback_not_torchruns():
    got = joblog.explain(TWO_RANK_FAILURE)
    assert got[-1] == "KeyError: 'instruction'"
    assert not any("Connection reset" in line or "ChildFailedError" in line for line in got)


def test_explain_without_a_traceback_gives_the_last_lines_before_torchruns_summary():
    log = "W1203 api.py] Sending process 9950 closing signal SIGTERM\nE1203 api.py] failed (exitcode: -9) local_rank: 1\n" \
          "Traceback (most recent call last):\n  File \"run.py\", line 1\ntorch.distributed.elastic.multiprocessing." \
          "errors.ChildFailedError: \n" + SUMMARY.split("\n", 1)[1]
    got = joblog.explain(log)
    assert got[-1].endswith("failed (exitcode: -9) local_rank: 1") and len(got) == 2


# ---------------------------------------------------------------- the terminal

class Tty(io.StringIO):
    def isatty(self):
        return True


def test_plain_output_prints_one_line_per_step_and_no_carriage_return():
    out = io.StringIO()
    display = Display(out)
    display.event({"event": "begin", "max_steps": 12})
    for n in (1, 2, 3):
        display.event(step(n))
    display.close()
    lines = out.getvalue().splitlines()
    assert [line.split()[2] for line in lines] == ["1/12", "2/12", "3/12"] and "\r" not in out.getvalue()
    assert lines[0].startswith("[rocmft] step 1/12  loss 6.5000") and "ETA 0:00:06" in lines[0]


def test_plain_output_of_a_long_run_prints_a_steady_cadence_with_the_first_and_last_step():
    from rocmft.launch.terminal import PLAIN_STEP_LINES

    out = io.StringIO()
    display = Display(out)
    for n in range(1, 61):  # the demo's 60 steps, piped
        display.event(step(n, total=60))
    display.close()
    shown = [int(line.split()[2].split("/")[0]) for line in out.getvalue().splitlines()]
    assert shown == [1, *range(4, 61, 4)] and len(shown) <= PLAIN_STEP_LINES + 1, shown


def test_plain_output_shows_the_step_a_long_run_stopped_at_though_it_was_not_due():
    out = io.StringIO()
    display = Display(out)
    for n in (1, 2, 3, 4, 5, 6):  # Ctrl-C at step 6 of 100: every 7th is due
        display.event(step(n, total=100))
    display.close()
    assert [line.split()[2] for line in out.getvalue().splitlines()] == ["1/100", "6/100"]


def test_a_tty_gets_one_live_line_redrawn_in_place(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    out = Tty()
    display = Display(out)
    assert display.live
    display.line("[rocmft] run dir: runs/x")
    for n in (1, 2, 3):
        display.event(step(n))
    display.close()
    text = out.getvalue()
    assert "[rocmft] run dir: runs/x" in text  # "[rocmft]" is not taken as rich markup
    assert text.count("step 3/12") >= 1 and "step 1/12" in text
    assert "\x1b[2K" in text or "\r" in text  # redrawn: erase the line / return to its start
    assert text.count("[rocmft] run dir") == 1



def test_the_live_line_counts_the_eta_down_and_leaves_out_grad_norm_and_lr(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    display = Display(Tty())
    display.event(step(2, eta_s=10.0))
    at = display.last_at
    display.close()
    line = display.live_text(at + 4.0)
    assert "step 2/12" in line and "loss 6.5000" in line and "1,000 tok/s/GPU" in line
    assert "ETA 0:00:06" in line  # 10 s left at the event, 4 s later
    assert "grad_norm" not in line and "lr " not in line
    assert "grad_norm 0.3" in events.step_line(step(2)) and "lr 0.001" in events.step_line(step(2))

# ---------------------------------------------------------------- a runtime's view: Watch

NOISE = (b"[INFO|trainer.py:1] >> Running training\n"
         b"  8%|8         | 1/12 [00:00<00:00, 21.69it/s]\r{'loss': '6.671', 'grad_norm': '0.78'}\n"
         b"[WARNING|logging.py:340] >> `torch_dtype` is deprecated!\n"
         b"[rocmft] resumed with learning_rate 0.001\n")


def _write_events_later(run_dir, evs, delay=0.05):
    def go():
        for e in evs:
            time.sleep(delay)
            events.path(run_dir).parent.mkdir(parents=True, exist_ok=True)  # the job folder (runs.create)
            with open(events.path(run_dir), "a") as fh:
                fh.write(events.encode(e))
    thread = threading.Thread(target=go)
    thread.start()
    return thread


def test_watch_shows_project_lines_and_steps_from_events_not_the_text(tmp_path):
    out = io.StringIO()
    writer = _write_events_later(tmp_path, [{"event": "begin", "max_steps": 2}, step(1, 2), step(2, 2)])
    with Watch(tmp_path, out) as watch:
        watch.feed(NOISE[:30])
        watch.feed(NOISE[30:])
        writer.join()
        # shown by the follower thread while the job runs, not only by close()'s last poll
        wait_until(lambda: out.getvalue().count("[rocmft] step ") == 2, what="the follower showing both steps")
    lines = out.getvalue().splitlines()
    assert lines[0] == "[rocmft] resumed with learning_rate 0.001"
    assert [line.split()[2] for line in lines[1:3]] == ["1/2", "2/2"]
    assert "1 warning line(s)" in lines[3] and str(tmp_path / "train.log") in lines[3]
    assert len(lines) == 4 and "INFO" not in out.getvalue() and "'loss'" not in out.getvalue()


def test_verbose_streams_the_text_as_it_came(tmp_path):
    out = io.StringIO()
    with Watch(tmp_path, out, verbose=True) as watch:
        watch.feed(NOISE)
    assert out.getvalue() == NOISE.decode()


def test_quiet_shows_nothing(tmp_path):
    out = io.StringIO()
    events.path(tmp_path).parent.mkdir(parents=True, exist_ok=True)  # the job folder (runs.create)
    events.path(tmp_path).write_text(events.encode(step(1)))
    with Watch(tmp_path, out, quiet=True) as watch:
        watch.feed(NOISE)
    assert out.getvalue() == "" and watch.steps_seen == 1


# ---------------------------------------------------------------- the closing lines

def test_summary_of_a_finished_run(tmp_path):
    (tmp_path / "output").mkdir()
    (tmp_path / "output" / "adapter_model.safetensors").write_bytes(b"x")
    (tmp_path / "output" / "training_loss.png").write_bytes(b"x")
    evs = [{"event": "begin", "world_size": 1, "max_steps": 12}, step(1, loss=6.67, tokens=500, elapsed=1.0),
           step(12, loss=6.57, tokens=6000, elapsed=2.0),
           {"event": "end", "step": 12, "max_steps": 12, "elapsed_s": 2.1, "peak_memory_gib": 0.59,
            "memory_kind": "rss", "memory_scope": "this process"}]
    events.path(tmp_path).parent.mkdir(parents=True, exist_ok=True)  # the job folder (runs.create)
    events.path(tmp_path).write_text("".join(events.encode(e) for e in evs))
    lines = summary.done_lines(tmp_path, {"started": 100.0, "ended": 109.0})
    text = "\n".join(lines)
    assert lines[0].startswith("[rocmft] done: ") and lines[0].endswith("(0:00:09)")
    assert "[rocmft] steps      12/12" in text and "[rocmft] loss       6.6700 (step 1) -> 6.5700 (step 12)" in text
    assert "5,500 per GPU" in text and "0.59 GiB RSS per process" in text
    assert "adapter_model.safetensors" in text and "training_loss.png" in text


def test_a_failure_ends_with_the_rank_and_the_log_path(tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps({"nproc_per_node": 1, "nnodes": 1}))
    lines = summary.failed_lines(tmp_path, 1, ONE_PROCESS_FAILURE, [])
    assert lines[-2] == "[rocmft] FAILED (exit code 1): rank 0 (the only process)"
    assert lines[-1].startswith("[rocmft] full output: ") and lines[-1].endswith("/train.log")
    assert any("in row 20" in line for line in lines[-12:])
    ranked = summary.failed_lines(tmp_path, 1, TWO_RANK_FAILURE, joblog.failed_ranks(TWO_RANK_FAILURE))
    assert ranked[-3].startswith("[rocmft] FAILED (exit code 1): rank 1 (local_rank 1)")


def test_verbose_step_lines_never_land_on_a_bar_ended_by_a_carriage_return(tmp_path):
    out = io.StringIO()
    with Watch(tmp_path, out, verbose=True) as watch:
        watch.feed(b" 8%|8   | 1/12 [00:00<00:00]\r")
        events.path(tmp_path).parent.mkdir(parents=True, exist_ok=True)  # the job folder (runs.create)
        events.path(tmp_path).write_text(events.encode(step(1)))
        wait_until(lambda: "[rocmft] step 1/12" in out.getvalue(), what="the follower showing step 1")
        watch.feed(b"next line\n")
    text = out.getvalue()
    assert "\r\n[rocmft] step 1/12  loss" in text and text.endswith("next line\n")


def test_a_rank_killed_without_an_error_of_its_own_points_at_the_oom_killer(tmp_path):
    log = "E1203 api.py] failed (exitcode: -9) local_rank: 1\n" + SUMMARY
    lines = summary.failed_lines(tmp_path, 1, log, joblog.failed_ranks(log))
    assert "(killed by SIGKILL), root cause" in lines[-4] and "OOM killer" in lines[-2]
