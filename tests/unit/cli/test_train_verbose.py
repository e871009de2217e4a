"""VERBOSE=1 (make puts command-line variables in the environment) turns on `rocmft train --verbose`."""

import argparse

import pytest

from rocmft.cli import train


@pytest.mark.parametrize("value, expected", [("1", True), ("yes", True), ("", False), ("0", False)])
def test_verbose_follows_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("VERBOSE", value)
    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    assert parser.parse_args(["tiny-cpu"]).verbose is expected
    assert parser.parse_args(["tiny-cpu", "--verbose"]).verbose is True


def test_a_dumb_terminal_gets_plain_lines(monkeypatch):
    import io

    from rocmft.launch.terminal import Display

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("TERM", "dumb")
    assert Display(Tty()).live is False
    monkeypatch.setenv("TERM", "xterm")
    display = Display(Tty())
    assert display.live is True
    display.close()
