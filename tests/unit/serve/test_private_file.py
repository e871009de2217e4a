"""A prompt or an eval spec reaches its job in a private file, never in argv (every local user's `ps` shows
every command line): the file itself (0600, in a fresh 0700 folder, exact text, gone after), and, as data, the
argv and container the CLI builds with it. The real child (`make chat PROMPT=`, `make eval`) is watched in
/proc by tests/train/test_chat_serve.py and tests/train/test_eval_cpu.py."""

from __future__ import annotations

import json
import stat

import pytest

from rocmft.hardware import arches
from rocmft.io import paths
from rocmft.run import target
from rocmft.serve import docker, plan, private_file
from tests.unit.launch.test_docker_spec import laptop
from tests.unit.run.conftest import make_run

TEXT = "my private question: é\n\tsecond line, 'quoted' $HOME\n"


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_file_is_the_users_alone_holds_the_text_exactly_and_is_gone_after():
    with private_file.holding(TEXT) as path:
        assert path.is_absolute() and path.parent.parent == paths.cache_dir() / "serve"
        assert mode(path) == 0o600 and mode(path.parent) == 0o700 and mode(path.parent.parent) == 0o700
        assert private_file.read(str(path)) == TEXT
        with private_file.holding(TEXT) as other:
            assert other.parent != path.parent  # one folder per job: two chats at once never share one
    assert not path.exists() and not path.parent.exists()


def test_the_file_is_removed_when_the_job_fails():
    with pytest.raises(RuntimeError), private_file.holding(TEXT) as path:
        raise RuntimeError("the job failed")
    assert not path.parent.exists()


def test_the_ask_argv_names_the_file_not_the_prompt_and_the_container_sees_it(runs_dir):
    """In a container the checkout is mounted read-only at its own path, the working directory: the file the
    host wrote is at the same path in there, and no other mount covers it."""
    t = target.load(make_run(runs_dir, "r1"))
    with private_file.holding(TEXT) as path:
        one = plan.chat(t, {}, "docker", prompt_file=str(path))
        assert not any("private question" in arg for arg in one.argv)
        facts = laptop(runs_dir=str(runs_dir), project_root=str(paths.root()), hf_home=str(paths.cache_dir() / "hf"))
        spec = docker.container(one, arches.table()["cpu"], facts, image="rocmft:cpu", caller_env={})
        assert f"--prompt-file={path}" in spec.command and "private question" not in spec.to_json()
        covering = [m for m in spec.mounts if str(path).startswith(m.source.rstrip("/") + "/")]
        assert [(m.source, m.target, m.read_only) for m in covering] == [(str(paths.root()), str(paths.root()), True)]
