"""Benchmark: `make data` against the posts' preprocessing loop on the same generated file.

    .venv/bin/python benchmarks/data_throughput.py              # 1,000,000 rows (about 0.5 GB in a temp folder)
    .venv/bin/python benchmarks/data_throughput.py --rows 100000 --format alpaca

Generates N rows (deterministic) in one format with ~2% bad rows of every kind `rocmft data` rejects,
then times, each in its own subprocess:
- posts:  the preprocessing from the blog posts: for each line json.loads + json.dumps, no checks. Left
          as it is it crashes on the first malformed line, so it is given a try/except to finish;
- rocmft: `make data IN=<file> NAME=bench FORCE=1 DATA_DIR=<tmp>` (every field checked, rejects written,
          the dataset registered in a temporary dataset_info.json).
Prints rows/s for both, their ratio, and the peak RSS of each (getrusage of the waited-for children,
measured by a wrapper process per run so one run's peak never hides in the other's).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORDS = ("rocm hip gpu lora rank adapter fine tune model batch token memory shard node learning rate warmup "
         "gradient checkpoint epoch loss bf16 zero offload kernel tensor the a of to and is for with on "
         "réglage модель 微调 学习率 ✓").split()

POSTS_SCRIPT = r"""
import json, sys
src, dst = sys.argv[1], sys.argv[2]
n = 0
with open(src, encoding="utf-8", errors="surrogateescape") as f, open(dst, "w", encoding="utf-8", errors="surrogateescape") as g:
    for line in f:
        try:
            g.write(json.dumps(json.loads(line)) + "\n")
        except ValueError:  # the posts' script has no try: it stops at the first bad line
            continue
        n += 1
print(n)
"""

MEASURE = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
proc = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.perf_counter() - t
rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": proc.returncode, "wall": wall, "rss_kb": rss_kb,
                  "stdout": proc.stdout.decode(errors="replace")[-3000:], "stderr": proc.stderr.decode(errors="replace")[-3000:]}))
"""


def _text(r: random.Random, lo: int, hi: int) -> str:
    return " ".join(r.choice(WORDS) for _ in range(r.randint(lo, hi)))


def good_row(r: random.Random, fmt: str) -> dict:
    exchanges = r.choice((1, 1, 1, 2, 3))
    system = _text(r, 5, 15) if r.random() < 0.3 else None
    pairs = [(_text(r, 5, 40), _text(r, 10, 120)) for _ in range(exchanges)]
    if fmt == "alpaca":
        row = {"instruction": pairs[-1][0], "input": _text(r, 0, 20), "output": pairs[-1][1]}
        if system:
            row["system"] = system
        if exchanges > 1:
            row["history"] = [list(p) for p in pairs[:-1]]
        return row
    role, content, user, assistant, key = (("role", "content", "user", "assistant", "messages") if fmt == "messages"
                                           else ("from", "value", "human", "gpt", "conversations"))
    turns = [{role: "system", content: system}] if system else []
    for q, a in pairs:
        turns += [{role: user, content: q}, {role: assistant, content: a}]
    return {key: turns}


def bad_line(r: random.Random, fmt: str, i: int) -> bytes:
    """One bad row, cycling through every reason."""
    row = good_row(r, fmt)
    key = {"alpaca": "output", "messages": "messages", "sharegpt": "conversations"}[fmt]
    kind = i % 12
    if kind == 0:  # invalid_json: truncated
        return json.dumps(row, ensure_ascii=False).encode()[:-7]
    if kind in (1, 2):  # invalid_utf8 (a stray 0xff byte) / nul_byte (an escaped \u0000), inside a string
        text = json.dumps(row, ensure_ascii=False).encode()
        cut = text.index(b'": "') + 4
        return text[:cut] + (b"\xff" if kind == 1 else b"\\u0000") + text[cut:]
    if kind == 3:  # not_an_object
        return b'["a", "list"]'
    if kind == 4:  # mixed_format
        return json.dumps(good_row(r, "alpaca" if fmt != "alpaca" else "messages")).encode()
    if kind == 5:  # unknown_format
        return b'{"body": "just some text"}'
    if fmt == "alpaca":
        if kind == 6:
            row["output"] = ""
        elif kind == 7:
            del row["instruction"]
        elif kind == 8:
            row["output"] = 42
        elif kind == 9:
            row["history"] = [["only one"]]
        elif kind == 10:
            row["output"] = "   "
        else:
            row["instruction"], row["input"] = "", ""
        return json.dumps(row, ensure_ascii=False).encode()
    turns = row[key]
    role, content = ("role", "content") if fmt == "messages" else ("from", "value")
    last = turns[-1]
    if kind == 6:  # empty_content
        last[content] = ""
    elif kind == 7:  # unknown_role
        last[role] = "bot"
    elif kind == 8:  # bad_turn_order
        turns.append(dict(last))
    elif kind == 9:  # last_turn_not_assistant
        turns.pop()
    elif kind == 10:  # wrong_type
        last[content] = ["not", "a", "string"]
    else:  # missing_field
        del last[content]
    return json.dumps(row, ensure_ascii=False).encode()


def generate(path: Path, rows: int, fmt: str, bad_ratio: float, seed: int) -> int:
    r = random.Random(seed)
    bad = 0
    with open(path, "wb", buffering=1 << 20) as fh:
        for i in range(rows):
            if r.random() < bad_ratio:
                fh.write(bad_line(r, fmt, bad) + b"\n")
                bad += 1
            else:
                fh.write(json.dumps(good_row(r, fmt), ensure_ascii=False).encode() + b"\n")
    return bad


def count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def best(old: dict | None, new: dict) -> dict:
    """The faster run's time and output, and the highest peak RSS of all runs."""
    if old is None:
        return new
    keep = new if new["wall"] < old["wall"] else old
    return {**keep, "rss_kb": max(old["rss_kb"], new["rss_kb"])}


def measure(cmd: list[str], cwd: Path, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", MEASURE, *cmd], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    if result["rc"] != 0:
        raise SystemExit(f"command failed ({result['rc']}): {' '.join(cmd)}\n{result['stdout']}\n{result['stderr']}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--format", default="messages", choices=("alpaca", "sharegpt", "messages"))
    parser.add_argument("--bad", type=float, default=0.02, help="share of bad rows (default 0.02)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (prints its path)")
    parser.add_argument("--via", default="make", choices=("make", "cli"),
                        help="time `make data` (default) or `.venv/bin/rocmft data` directly")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each side N times, alternating, and keep each side's best time (for a busy machine)")
    parser.add_argument("--input", type=Path, default=None, help="reuse a file generated before (--keep) instead of generating")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="rocmft-bench-data-"))
    try:
        data_dir = tmp / "data"
        data_dir.mkdir()
        if args.input:
            src = args.input.resolve()
            args.rows = count_lines(src)
            n_bad = -1
            print(f"reusing {src}: {args.rows:,} rows, {src.stat().st_size / 1e6:,.0f} MB")
        else:
            src = tmp / "input.jsonl"
            t = time.perf_counter()
            n_bad = generate(src, args.rows, args.format, args.bad, args.seed)
            print(f"generated {args.rows:,} {args.format} rows ({n_bad:,} bad, {n_bad / args.rows:.1%}), "
                  f"{src.stat().st_size / 1e6:,.0f} MB in {time.perf_counter() - t:.1f} s")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        venv_py = ROOT / ".venv" / "bin" / "python"
        py = str(venv_py if venv_py.exists() else sys.executable)

        if args.via == "make":
            cmd = ["make", "--no-print-directory", "data", f"IN={src}", "NAME=bench", "FORCE=1", f"DATA_DIR={data_dir}"]
        else:
            cmd = [str(ROOT / ".venv" / "bin" / "rocmft"), "data", str(src), "bench", "--force", "--data-dir", str(data_dir)]
        posts = ours = None
        for i in range(max(1, args.repeat)):
            p = measure([py, "-c", POSTS_SCRIPT, str(src), str(tmp / "posts_out.jsonl")], ROOT, env)
            o = measure(cmd, ROOT, env)
            if args.repeat > 1:
                print(f"  run {i + 1}: posts {p['wall']:.2f} s, rocmft {o['wall']:.2f} s")
            posts, ours = best(posts, p), best(ours, o)

        kept, rejects = count_lines(data_dir / "bench.jsonl"), count_lines(data_dir / "bench.rejects.jsonl")
        entry = json.loads((data_dir / "dataset_info.json").read_text())["bench"]
        assert kept + rejects == args.rows, (kept, rejects, args.rows)

        rate_posts = args.rows / posts["wall"]
        rate_ours = args.rows / ours["wall"]
        print(ours["stdout"].rstrip())
        print()
        bad = f"{n_bad:,} bad" if n_bad >= 0 else "reused file"
        print(f"rows:                 {args.rows:,} ({args.format}, {bad}; rocmft kept {kept:,}, rejected {rejects:,}; "
              f"registered as {entry['formatting']})")
        print(f"posts' script:        {rate_posts:>12,.0f} rows/s  ({posts['wall']:.2f} s)  peak RSS {posts['rss_kb'] / 1024:,.0f} MiB"
              "  (no checks; needs a try/except to get past the first bad line)")
        print(f"rocmft `{args.via} data`: {rate_ours:>10,.0f} rows/s  ({ours['wall']:.2f} s)  peak RSS {ours['rss_kb'] / 1024:,.0f} MiB"
              "  (every field checked, rejects written, registered)")
        print(f"ratio rocmft/posts:   {rate_ours / rate_posts:.2f}x")
        if args.keep:
            print(f"kept: {tmp}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
