"""The guard in tests/conftest.py, tested itself: a test that leaves an environment variable or a signal disposition
changed fails (named, and put back for the next test), one that changes them through monkeypatch does not, and a
session fixture that leaks fails the run at its end. pytest's own pytester runs a small suite with tests/conftest.py
as its plugin, in a process of its own (importing that conftest marks the process's environment)."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT

pytest_plugins = ["pytester"]

SUITE = '''
import os
import signal

import pytest


def test_leaks_a_variable():
    os.environ["ROCMFT_LEAKED_BY_A_TEST"] = "1"


def test_leaks_a_signal_disposition():
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


def test_blocks_a_signal():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])


def test_the_next_test_gets_the_process_back():
    assert "ROCMFT_LEAKED_BY_A_TEST" not in os.environ
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL
    assert signal.SIGUSR2 not in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_monkeypatch_puts_it_back_itself(monkeypatch):
    monkeypatch.setenv("ROCMFT_SET_THROUGH_MONKEYPATCH", "1")
    monkeypatch.setattr(signal, "SIGUSR1", signal.SIGUSR1)
'''

SESSION_LEAK = '''
import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def leaks_for_the_session():
    os.environ["ROCMFT_LEAKED_BY_A_SESSION_FIXTURE"] = "1"
    yield


def test_passes():
    pass
'''


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # `tests.conftest` importable in the inner run
    # its end-of-run check asks no daemon: containers of this checkout are the outer run's business
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    pytester.makeconftest("pytest_plugins = ['tests.conftest']\n")
    return pytester


def test_a_test_that_leaks_fails_and_is_put_back(suite):
    suite.makepyfile(test_inner=SUITE)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=5, errors=3)  # each leak: an error at its teardown (the test body passed)
    out = result.stdout.str()
    assert "test_leaks_a_variable left the test process changed" in out
    assert "os.environ['ROCMFT_LEAKED_BY_A_TEST']: None -> '1'" in out
    assert "signal SIGUSR1: SIG_DFL -> SIG_IGN" in out
    assert "signal mask: blocked none -> SIGUSR2" in out
    assert "ROCMFT_SET_THROUGH_MONKEYPATCH" not in out


def test_a_session_fixture_that_leaks_fails_the_run(suite):
    suite.makepyfile(test_inner=SESSION_LEAK)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "this test run's end-of-run checks failed" in out
    assert "os.environ['ROCMFT_LEAKED_BY_A_SESSION_FIXTURE']: None -> '1'" in out
