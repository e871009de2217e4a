"""`python -m rocmft.serve.repl [--verbose] -- <LLaMA-Factory inference args>`: the interactive `make chat`.

LLaMA-Factory's own chat loop (`llamafactory-cli chat`: chat/chat_model.py run_chat) on its ChatModel, with two
differences. What the libraries log while the model loads and answers (hundreds of lines of config and INFO)
goes to a temporary file only you can read, removed at the end, not to the terminal; `--verbose` (VERBOSE=1)
shows it, and a failure prints its last lines. And the end of input (Ctrl-D, the end of a piped file) or Ctrl-C
at the prompt ends the chat with exit 0: run_chat lets input()'s EOFError escape as a traceback. `clear` forgets
the conversation and `exit` ends it, as in LLaMA-Factory's. Runs where the model runs (this venv, or the arch's
image with the checkout's src/ on PYTHONPATH, as serve/ask.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

TAIL_LINES = 30


class QuietLog:
    """What the libraries print, into a private temporary file: file descriptor 2 for the whole chat (C extensions
    and threads write there too), descriptor 1 while the model loads (some of them print), and LLaMA-Factory's own
    log handler, which writes to stdout (extras/logging.py), pointed at stderr. `verbose`: all left alone."""

    def __init__(self, verbose: bool):
        self.file = None if verbose else tempfile.TemporaryFile()  # unlinked at once: nobody else can open it
        self.saved: dict[int, int] = {}

    def hide(self, fd: int) -> None:
        if self.file is not None and fd not in self.saved:
            (sys.stdout if fd == 1 else sys.stderr).flush()
            self.saved[fd] = os.dup(fd)
            os.dup2(self.file.fileno(), fd)

    def show(self, fd: int) -> None:
        if fd in self.saved:
            (sys.stdout if fd == 1 else sys.stderr).flush()
            os.dup2(self.saved[fd], fd)
            os.close(self.saved.pop(fd))

    def library_log_to_stderr(self) -> None:
        import logging

        if self.file is None:
            return
        for handler in logging.getLogger("llamafactory").handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
                handler.setStream(sys.stderr)

    def __enter__(self) -> QuietLog:
        self.hide(2)
        self.hide(1)
        return self

    def __exit__(self, *exc) -> None:
        self.show(1)
        self.show(2)

    def tail(self) -> list[str]:
        if self.file is None:
            return []
        self.file.seek(0)
        return self.file.read().decode("utf-8", "replace").splitlines()[-TAIL_LINES:]


def converse(model, read=input, write=print) -> None:
    """The loop: until `exit`, the end of input or Ctrl-C at the prompt."""
    messages: list[dict[str, str]] = []
    while True:
        try:
            query = read("\nUser: ")
        except (EOFError, KeyboardInterrupt):
            write("")
            return
        if query.strip() == "exit":
            return
        if query.strip() == "clear":
            messages = []
            write("History has been removed.")
            continue
        messages.append({"role": "user", "content": query})
        write("Assistant: ", end="", flush=True)
        response = ""
        try:
            for piece in model.stream_chat(messages):
                write(piece, end="", flush=True)
                response += piece
        except KeyboardInterrupt:  # Ctrl-C stops this answer, not the chat
            write(" [stopped]", end="")
        write("")
        messages.append({"role": "assistant", "content": response})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocmft.serve.repl")
    parser.add_argument("--verbose", action="store_true", help="show the libraries' log on the terminal")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then LLaMA-Factory's inference arguments")
    ns = parser.parse_args(argv)
    lf_args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    log = QuietLog(ns.verbose)
    try:
        with log:
            from llamafactory.chat import ChatModel

            model = ChatModel(lf_args)
            log.library_log_to_stderr()
            log.show(1)
            print("[rocmft] type a message; `clear` forgets the conversation, `exit` or Ctrl-D ends the chat",
                  flush=True)
            converse(model)
    except KeyboardInterrupt:  # Ctrl-C while the model loads
        print("", flush=True)
        return 0
    except Exception as exc:  # noqa: BLE001 - any failure: its log's last lines, one line why, exit 1
        for line in log.tail():
            print(line, file=sys.stderr)
        print(f"[rocmft] chat FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
