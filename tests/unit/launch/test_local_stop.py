"""RUNTIME=local's stop: the first Ctrl-C/SIGTERM asks the job to save (SIGTERM to its first process), a second
Ctrl-C kills the whole group at once, a second SIGTERM waits, and the grace period ends in SIGKILL.

The job here is a real process group (bash and a child) that traps SIGTERM the way the training ranks do; the
training itself is tests/train/test_faults_cpu.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
from rocmft.launch import local
from tests.conftest import wait_until

# A rank of its own session, as torchrun starts them: out of reach of a signal to the job's group.
JOB = 'trap "echo asked to save" TERM; setsid sleep 600 & echo "rank $!"; while :; do sleep 0.05; done'


def job() -> tuple[subprocess.Popen, int]:
    """The job and its rank's pid. The rank line is echoed after the trap is set: once read, bash traps SIGTERM."""
    proc = subprocess.Popen(["bash", "-c", JOB], start_new_session=True, stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline().split()[1])


def gone(proc: subprocess.Popen, within: float) -> bool:
    try:
        proc.wait(timeout=within)
        return True
    except subprocess.TimeoutExpired:
        return False


def stopper(proc, grace_s=60.0):
    s = local._Stopper(proc, grace_s)
    said: list[str] = []
    s.say = said.append
    return s, said


def alive(pid: int) -> bool:
    try:
        return "Z" not in open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False


def test_a_second_ctrl_c_kills_at_once_a_second_sigterm_waits():
    proc, rank = job()
    try:
        stop, said = stopper(proc)
        stop(signal.SIGINT, None)
        assert not gone(proc, 0.5)
        stop(signal.SIGTERM, None)
        assert not gone(proc, 0.5)
        stop(signal.SIGINT, None)
        assert gone(proc, 5) and proc.returncode == -signal.SIGKILL
        wait_until(lambda: not alive(rank), timeout=30, what="the rank in its own session killed too")
        assert proc.stdout.read().splitlines() == ["asked to save"]  # one SIGTERM, to the job's first process only
        wait_until(lambda: len(said) >= 3, timeout=30, what="the three messages (printed from a thread)")
        assert said[0].startswith("[rocmft] SIGINT: the job finishes its optimizer step and saves a checkpoint (up to 60 s")
        assert said[1].startswith("[rocmft] SIGTERM again: still waiting for the checkpoint")
        assert said[2].startswith("[rocmft] Ctrl-C again: stopped at once")
    finally:
        proc.kill()
        if alive(rank):
            os.kill(rank, signal.SIGKILL)


def test_the_grace_period_ends_in_sigkill():
    proc, rank = job()
    try:
        stop, _ = stopper(proc, grace_s=0.5)
        stop(signal.SIGTERM, None)
        assert gone(proc, 30) and proc.returncode == -signal.SIGKILL
        wait_until(lambda: not alive(rank), timeout=30, what="the rank in its own session killed too")
    finally:
        proc.kill()
        if alive(rank):
            os.kill(rank, signal.SIGKILL)
