"""`make export FORMAT=gguf`'s bad input: one line each, exit 2, nothing written (issue 46). The conversion
itself runs on the demo run in tests/train/test_publish_cpu.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmft.publish import gguf
from tests.conftest import rocmft
from tests.unit.publish.runs import make_run, snapshot


def export(env, run: Path, *args: str):
    return rocmft("export", str(run), *args, env=env)


def refused(proc) -> list[str]:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), proc.stderr
    return lines


@pytest.mark.parametrize("args, key, says", [
    (("--format", "ggml"), "FORMAT", "unknown `ggml`"),
    (("--format", "gguf", "--outtype", "f8"), "OUTTYPE", "unknown `f8`"),
    (("--format", "gguf", "--outtype", "Q4_K_M"), "OUTTYPE", "q4_k_m is a k-quant/i-quant that only llama.cpp's `llama-quantize` makes"),
    (("--outtype", "q8_0"), "OUTTYPE", "is for FORMAT=gguf"),
])
def test_an_unknown_format_or_outtype_is_one_line(job_env, tmp_path, args, key, says):
    run = make_run(tmp_path / "runs")
    before = snapshot(tmp_path)
    [line] = refused(export(job_env, run, *args))
    assert line.startswith(f"error: {key}: {says}"), line
    assert snapshot(tmp_path) == before


def test_a_k_quant_names_the_llama_quantize_command(job_env, tmp_path):
    run = make_run(tmp_path / "runs")
    [line] = refused(export(job_env, run, "--format", "gguf", "--outtype", "q4_k_m"))
    assert f"llama-quantize {run}/gguf-f16/model.gguf {run}/gguf-f16/model-Q4_K_M.gguf Q4_K_M" in line, line


@pytest.mark.parametrize("state", ["interrupted", "failed", "running", "rendered", "diverged"])
def test_a_run_that_did_not_finish_is_refused(job_env, tmp_path, state):
    run = make_run(tmp_path / "runs", state=state)
    before = snapshot(tmp_path)
    [line] = refused(export(job_env, run, "--format", "gguf"))
    assert f"error: RUN: {run} did not finish (status: {state})" in line
    assert snapshot(tmp_path) == before


def test_a_qlora_run_not_merged_is_refused_with_the_merge_to_run_first(job_env, tmp_path):
    run = make_run(tmp_path / "runs", quantization_bit=4, merged=False)
    before = snapshot(tmp_path)
    [line] = refused(export(job_env, run, "--format", "gguf"))
    assert "QLoRA run (4-bit base) not merged yet" in line and f"`make export RUN={run}` merges it" in line, line
    assert snapshot(tmp_path) == before


def test_a_family_the_converter_lacks_is_refused(job_env, tmp_path):
    run = make_run(tmp_path / "runs", architecture="RocmftImaginaryForCausalLM")
    before = snapshot(tmp_path)
    [line] = refused(export(job_env, run, "--format", "gguf"))
    assert "llama.cpp's converter has no RocmftImaginaryForCausalLM" in line, line
    assert snapshot(tmp_path) == before


def test_the_families_are_the_converters_own_table():
    known = gguf.supported_architectures()
    assert known and {"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM"} <= known
    assert "RocmftImaginaryForCausalLM" not in known


def test_an_existing_gguf_is_not_overwritten(job_env, tmp_path):
    run = make_run(tmp_path / "runs")
    (run / "gguf-f16").mkdir()
    (run / "gguf-f16" / "model.gguf").write_bytes(b"mine")
    [line] = refused(export(job_env, run, "--format", "gguf"))
    assert "gguf-f16 exists: not overwritten" in line
    assert (run / "gguf-f16" / "model.gguf").read_bytes() == b"mine"


def test_every_problem_at_once(job_env, tmp_path):
    run = make_run(tmp_path / "runs", state="failed", architecture="RocmftImaginaryForCausalLM")
    lines = refused(export(job_env, run, "--format", "gguf", "--outtype", "q4_k_m"))
    assert [line.split(":")[1].strip() for line in lines] == ["RUN", "OUTTYPE", "RUN"], lines


def test_the_ollama_name_is_one_ollama_takes():
    assert gguf.ollama_name("Tiny-CPU-Demo_2026 12:05") == "tiny-cpu-demo_2026-12-05"
