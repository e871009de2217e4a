"""Make hands every user variable to the CLI byte for byte and never runs one as a command.

Every target `make help` lists runs for real with a hostile value in every variable the Makefiles declare, with
the argv recorder of conftest.py at the end (the exact argv and environment make hands the CLI). The last tests
run the real CLI.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.unit.cli.conftest import run_make

MAKEFILES = [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]
TEXT = "\n".join(p.read_text() for p in MAKEFILES)
# Switches are read by make and become a fixed flag; a hostile value turns them off, it never reaches the CLI.
SWITCHES = set(re.findall(r"\$\(call is_set,\$\((\w+)\)\)", TEXT)) | set(re.findall(r"\$\(filter 0 no false,\$\((\w+)\)\)", TEXT))
# Everything a user sets: `NAME ?=` (not the *_FLAGS the Makefiles build), the command-line-only ones, and the
# one the CLI reads from the environment.
USER_VARS = sorted({v for v in re.findall(r"^([A-Z][A-Z0-9_]*)\s*\?=", TEXT, re.MULTILINE) if not v.endswith("_FLAGS")}
                   | set(re.findall(r"\$\(call from_cmdline,(\w+)\)", TEXT)) | {"VERBOSE"})
LISTS = {"FILES"}  # words: each file one argument
STDIN = {"PROMPT"}  # on the CLI's stdin, never in an argv (`ps` shows every command line to every user)


def payload(name: str, side: Path) -> str:
    """Quotes, `;`, `$HOME`, `$(...)`, make's own `$(shell ...)`, backticks, a tab, a newline, `%`, a comma,
    non-ASCII and a trailing backslash, each with a side effect if anything ran it."""
    return (f"<{name}>x=1' ; touch {side} ; echo '\"$HOME\" $(touch {side}) `touch {side}` "
            f"$(shell touch {side}) ${{HOME}}\t%s, é #\nsecond line; touch {side} \\")


def targets(env) -> list[str]:
    out = run_make("help", env=env).stdout
    return [m.group(1) for m in re.finditer(r"^  ([\w.-]+) ", out, re.MULTILINE)]


def test_every_target_hands_every_variable_over_byte_for_byte(job_env, recorder, tmp_path):
    side = tmp_path / "PWNED"
    values = {name: payload(name, side) for name in USER_VARS if name not in LISTS}
    values["FILES"] = f"<FILES>a.yaml it's.json $(shell touch {side}) `touch {side}`"
    arrived: dict[str, set[str]] = {name: set() for name in values}
    names = targets(job_env)
    assert len(names) > 20 and "train" in names
    for target in names:
        log_before = len(recorder.calls())
        proc = recorder.make(target, *(f"{k}={v}" for k, v in values.items()), env=job_env)
        assert not side.exists(), f"make {target}: a value ran as a command"
        assert proc.returncode == 0, f"make {target}: {proc.stderr}"
        for call in recorder.calls()[log_before:]:
            for name, value in values.items():
                assert call["env"].get(name) == value, f"make {target}: {name} reached the environment changed"
                if name in LISTS:
                    words = [arg for arg in call["argv"] if arg in value.split()]
                    assert words in ([], value.split()), f"make {target}: {name} arrived as {call['argv']}"
                    arrived[name].update([target] if words else [])
                    continue
                if name in STDIN:
                    assert not any(f"<{name}>" in arg for arg in call["argv"]), f"make {target}: {name} in argv"
                    if call["stdin"] == value:
                        arrived[name].add(target)
                    continue
                for arg in call["argv"]:
                    if f"<{name}>" in arg:  # the value itself or `--flag=VALUE`, exactly
                        assert arg == value or arg.startswith("--") and arg.split("=", 1)[-1] == value, \
                            f"make {target}: {name} arrived as {arg!r}"
                        arrived[name].add(target)
    never = sorted(name for name, where in arrived.items() if not where and name not in SWITCHES | {"VERBOSE"})
    assert not never, f"never handed to the CLI by any target: {never}"
    # the variables the issue names, where a user expects them
    for name, target in [("SET", "train"), ("SET", "show"), ("SET", "chat"), ("TO", "copy"), ("FILES", "validate"),
                         ("RUN", "export"), ("RUN", "serve"), ("PARTITION", "train"), ("ACCOUNT", "train"),
                         ("SBATCH_ARGS", "train"), ("PROMPT", "chat"), ("HOST", "serve"), ("IN", "data"),
                         ("FILE", "import"), ("DS", "import"), ("CMD", "import"), ("GPUS_PER_NODE", "import"),
                         ("TO", "import"), ("ARCH", "import")]:
        assert target in arrived[name], f"make {target} does not pass {name}"


def test_a_value_from_the_environment_is_raw_text_too(job_env, recorder, tmp_path):
    side = tmp_path / "PWNED"
    env = {**job_env, "SET": f"x=$(shell touch {side}) $HOME"}
    proc = recorder.make("show", env=env)
    assert proc.returncode == 0 and not side.exists()
    assert recorder.calls()[-1]["argv"][-1] == f"--set=x=$(shell touch {side}) $HOME"


def test_an_empty_variable_adds_no_argument(job_env, recorder):
    recorder.make("copy", "RECIPE=tiny-cpu", env=job_env)
    recorder.make("image", env=job_env)
    assert [c["argv"] for c in recorder.calls()] == [["copy", "tiny-cpu"], ["image"]]


@pytest.mark.parametrize("name", ["ROCMFT_API_KEY", "API_KEY", "HF_TOKEN", "WANDB_API_KEY", "MY_SECRET_THING", "DB_PASSWORD"])
def test_a_secret_on_makes_command_line_is_refused(job_env, recorder, name):
    proc = recorder.make("serve", f"{name}=s3cr3t-value", env=job_env)
    assert proc.returncode == 2 and recorder.calls() == []
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"export {name}=..." in lines[0] and "s3cr3t-value" not in lines[0]


def test_a_secret_from_the_environment_and_a_kubernetes_secret_name_are_fine(job_env, recorder):
    proc = recorder.make("train", "RUNTIME=k8s", "K8S_SECRET=hf-token", env={**job_env, "API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    assert "--k8s-secret=hf-token" in recorder.calls()[-1]["argv"]


# ---------------------------------------------------------------- the real CLI at the end

def shown(proc) -> dict:
    """The LLaMA-Factory block of `make show`'s resolved recipe."""
    return yaml.safe_load(proc.stdout)["llamafactory"]




def test_the_quote_payload_reaches_the_recipe_as_data(job_env, tmp_path):
    side = tmp_path / "PWNED"
    proc = run_make("show", "RECIPE=tiny-cpu", f"SET=x=1' ; touch {side} ; echo '", env=job_env)
    assert proc.returncode == 0, proc.stderr
    assert shown(proc)["x"] == f"1' ; touch {side} ; echo '" and not side.exists()
    proc = run_make("show", "SET=default_system='$HOME $(id) `id` \\'", env=job_env)
    assert shown(proc)["default_system"] == "$HOME $(id) `id` \\", proc.stderr


def test_an_apostrophe_in_a_value_just_works(job_env):
    proc = run_make("show", "SET=default_system=You're helpful learning_rate=5e-5", env=job_env)
    assert proc.returncode == 0, proc.stderr
    assert shown(proc)["default_system"] == "You're helpful" and shown(proc)["learning_rate"] == 5e-5


def test_a_train_with_the_payload_runs_nothing(job_env, tmp_path):
    """`make train` runs the CLI twice (which stack it needs, then the job): the issue's payload ran in both.
    The recipe is unknown, so the real CLI stops at its first check; the payload has been through both lines."""
    side = tmp_path / "PWNED"
    proc = run_make("train", "RECIPE=nope", f"SET=x=1' ; touch {side} ; echo '", f"PARTITION=debug; touch {side}",
                     env=job_env)
    assert not side.exists(), proc.stdout + proc.stderr
    assert proc.returncode == 2 and "unknown recipe `nope`" in proc.stderr
