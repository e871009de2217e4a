"""Where the stack checks run (validate/where.py): the choice per runtime and the exact container/Apptainer
invocation, as data (the real container run is tests/docker/test_validate_in_image.py)."""

from __future__ import annotations

from pathlib import Path

from rocmft.hardware import arches
from rocmft.io.problems import Problem
from rocmft.validate import request as req
from rocmft.validate import where


def test_container_request_is_read_only_offline_and_runs_this_checkouts_code():
    kw = where.container_request("sha256:abc", Path("/home/u/rocmft"), Path("/home/u/rocmft/.cache/validate/k.json"), 1000, 1000)
    assert kw["volumes"] == {"/home/u/rocmft": {"bind": "/home/u/rocmft", "mode": "ro"}}
    assert kw["working_dir"] == "/home/u/rocmft" and kw["user"] == "1000:1000"
    assert kw["network_disabled"] is True
    assert kw["environment"]["PYTHONPATH"] == "/home/u/rocmft/src"
    assert kw["environment"]["ROCMFT_SKIP_GPU_CHECK"] == "1"  # no devices: the entrypoint's GPU checks would fail
    assert kw["command"] == ["python", "-m", "rocmft.validate.request", "/home/u/rocmft/.cache/validate/k.json"]
    assert "devices" not in kw
    assert kw["labels"] == {"ai.rocmft.role": "validate", "ai.rocmft.project": "/home/u/rocmft"}  # whose, in `docker ps`


def test_apptainer_argv_binds_the_project_read_only():
    argv = where.apptainer_argv("/p/rocmft-gfx942.sif", Path("/p"), Path("/p/.cache/validate/k.json"))
    assert argv[:2] == ["apptainer", "exec"] and "--rocm" not in argv
    assert argv[argv.index("--bind") + 1] == "/p:/p:ro"
    assert argv[-4:] == ["python", "-m", "rocmft.validate.request", "/p/.cache/validate/k.json"]


def test_slurm_choices_say_why_when_the_checks_cannot_run(tmp_path, monkeypatch):
    gfx942 = arches.get("gfx942")
    assert where.for_slurm(gfx942, "none", None, None).kind == "venv"
    missing = where.for_slurm(gfx942, "apptainer", str(tmp_path / "x.sif"), None)
    assert missing.kind == "none" and "no Apptainer image at" in missing.reason
    sif = tmp_path / "x.sif"
    sif.write_bytes(b"sif")
    monkeypatch.setenv("PATH", str(tmp_path))  # no apptainer on this PATH
    no_tool = where.for_slurm(gfx942, "apptainer", str(sif), None)
    assert no_tool.kind == "none" and "apptainer is not installed" in no_tool.reason


def test_checks_that_could_not_run_are_a_warning_never_silence():
    problems = where.run(where.nowhere("no image here"), {}, Path("."), "k")
    assert [p.severity for p in problems] == ["warning"]
    assert problems[0].message.startswith(where.NOT_RUN) and "no image here" in problems[0].message


def test_answer_round_trips_and_a_dead_checker_is_an_error():
    problems = [Problem("f.yaml", "lora_rankk", "unknown to LLaMA-Factory", "did you mean `lora_rank`?")]
    output = "INFO noise\n" + req.answer(problems) + "\nmore noise\n"
    assert req.parse_answer(output) == problems
    dead = where._answer(where.in_image("rocmft:cpu", "sha256:" + "a" * 64), "Traceback ...\nImportError: x", 1)
    assert dead[0].severity == "error" and "did not answer (exit 1)" in dead[0].message


def test_default_runtime_follows_the_arch():
    assert where.default_runtime(arches.get("cpu")) == "local"
    assert where.default_runtime(arches.get("gfx942")) == "docker"
