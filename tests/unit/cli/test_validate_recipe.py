"""`make validate RECIPE=x SET=...` validates that recipe with those overrides, for real (LLaMA-Factory's parser in
this venv); without them, every shipped recipe; FILES= still takes any file."""

from __future__ import annotations

from tests.unit.cli.conftest import run_make


def test_the_recipe_with_its_overrides_is_what_is_validated(job_env):
    proc = run_make("validate", "RECIPE=tiny-cpu", "SET=lora_rnk=8 learning_rate=1e-4", env=job_env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "lora_rnk: unknown to LLaMA-Factory (did you mean `lora_rank`?)" in lines[0]
    assert lines[-1] == "FAIL  tiny-cpu with lora_rnk=8 learning_rate=1e-4  (1 problem)"
    assert not any("tiny-cpu-dpo" in line for line in lines)  # one recipe, not all of them
    proc = run_make("validate", "RECIPE=tiny-cpu", "SET=learning_rate=1e-4", env=job_env)
    assert proc.returncode == 0 and proc.stdout.splitlines() == ["ok    tiny-cpu with learning_rate=1e-4"], proc.stdout


def test_without_a_recipe_every_shipped_one_and_set_alone_needs_one(recorder, job_env):
    recorder.make("validate", env=job_env)
    recorder.make("validate", "SET=a=1", env=job_env)
    recorder.make("validate", "FILES=x.yaml", "SET=a=1", env=job_env)
    argvs = [c["argv"] for c in recorder.calls() if c["argv"][:1] == ["validate"]]
    assert argvs == [["validate", "--all"], ["validate", "--recipe=tiny-cpu", "--set=a=1"], ["validate", "x.yaml"]]
