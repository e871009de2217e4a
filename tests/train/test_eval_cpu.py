"""`make eval` on a copy of the session's trained tiny-cpu run (`pytest -m train`), as a user runs it after
`make demo`: LLaMA-Factory's own eval and predict passes, base vs tuned, on the rows the run held out.

- the tuned eval loss is below the base's on those rows; perplexity, BLEU-4 and ROUGE are there for both;
- eval.json's loss and perplexity are those of the models on those rows, recomputed here without LLaMA-Factory's
  Trainer (the rows are LLaMA-Factory's own eval dataset; the forward passes and the averaging are the test's);
- generation stops at N rows (N=8 of the ~15 held out), greedy;
- eval.json and eval.md land in the run dir, and `make runs` shows the tuned eval loss.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import EVAL_ROWS, ROOT, make_env

pytestmark = pytest.mark.train
ROWS = EVAL_ROWS


@pytest.fixture(scope="module")
def evaluated(evaluated_run):
    """The session's `make eval` of a copy of the trained run (tests/conftest.py: the Docker eval compares with it)."""
    return evaluated_run


def test_the_eval_spec_is_in_no_command_line(evaluated):
    """Every local user reads every command line (`ps`): the real job names a private file that holds its spec
    (the run's models, data and settings), gone when eval.json is written."""
    import re

    *_, seen = evaluated
    jobs = [line for _, line in seen if "-m rocmft.evaluate.job" in line]
    assert jobs and all(re.search(r"--spec-file=\S+$", line) for line in jobs), sorted(seen)  # seen: it can fail
    assert not [line for _, line in seen if "predict_with_generate" in line or '"passes"' in line], sorted(seen)
    spec_file = Path(re.search(r"--spec-file=(\S+)", jobs[0]).group(1))
    assert spec_file.parent.parent == ROOT / ".cache" / "serve" and not spec_file.parent.exists()


def test_the_run_logged_an_eval_loss_curve_while_training(trained_run):
    assert [e for e in trained_run.trainer_log() if "eval_loss" in e], "val_size held rows out: eval_loss is logged"


def test_the_tuned_model_beats_its_base_on_the_held_out_rows(evaluated):
    run, _, out, _ = evaluated
    report = json.loads((run / "eval.json").read_text())
    base, tuned = report["base"], report["tuned"]
    assert tuned["eval_loss"] < base["eval_loss"], out
    for side in (base, tuned):
        assert all(isinstance(side[k], float) for k in ("bleu-4", "rouge-1", "rouge-2", "rouge-l")), side
        assert side["generated_rows"] == ROWS
    assert report["data"] == "held-out" and report["base_model"] == "models/tiny-llama"
    assert "adapter" in report["tuned_model"]
    assert report["examples"] and all(set(e) == {"prompt", "reference", "base", "tuned"} for e in report["examples"])
    assert f"eval_loss   {base['eval_loss']:.4g}" in out  # the side-by-side on the terminal


# Run in a process of its own (LLaMA-Factory's parser sets environment variables; the session guard forbids it here).
# argv: the eval's LLaMA-Factory arguments (JSON), the base model, the adapter, the eval batch size.
# Out: per model, the Trainer's eval_loss and the token-weighted mean over the same rows.
RECOMPUTE = textwrap.dedent("""
    import json, sys, tempfile
    import torch
    from llamafactory.data import get_dataset, get_template_and_fix_tokenizer
    from llamafactory.hparams import get_train_args
    from llamafactory.model import load_tokenizer
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    args, base_path, adapter, batch = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    with tempfile.TemporaryDirectory() as out:
        model_args, data_args, training_args, *_ = get_train_args({**args, "output_dir": out})
        tokenizer_module = load_tokenizer(model_args)
        template = get_template_and_fix_tokenizer(tokenizer_module["tokenizer"], data_args)
        module = get_dataset(template, model_args, data_args, training_args, "sft", **tokenizer_module)
        rows = module["eval_dataset"]
        trained = {tuple(r["input_ids"]) for r in module["train_dataset"]}

    def row_losses(model):
        # (sum of the token losses, tokens) per row: the next token's cross-entropy where the label is not -100
        out = []
        with torch.no_grad():
            for row in rows:
                ids, labels = torch.tensor([row["input_ids"]]), torch.tensor(row["labels"])
                logits = model(input_ids=ids).logits[0, :-1].float()
                target = labels[1:]
                keep = target != -100
                total = torch.nn.functional.cross_entropy(logits[keep], target[keep], reduction="sum")
                out.append((total.item(), int(keep.sum())))
        return out

    def trainer_mean(losses):
        # transformers 5.6's Trainer (evaluation_loop): each batch's loss is the mean over its tokens, repeated
        # batch_size times (loss.repeat(batch_size), batch_size = args.eval_batch_size, the last and shorter batch
        # too), then averaged: a plain mean over the batches of `batch` rows, in order (no shuffling in eval)
        means = []
        for i in range(0, len(losses), batch):
            chunk = losses[i:i + batch]
            means.append(sum(s for s, _ in chunk) / sum(n for _, n in chunk))
        return sum(means) / len(means)

    base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32).eval()
    result = {"rows": len(rows), "copies": sum(tuple(r["input_ids"]) in trained for r in rows)}
    for who, model in (("base", base), ("tuned", None)):
        if model is None:
            model = PeftModel.from_pretrained(base, adapter).eval()
        losses = row_losses(model)
        result[who] = {"trainer": trainer_mean(losses),
                       "token_mean": sum(s for s, _ in losses) / sum(n for _, n in losses)}
    print(json.dumps(result))
""")


def test_eval_json_holds_the_loss_and_perplexity_of_the_models_on_the_held_out_rows(evaluated):
    """The base's and the tuned model's loss over LLaMA-Factory's own held-out rows, computed here: a forward pass per
    row (no padding), the cross-entropy of every labelled token, then the Trainer's average, which is not a token
    mean (the mean of each batch of EVAL_BATCH rows' token mean; the last, shorter batch weighs as much as the
    others). eval.json must hold those, each with exp() of it as perplexity: a report that swapped the models, or a
    perplexity off its loss, fails here."""
    import yaml

    from rocmft.evaluate.plan import DATA_KEYS, EVAL_BATCH
    from rocmft.run.target import CARRIED

    run, env, _, _ = evaluated
    train = yaml.safe_load((run / "train.yaml").read_text())
    args = {k: train[k] for k in (*DATA_KEYS, *CARRIED, "template") if train.get(k) is not None}
    args.update(model_name_or_path=train["model_name_or_path"], stage="sft", do_train=False, do_eval=True,
                report_to="none")
    proc = subprocess.run([sys.executable, "-c", RECOMPUTE, json.dumps(args), train["model_name_or_path"],
                           str(run / "output"), str(EVAL_BATCH)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    mine = json.loads(proc.stdout.strip().splitlines()[-1])
    report = json.loads((run / "eval.json").read_text())
    assert mine["rows"] > EVAL_BATCH  # more than one batch: the Trainer's average is not the token mean
    for who in ("base", "tuned"):
        loss = mine[who]["trainer"]
        assert report[who]["eval_loss"] == pytest.approx(loss, rel=1e-5), (who, report[who], mine)
        assert report[who]["perplexity"] == pytest.approx(math.exp(loss), rel=1e-5), (who, report[who], mine)
    assert report["held_out"] == {"rows": mine["rows"], "copies": mine["copies"]}
    print(f"held-out rows {mine['rows']}: base {mine['base']}, tuned {mine['tuned']}")


def test_the_markdown_table_and_make_runs_show_it(evaluated):
    run, env, _, _ = evaluated
    table = (run / "eval.md").read_text()
    assert "| metric | base | tuned |" in table and "| bleu-4 |" in table and "**Example 1.**" in table
    tuned = json.loads((run / "eval.json").read_text())["tuned"]["eval_loss"]
    listing = subprocess.run(["make", "-s", "runs"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                             check=False)
    header, row = listing.stdout.splitlines()[:2]
    assert header.split()[6] == "EVAL" and row.split()[0] == "evaluated"
    assert row.split()[6] == f"{tuned:.4f}"


def test_make_eval_after_the_demo_shows_the_demo_helped(demo_run, tmp_path):
    """The README's first two commands, `make demo` then `make eval RUN=last` (CI ran them once more after
    `make test`; the session's demo run is the same command): on the demo's held-out rows the tuned eval loss is
    below the base's."""
    env = make_env(tmp_path)
    demo_run.copy_to(tmp_path / "runs", "demo")  # eval writes into the run dir: never the shared one
    proc = subprocess.run(["make", "-s", "eval", "RUN=last", "N=2"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    report = json.loads((tmp_path / "runs" / "demo" / "eval.json").read_text())
    assert report["data"] == "held-out" and report["tuned"]["eval_loss"] < report["base"]["eval_loss"], report
    # the demo repeats six identity rows to 160 (num_samples) before LLaMA-Factory splits: the rows it holds out
    # are partly rows it trained on, and the report says how many
    held = report["held_out"]
    assert 0 < held["copies"] <= held["rows"], held
    assert f"held out: {held['rows']} rows, {held['copies']} of them token for token rows the run trained on" in proc.stdout
