"""Notes `pipeline.prepare` hands the CLI: the first CPU-offload run compiles DeepSpeed's CPU Adam on the
run host (the image no longer ships one built for the build machine's CPU), which would look like a hang."""

from __future__ import annotations

from rocmft import pipeline


def notes(recipe: str) -> list[str]:
    prep = pipeline.prepare(recipe, validate=False, env={})
    return [p.line() for p in prep.messages if p.severity == "note"]


def test_cpu_offload_recipe_says_the_first_run_compiles_cpu_adam():
    assert any("compiles DeepSpeed's CPU Adam" in line for line in notes("qwen2.5-7b-z3-offload"))


def test_no_offload_no_such_note():
    assert not any("CPU Adam" in line for line in notes("llama3-8b-z3"))
