"""The Make targets the README shows, run as a user runs them (setup is already done: it is instant)."""

import re
import subprocess

from tests.conftest import ROOT


def make(*args, env):
    return subprocess.run(["make", "-s", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_help_lists_every_target_with_one_line(job_env):
    out = make("help", env=job_env).stdout
    targets = set()
    for mk in [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]:
        for line in mk.read_text().splitlines():
            rule = re.match(r"^([\w.-]+(?: [\w.-]+)*):(?!=)(.*)$", line)
            if rule and not line.startswith(".") and not re.search(r"export |[:?+]?=", rule.group(2).split("##")[0]):
                targets.update(rule.group(1).split())
    for target in targets:
        assert f" {target} " in out, f"`make help` does not list {target}"


def test_help_is_grouped_by_workflow_and_a_new_target_slots_in_by_its_tag(job_env, tmp_path):
    """Groups in workflow order, one line per target under the group its own `## [group]` tag names; a target
    another Makefile adds joins its group by the tag alone, one without a tag is listed under "other"."""
    extra = tmp_path / "extra.mk"
    extra.write_text("new-data: ## [data] a target added later (X=)\n\t@true\nuntagged: ## no tag here\n\t@true\n")
    out = subprocess.run(["make", "-s", "-f", "Makefile", "-f", str(extra), "help"], cwd=ROOT, env=job_env,
                         capture_output=True, text=True, timeout=60).stdout
    headers = [line.split(":")[0] for line in out.splitlines() if line and not line.startswith(" ")]
    assert headers == ["start", "data", "train", "try", "GPU box", "cluster", "develop", "other"], headers
    sections = {h.split(":")[0]: body for h, body in re.findall(r"^(\S[^\n]*)\n((?:  [^\n]*\n)+)", out, re.M)}
    assert "  new-data         a target added later (X=)" in sections["data"].splitlines()
    assert "  untagged         no tag here" in sections["other"].splitlines()
    assert "  train " in sections["train"] and "  chat " in sections["try"] and "  doctor " in sections["GPU box"]
    assert "  sif " in sections["cluster"] and "[" not in "".join(line[:19] for line in out.splitlines())


def test_list_show_and_overrides(job_env):
    out = make("list", env=job_env).stdout
    assert "llama3-8b-z3" in out and "gfx942 x8" in out
    shown = make("show", "RECIPE=llama3-8b-z3", "SET=learning_rate=5e-5 nodes=2", env=job_env)
    assert shown.returncode == 0 and "learning_rate: 5.0e-05" in shown.stdout and "nodes: 2" in shown.stdout


def test_validate_every_shipped_recipe(job_env, tmp_path):
    """With an empty cache of its own, every recipe's verdict is LLaMA-Factory's and DeepSpeed's, not a
    cached one: one verdict recorded per recipe afterwards."""
    cache = tmp_path / "validated"
    proc = make("validate", env={**job_env, "ROCMFT_VALIDATION_CACHE": str(cache)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shipped = len(list((ROOT / "recipes").glob("*.yaml")))
    assert proc.stdout.count("ok  ") == shipped
    assert len(list(cache.iterdir())) == shipped


def test_render_through_make(job_env, tmp_path):
    proc = make("render", "RECIPE=llama3-8b-z3", "RUN_NAME=via-make", "SET=learning_rate=5e-5", env=job_env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "runs" / "via-make" / "ds_config.json").is_file()
    assert "learning_rate: 5.0e-05" in (tmp_path / "runs" / "via-make" / "train.yaml").read_text()


def test_bad_input_through_make_exits_non_zero(job_env):
    proc = make("render", "RECIPE=nope", env=job_env)
    assert proc.returncode != 0 and "unknown recipe `nope`" in proc.stderr


def test_format_reaches_export_and_data_only_as_the_user_set_it(job_env):
    """FORMAT is make data's (alpaca, sharegpt, ...) and make export's (gguf): both mk files declare it, and the one
    included first wins, so a default in one reached the other (mk/data.mk's `auto` made every plain make export
    hand over --format=auto: `error: FORMAT: unknown auto`). Each CLI keeps its own default."""
    def argv(*args):
        proc = subprocess.run(["make", "-n", "--no-print-directory", *args], cwd=ROOT, env=job_env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout.splitlines()[-1]
    assert "--format" not in argv("export", "RUN=r") and "--format" not in argv("data", "IN=x.jsonl", "NAME=y")
    assert "--format=$'gguf'" in argv("export", "RUN=r", "FORMAT=gguf")
    assert "--format=$'alpaca'" in argv("data", "IN=x.jsonl", "NAME=y", "FORMAT=alpaca")
