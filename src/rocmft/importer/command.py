"""The shell line a user ran their config with (`CMD=`), read as data: its environment, how many processes
and nodes it started, the config file it named and the LLaMA-Factory arguments it added.

Nothing here runs anything: the line is split like a shell would (shlex) and each command is recognised by
its program - `llamafactory-cli`/`lmf` (LLaMA-Factory's CLI: `train x.yaml key=value` or `train --key value`),
`torchrun`/`python -m torch.distributed.run` and `deepspeed` (launchers and their process counts), and the
habits of the posts (`llama-cli`, llama.cpp's binary; `src/train.py --config_file`, not LLaMA-Factory's
interface), each said as a problem with what to use instead.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import yaml

from ..io.problems import Problem
from ..io.yamlio import parse_yaml

LF_PROGRAMS = ("llamafactory-cli", "lmf")
# torchrun's and deepspeed's options that take a value; the first other word is the script.
LAUNCHER_VALUE_OPTIONS = {
    "--nproc_per_node", "--nproc-per-node", "--nnodes", "--node_rank", "--node-rank", "--master_addr",
    "--master-addr", "--master_port", "--master-port", "--rdzv_backend", "--rdzv-backend", "--rdzv_endpoint",
    "--rdzv-endpoint", "--rdzv_id", "--rdzv-id", "--max_restarts", "--max-restarts", "--num_gpus", "--num_nodes",
    "--hostfile", "--include", "--exclude", "--log_dir", "--log-dir",
}


@dataclass
class Launch:
    env: dict[str, str] = field(default_factory=dict)  # assignments and exports, in order
    nproc_per_node: int | None = None
    nnodes: int | None = None
    config_file: str = ""  # the YAML the line trains
    lf_args: dict[str, Any] = field(default_factory=dict)  # arguments the line adds to (or puts in place of) the YAML
    problems: list[Problem] = field(default_factory=list)
    said: list[str] = field(default_factory=list)  # the options the process counts came from, for the report
    ignored: list[str] = field(default_factory=list)  # commands that are not a launch (cd, source, echo ...)


def _commands(line: str) -> list[list[str]]:
    """Each simple command's words: lines (a backslash-newline joins two), then `;`, `&&`, `|` between commands;
    `# comments` dropped, quotes removed, as a shell splits them. ValueError for an unclosed quote."""
    commands: list[list[str]] = []
    for text in line.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        current: list[str] = []
        for word in lexer:
            if set(word) <= set(";&|"):
                commands.append(current)
                current = []
            else:
                current.append(word)
        commands.append(current)
    return [c for c in commands if c]


def _is_assignment(word: str) -> bool:
    name, sep, _ = word.partition("=")
    return bool(sep) and name.replace("_", "a").isalnum() and not name[0].isdigit()


def _value(text: str) -> Any:
    try:
        return parse_yaml(text) if text.strip() else ""
    except yaml.YAMLError:
        return text


def _int(text: str, what: str, launch: Launch) -> int | None:
    try:
        number = int(text)
    except ValueError:
        launch.problems.append(Problem("CMD", what, f"`{text}` is not a whole number", severity="warning"))
        return None
    return number


def _flag_args(words: list[str], launch: Launch, source: str) -> None:
    """LLaMA-Factory arguments as `--key value`, a bare `--flag` being true (HfArgumentParser's form), or
    `key=value` after a YAML (OmegaConf's override form)."""
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            key, sep, inline = word[2:].partition("=")
            if sep:
                value: Any = _value(inline)
            elif i + 1 < len(words) and not words[i + 1].startswith("--"):
                value = _value(words[i + 1])
                i += 1
            else:
                value = True
            if key in ("config_file", "config"):
                launch.config_file = str(value)
            else:
                launch.lf_args[key.replace("-", "_")] = value
        elif "=" in word:
            key, _, raw = word.partition("=")
            launch.lf_args[key] = _value(raw)
        elif word.endswith((".yaml", ".yml", ".json")) and not launch.config_file:
            launch.config_file = word
        else:
            launch.problems.append(Problem("CMD", "", f"`{word}` after {source} was not understood: ignored",
                                           severity="warning"))
        i += 1


def _launcher_options(words: list[str], launch: Launch) -> list[str]:
    """torchrun's/deepspeed's own options (process and node counts); returns the script and its arguments."""
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("-"):
            return words[i:]
        name, sep, inline = word.partition("=")
        value = inline if sep else (words[i + 1] if i + 1 < len(words) and name in LAUNCHER_VALUE_OPTIONS else "")
        if not sep and name in LAUNCHER_VALUE_OPTIONS:
            i += 1
        if name in ("--nproc_per_node", "--nproc-per-node", "--num_gpus"):
            launch.nproc_per_node = _int(value, name, launch)
            launch.said.append(f"{name} {value}")
        elif name in ("--nnodes", "--num_nodes"):
            launch.nnodes = _int(value.split(":")[-1], name, launch)
            launch.said.append(f"{name} {value}")
        i += 1
    return []


def _script(words: list[str], launch: Launch) -> None:
    """What a launcher runs: LLaMA-Factory's launcher/train entry with a YAML, or the posts' `src/train.py`."""
    if not words:
        return
    script, rest = words[0], words[1:]
    name = PurePath(script).name
    if name == "train.py" or "--config_file" in " ".join(rest):
        launch.problems.append(Problem("CMD", script, "`torchrun ... src/train.py --config_file x.yaml` is not "
                                       "LLaMA-Factory's interface",
                                       "it is `llamafactory-cli train x.yaml` with FORCE_TORCHRUN=1 NPROC_PER_NODE=8; "
                                       "rocmft's launcher starts torchrun on LLaMA-Factory's launcher for you"))
    _flag_args(rest, launch, script)


def _command(words: list[str], launch: Launch) -> None:
    while words and _is_assignment(words[0]):  # `A=1 B=2 program ...`
        name, _, value = words.pop(0).partition("=")
        launch.env[name] = value
    if not words:
        return
    program, args = PurePath(words[0]).name, words[1:]
    if program == "export":
        for word in args:
            if _is_assignment(word):
                name, _, value = word.partition("=")
                launch.env[name] = value
        return
    if program == "env":
        _command(args, launch)
        return
    if program in ("llama-cli", *LF_PROGRAMS):
        if program == "llama-cli":
            launch.problems.append(Problem("CMD", "llama-cli", "is llama.cpp's binary, not LLaMA-Factory's",
                                           "LLaMA-Factory's CLI is `llamafactory-cli` (alias `lmf`); rocmft runs it for you"))
        if args and args[0] == "train":
            args = args[1:]
        elif args:
            launch.problems.append(Problem("CMD", program, f"`{program} {args[0]}` does not train",
                                           f"`{program} train x.yaml`", severity="warning"))
            return
        _flag_args(args, launch, f"{program} train")
        return
    if program in ("torchrun", "deepspeed") or (program.startswith("python") and args[:2] == ["-m", "torch.distributed.run"]):
        if program.startswith("python"):
            args = args[2:]
        _script(_launcher_options(args, launch), launch)
        return
    launch.ignored.append(" ".join(words))


def parse(line: str | None) -> Launch:
    launch = Launch()
    if not line or not line.strip():
        return launch
    try:
        commands = _commands(line)
    except ValueError as exc:  # an unclosed quote
        launch.problems.append(Problem("CMD", "", f"not a shell line: {exc}", "quote CMD='...' as you would type it"))
        return launch
    for command in commands:
        _command(command, launch)
    for name in ("NPROC_PER_NODE", "NNODES"):
        if name in launch.env:
            number = _int(launch.env[name], name, launch)
            if name == "NPROC_PER_NODE" and launch.nproc_per_node is None:
                launch.nproc_per_node = number
            if name == "NNODES" and launch.nnodes is None:
                launch.nnodes = number
    return launch
