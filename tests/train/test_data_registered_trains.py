"""A dataset registered by `rocmft data` trains (JSON Lines of each layout, and a Parquet file): one real LoRA
step through LLaMA-Factory reading the registered entries (`pytest -m train`). Everything is registered in a temporary data folder passed as
`dataset_dir`, so the committed data/dataset_info.json is never touched."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, offline_env, rocmft

pytestmark = pytest.mark.train

ROWS = {
    "alpaca": [{"instruction": f"What is {i} + {i}?", "input": "", "output": f"{2 * i}."} for i in range(12)],
    "sharegpt": [{"conversations": [{"from": "human", "value": f"Name GPU {i}."}, {"from": "gpt", "value": f"MI{300 + i}"}]}
                 for i in range(12)],
    "messages": [{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"Count to {i}."},
                               {"role": "assistant", "content": " ".join(str(n) for n in range(1, i + 2))}]} for i in range(12)],
}
BAD = [b"not json", b'{"instruction": "no output"}', b'{"messages": [{"role": "user", "content": "last"}]}']



def finished_bars(log: str, desc: str) -> list[int | None]:
    """The rows each `desc` progress bar in `log` finished (None: one that never reached its total), one entry per
    bar. A bar is counted by its 0% render, which tqdm writes once when the bar opens: its 100% render is written
    twice when the work outlasts tqdm's 0.1 s refresh interval (the update, then the close), so on a loaded machine
    counting 100% renders counts one conversion twice (CI: 4 for 3 datasets)."""
    bars: list[int | None] = []
    for render in re.findall(rf"{re.escape(desc)}:\s+\d+%\|[^|]*\| (\d+)/(\d+)", log):
        done, total = int(render[0]), int(render[1])
        if done == 0:
            bars.append(None)
        elif done == total and bars:
            bars[-1] = total
    return bars

@pytest.fixture(scope="module")
def registered(tmp_path_factory, tiny_model):
    """Three user files (good rows + bad ones) registered through the CLI into a temporary data folder."""
    tmp = tmp_path_factory.mktemp("data-train")
    env = offline_env(tmp, HF_HOME=str(tmp / "hf"), MPLCONFIGDIR=str(tmp / "mpl"))
    data_dir = tmp / "data"
    names = []
    for fmt, rows in ROWS.items():
        src = tmp / f"user_{fmt}.jsonl"
        src.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows) + b"\n".join(BAD) + b"\n")
        name = f"user_{fmt}"
        proc = rocmft("data", str(src), name, "--data-dir", str(data_dir), "--no-progress", env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"{len(rows) + len(BAD)} rows read, {len(rows)} kept, {len(BAD)} rejected" in proc.stdout
        names.append(name)
    # a Parquet file: read as rows (pyarrow, as LLaMA-Factory's loader reads it), written as JSONL, trained on
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp / "user_table.parquet"
    pq.write_table(pa.Table.from_pylist([{"instruction": f"Double {i}.", "output": str(2 * i) + "."} for i in range(12)]
                                        + [{"instruction": "no answer", "output": ""}]), src)
    proc = rocmft("data", str(src), "user_table", "--data-dir", str(data_dir), "--no-progress", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "13 rows read, 12 kept, 1 rejected (alpaca)" in proc.stdout
    names.append("user_table")
    return env, data_dir, names


def test_registered_datasets_train_one_step(registered):
    env, data_dir, names = registered
    before = (ROOT / "data" / "dataset_info.json").read_bytes()
    proc = rocmft("train", "tiny-cpu", "--runtime", "local", "--run-name", "data-registered",
                  f"dataset={','.join(names)}", f"dataset_dir={data_dir}", "max_steps=1", "save_steps=1",
                  env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = data_dir.parent / "runs" / "data-registered"
    log = (run / "train.log").read_text()
    # LLaMA-Factory read each registered entry (only the kept rows), converted them with the registered
    # formatting/columns/tags, and found no row it would skip: one finished conversion of 12 rows per entry.
    assert finished_bars(log, "Converting format of dataset") == [12] * len(names), log[-3000:]
    # tokenised in two parts, the training rows and the ones tiny-cpu holds out (val_size): every kept row once
    tokenized = finished_bars(log, "Running tokenizer on dataset")
    assert len(tokenized) == 2 and sum(tokenized) == 12 * len(names), tokenized
    for complaint in ("Invalid role tag", "Invalid message count", "Skipping this abnormal example", "Dropped invalid example"):
        assert complaint not in log
    assert (run / "output" / "adapter_model.safetensors").is_file()
    assert (ROOT / "data" / "dataset_info.json").read_bytes() == before


def test_token_lengths_against_the_recipe_cutoff(registered, tiny_model):
    env, data_dir, _ = registered
    long_rows = [{"instruction": "word " * n, "output": "ok"} for n in (1, 3, 400, 800)]
    src = data_dir.parent / "lengths.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in long_rows))
    proc = subprocess.run([sys.executable, "-m", "rocmft.cli.main", "data", str(src), "--check", "--tokenizer", str(tiny_model),
                           "--recipe", "tiny-cpu"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tokens per row:" in proc.stdout and "LLaMA-Factory template `llama3`" in proc.stdout
    assert "2 rows (50.0%) exceed cutoff_len 128 of recipe tiny-cpu" in proc.stdout, proc.stdout
