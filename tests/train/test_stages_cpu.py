"""Beyond SFT, trained for real on CPU with the tiny model (`pytest -m train`): SFT then DPO then `make chat`,
the reference-free SimPO and ORPO, KTO, and continued pretraining on packed text. Each run ends `succeeded`,
its progress events carry the stage's own signals, and on the demo pairs (the better answer is learnable:
evasive or wrong answers are the rejected ones) the reward accuracy of the last logged steps is above 0.5.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from rocmft.recipe import stages
from rocmft.run import events
from tests.conftest import ROOT, offline_env, rocmft

pytestmark = pytest.mark.train
SIGNALS = ("reward_accuracy", "reward_margin", "reward_chosen", "reward_rejected", "logp_chosen", "logp_rejected")


@pytest.fixture(scope="module")
def env(tmp_path_factory, tiny_model):
    return offline_env(tmp_path_factory.mktemp("stages"))


def train(env, recipe: str, name: str, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    proc = rocmft("train", recipe, "--runtime", "local", "--run-name", name, *args, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = Path(env["ROCMFT_RUNS"]) / name
    assert json.loads((run / "status.json").read_text())["state"] == "succeeded"
    return proc, run


def step_events(run: Path) -> list[dict]:
    found = events.read(run)
    assert found[0]["event"] == "begin" and found[-1]["event"] == "end"
    return events.steps(found)


@pytest.fixture(scope="module")
def sft(env, trained_run) -> Path:
    """The session's trained tiny-cpu run, copied here: the newest run of this module's runs/ (FROM=last)."""
    return trained_run.copy_to(Path(env["ROCMFT_RUNS"]), "sft")


def test_sft_then_dpo_from_its_adapter_then_chat(env, sft):
    # a canary between them trains newer runs of tiny-cpu (issue 42: FROM=last took its 4-step reference adapter)
    canary = subprocess.run(["make", "-s", "canary", "RECIPE=tiny-cpu"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=900)
    assert canary.returncode == 0 and ": agrees" in canary.stdout, canary.stdout + canary.stderr[-3000:]
    proc, run = train(env, "tiny-cpu-dpo", "dpo", "--from", "last")
    assert f"note: FROM: last = {sft} (tiny-cpu sft, succeeded, " in proc.stderr  # said before it trains
    args = yaml.safe_load((run / "train.yaml").read_text())
    assert args["adapter_name_or_path"] == f"{sft}/output" and args["create_new_adapter"] is True
    assert json.loads((run / "status.json").read_text())["started_from"] == f"{sft} (adapter)"
    steps = step_events(run)
    assert all(key in e for e in steps for key in SIGNALS), steps[-1]
    # The reference is the SFT model: the policy starts equal to it, so the first loss is ln 2 exactly (a
    # reference without the SFT adapter would start elsewhere, and the watchdog would have warned).
    assert math.isclose(steps[0]["loss"], stages.LN2, abs_tol=1e-3) and steps[0]["reward_accuracy"] == 0.0
    assert "warning: DPO's first loss" not in proc.stdout
    assert stages.tail_mean(steps, "reward_accuracy") > 0.5, [e["reward_accuracy"] for e in steps]
    assert "[rocmft] rewards    accuracy 0.00 -> " in proc.stdout
    # each piped step line shows that step's reward accuracy from its event (a short run: every step is printed)
    shown = {int(n): float(acc) for n, acc in re.findall(r"^\[rocmft\] step (\d+)/\d+  loss .*?  acc (\d\.\d\d)  ",
                                                           proc.stdout, re.M)}
    assert shown == {e["step"]: round(e["reward_accuracy"], 2) for e in steps}, (shown, proc.stdout[-2000:])
    chat = subprocess.run(["make", "-s", "chat", "RUN=last", "PROMPT=What is ROCm?",
                           "SET=max_new_tokens=16 do_sample=false"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert chat.returncode == 0 and chat.stdout.strip(), chat.stdout + chat.stderr
    assert f"adapter {sft}/output,{run}/output" in chat.stderr  # the SFT adapter, then the DPO one
    # make eval on a DPO run: its held-out rows are pairs, so an SFT dataset is named; base = no adapter at all
    evaluated = subprocess.run(["make", "-s", "eval", "RUN=last", "DATA=demo_alpaca", "N=2"], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=600, check=False)
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr[-3000:]
    report = json.loads((run / "eval.json").read_text())
    assert report["data"] == "demo_alpaca" and report["tuned_model"].endswith(f"adapter {sft}/output,{run}/output")
    assert all(math.isfinite(report[side]["eval_loss"]) and report[side]["generated_rows"] == 2
               for side in ("base", "tuned")), report
    # the harness on the same run: "tuned" merges both adapters in chain order, "base" loads none. Beside a shipped
    # task, a team's own task YAML by its path (a copy of the shipped identity task under another name, outside
    # eval_tasks/), and LIMIT=2: the harness reads the file and scores 2 rows of each task.
    folder = ROOT / ".cache" / "test-own-task"
    folder.mkdir(parents=True, exist_ok=True)
    own = folder / f"own_identity_{run.parent.name}.yaml"  # one per test run: runs of other checkouts don't share it
    own.write_text((ROOT / "eval_tasks" / "rocmft_demo" / "identity.yaml").read_text()
                   .replace("task: rocmft_demo_identity", "task: our_identity_check"))
    try:
        harness = subprocess.run(["make", "-s", "eval", "RUN=last", f"TASKS=rocmft_demo_choice,{own.relative_to(ROOT)}",
                                  "LIMIT=2", "VERBOSE=1", "TRUST_TASK_CODE=1"],  # the team's own file (issue 43, N2)
                                 cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    finally:
        own.unlink()
    assert harness.returncode == 0, harness.stdout + harness.stderr[-3000:]
    log = harness.stdout + harness.stderr
    merged = re.findall(r"^\[rocmft\] harness: adapter (\S+) merged$", log, re.M)
    assert merged == [f"{sft}/output", f"{run}/output"], log[-3000:]  # once each, tuned side only, in order
    assert re.search(r"^\[rocmft\] harness: base = \S+$", log, re.M), log[-3000:]  # no " + adapter"
    both = json.loads((run / "eval.json").read_text())
    assert both["data"] == "demo_alpaca"  # the held-out report kept
    section = both["harness"]
    assert section["tuned_model"].endswith(f"adapter {sft}/output,{run}/output")
    assert section["tasks"] == ["rocmft_demo_choice", str(own.relative_to(ROOT))] and section["limit"] == 2
    rows = {r["task"]: r for r in section["rows"]}
    assert rows.keys() == {"rocmft_demo_choice", "our_identity_check"}, section["rows"]
    assert all(r["n"] == 2 and r["base"] is not None and r["tuned"] is not None for r in rows.values()), rows
    listing = rocmft("runs", env=env).stdout
    assert any(line.split()[:3] == ["dpo", "tiny-cpu-dpo", "dpo"] and "reward accuracy" in line
               for line in listing.splitlines()), listing


def test_reference_free_simpo_learns_the_preference(env):
    """SimPO needs no reference model, so the tiny model trains in full (a LoRA on a random 2-layer model moves
    its per-token log-probabilities too little in a few steps for a reference-free reward). ORPO, the other
    reference-free loss, needs a larger beta and a second pass over the pairs: see the next test."""
    _, run = train(env, "tiny-cpu-dpo", "simpo", "pref_loss=simpo", "pref_beta=2.5", "simpo_gamma=1.375",
                   "finetuning_type=full", "learning_rate=1e-3")
    steps = step_events(run)
    assert all(key in e for e in steps for key in SIGNALS)
    assert stages.tail_mean(steps, "reward_accuracy") > 0.5, [e["reward_accuracy"] for e in steps]
    first, last = (sum(e["reward_margin"] for e in part) / len(part) for part in (steps[:3], steps[-3:]))
    assert last > first, (first, last)  # the chosen answers pull ahead of the rejected ones


def test_orpo_learns_the_preference(env):
    """ORPO's loss is an SFT loss on the chosen answer plus beta x an odds-ratio term (LLaMA-Factory 0.9.5,
    train/dpo/trainer.py `odds_ratio_loss`: -logp_chosen - beta * log sigmoid(log odds_chosen - log odds_rejected),
    log-probabilities averaged per token); its reward is beta x that mean log-probability, so the accuracy is the
    share of pairs whose chosen answer the policy finds likelier per token. At LLaMA-Factory's default beta 0.1
    (the lambda the ORPO authors trained the pretrained Mistral-ORPO-beta with) the SFT term dominates on the
    random tiny model: 10 steps left the accuracy at 0.5, and 25 steps a chosen-rejected gap of ~0.02 nats.
    beta 5 lets the odds-ratio term push the rejected answers down (gap 0.16-0.44 nats after 25 steps); full
    finetuning at SimPO's 1e-3, as above. 25 steps of 4 pairs are 1.3 passes over the 78 demo pairs: within the
    first pass a 4-pair step's accuracy still swings around 0.5 (20 steps, seeds 42, 7, 1, 2: last 3 steps 0.75,
    0.75, 0.58, 0.42); in the second, pairs seen once out-score their rejected answers (25 steps: 1.0, 0.92, 1.0,
    0.83; seed 3: 1.0)."""
    beta = 5.0
    proc, run = train(env, "tiny-cpu-dpo", "orpo", "pref_loss=orpo", f"pref_beta={beta}", "finetuning_type=full",
                      "learning_rate=1e-3", "max_steps=25")
    steps = step_events(run)
    assert all(key in e for e in steps for key in SIGNALS)
    # reference-free: the rewards are beta x the policy's own mean log-probabilities (no reference subtracted)
    assert all(math.isclose(e["reward_chosen"], beta * e["logp_chosen"], rel_tol=1e-4) for e in steps), steps[-1]
    assert stages.tail_mean(steps, "reward_accuracy") > 0.5, [e["reward_accuracy"] for e in steps]
    first, last = (sum(e["reward_margin"] for e in part) / len(part) for part in (steps[:3], steps[-3:]))
    assert last > first, (first, last)  # the chosen answers pull ahead of the rejected ones
    assert "[rocmft] warning:" not in proc.stdout  # the watchdog knows ORPO's normal: its loss is an SFT loss


def test_kto_trains_on_labelled_answers(env):
    proc, run = train(env, "tiny-cpu-kto", "kto")
    steps = step_events(run)
    assert all("kl" in e for e in steps) and any("reward_margin" in e for e in steps)
    assert stages.tail_mean(steps, "reward_margin", n=5) > 0  # desirable answers out-score undesirable ones
    assert "[rocmft] kto        kl " in proc.stdout


def test_continued_pretraining_on_packed_text(env):
    _, run = train(env, "tiny-cpu-pt", "pt")
    args = yaml.safe_load((run / "train.yaml").read_text())
    assert args["stage"] == "pt" and args["packing"] is True and "neat_packing" not in args
    seen = [e["tokens_seen"] for e in step_events(run)]
    per_step = [b - a for a, b in zip([0, *seen], seen)]
    # packed: every sequence is one full block of cutoff_len - 1 = 127 tokens (no padding), 4 per step
    assert all(n % 127 == 0 for n in per_step) and per_step.count(4 * 127) >= len(per_step) - 2, per_step
