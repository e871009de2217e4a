from rocmft.launch.progress import ProgressParser, failed_ranks


def test_steps_and_loss_from_trainer_output():
    p = ProgressParser()
    assert p.feed(" 25%|██▌       | 3/12 [00:01<00:03,  2.5it/s]") is None
    got = p.feed("{'loss': '6.671', 'grad_norm': '0.7884', 'learning_rate': '0.005', 'epoch': '0.02703'}\n")
    assert got.step == 3 and got.total == 12 and got.loss == 6.671 and got.line().startswith("step 3/12, loss 6.6710")


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
    assert failed_ranks(SUMMARY) == [
        "rank 1 (local_rank 1) on localhost: exit code -9 (killed by SIGKILL), root cause",
        "rank 0 (local_rank 0) on localhost: exit code -15 (killed by SIGTERM)",
    ]
    assert failed_ranks("no summary here") == []


def test_echo_never_splits_a_line_or_a_character_with_its_status_line():
    import io

    from rocmft.launch.progress import Echo

    class Out(io.StringIO):
        def __init__(self):
            super().__init__()
            self.buffer = io.BytesIO()

        def write(self, text):  # status lines go through print(): keep both streams in one order
            self.buffer.write(text.encode())
            return len(text)

    out = Out()
    echo = Echo(out)
    text = "{'loss': '1.5', 'grad_norm': '0.5'} naïve\n".encode()
    cut = text.index("ï".encode()) + 1  # inside the two bytes of ï
    echo.feed(text[:cut])
    echo.feed(text[cut:] + b"tail without newline")
    echo.flush()
    got = out.buffer.getvalue().decode()
    assert got == "{'loss': '1.5', 'grad_norm': '0.5'} naïve\n[rocmft] loss 1.5000, grad_norm 0.5\ntail without newline"
