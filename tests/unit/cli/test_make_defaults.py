"""Variables are shared by every mk file: one target's default must not reach another target's CLI. `make data`'s
FORMAT once defaulted to `auto` in mk/data.mk, and `make export` (whose FORMAT=gguf picks the export format) then
handed `--format=auto` to every plain export, which refused it."""

from __future__ import annotations


def test_no_target_gets_a_flag_its_user_did_not_set(recorder, job_env):
    recorder.make("export", "RUN=r1", env=job_env)
    recorder.make("data", "IN=a.jsonl", "NAME=b", env=job_env)
    recorder.make("export", "RUN=r1", "FORMAT=gguf", env=job_env)
    argvs = [c["argv"] for c in recorder.calls() if c["argv"][:1] in (["export"], ["data"])]
    assert argvs[0] == ["export", "r1"]
    assert not any(a.startswith("--format") for a in argvs[1])  # the CLI's own default (auto) applies
    assert argvs[2] == ["export", "r1", "--format=gguf"]
