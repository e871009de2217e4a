"""Every bad input: a clear one-line-per-problem message, exit 2, and no run directory written."""

import pytest

from tests.conftest import rocmft

CASES = {
    "unknown recipe": (["render", "llama3-8b-z4"], "unknown recipe `llama3-8b-z4` (did you mean `llama3-8b-z3`?)"),
    "malformed override": (["render", "tiny-cpu", "--set", "lr"], "override must be key=value"),
    "unknown arch": (["render", "tiny-cpu", "--arch", "gfx999"], "unknown arch `gfx999`"),
    "too many gpus": (["render", "llama3-8b-z3", "gpus_per_node=9"], "a gfx942 node holds at most 8"),
    "bad nodes": (["render", "tiny-cpu", "--nodes", "0"], "NODES: must be a whole number >= 1"),
    "bf16 unsupported": (["render", "tiny-cpu", "precision=bf16"], "bf16 is not supported on cpu"),
    "posts' keys": (["render", "tiny-cpu", "gpu_ids=0"], "llamafactory.gpu_ids: not set in a recipe"),
    "missing model": (["render", "tiny-cpu", "model_name_or_path=models/nope"], "no model at `models/nope`"),
    "missing dataset": (["render", "tiny-cpu", "dataset=nope"], "dataset `nope` is not registered"),
    "hub model not cached, offline": (["train", "tiny-cpu", "--runtime", "local", "model_name_or_path=rocmft-test/absent"],
                                      "model `rocmft-test/absent` is neither a local model dir nor in the Hugging Face cache"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exit_2_and_nothing_written(case, job_env, tmp_path, tiny_model):
    argv, expected = CASES[case]
    proc = rocmft(*argv, env=job_env)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert all(line.startswith(("error: ", "warning: ", "note: ")) for line in proc.stderr.strip().splitlines())
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_typos_and_wrong_choices_all_reported_at_once_by_llamafactory(job_env, tmp_path, tiny_model):
    proc = rocmft("render", "tiny-cpu", "lerning_rate=1", "flash_attn=off", "finetuning_type=lorra",
                  "infer_backend=pt", env=job_env)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 4, proc.stderr
    assert "did you mean `learning_rate`?" in proc.stderr and "did you mean `lora`?" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_validate_files_reports_each_file(job_env, tmp_path):
    ds = tmp_path / "ds.json"
    ds.write_text('{"zero_optimization": {"stage": 3, "stage3_parition_grads": true}, "train_micro_batch_size_per_gpu": 1}')
    lf = tmp_path / "train.yaml"
    lf.write_text("model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\ndo_train: true\n"
                  "dataset_dir: data\ndataset: demo_alpaca\ntemplate: llama3\nfinetuning_type: lora\n"
                  "infer_backend: pt\noutput_dir: /tmp/x\n")
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    proc = rocmft("validate", str(ds), str(lf), str(broken), str(tmp_path / "missing.yaml"), env=job_env)
    assert proc.returncode == 2
    out = proc.stdout
    assert "zero_optimization.stage3_parition_grads: unknown DeepSpeed key" in out
    assert "infer_backend: `pt` is not a valid choice" in out
    assert "not valid JSON" in out and "file not found" in out
    assert out.count("FAIL") == 4


def test_copy_refuses_to_overwrite(job_env, tmp_path):
    proc = rocmft("copy", "tiny-cpu", "tiny-cpu", env=job_env)
    assert proc.returncode == 2 and "exists: not overwritten" in proc.stderr


def test_render_writes_a_run_dir_and_reports(job_env, tmp_path, tiny_model):
    proc = rocmft("render", "llama3-8b-z3", "--run-name", "r1", env=job_env)
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "runs" / "r1"
    assert {p.name for p in run.iterdir()} >= {"train.yaml", "ds_config.json", "recipe.resolved.yaml", "status.json"}
    assert "ds_config.json" in proc.stdout and "zero3" in proc.stdout
    again = rocmft("render", "llama3-8b-z3", "--run-name", "r1", env=job_env)
    assert again.returncode == 2 and "never reused" in again.stderr
