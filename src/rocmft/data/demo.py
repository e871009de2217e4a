"""The demo datasets in data/: small, deterministic, written for this project: one per supervised layout, and a
preference (DPO), a KTO and a plain-text (pretraining) set.

`python -m rocmft.data.demo [DIR]` rewrites data/demo_*.jsonl; a unit test checks the committed files equal
what this module generates, so they never drift.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .demo_content import (ADVICE, ADVICE_WORSE, EVASIVE, FACTS, IDENTITY_ANSWER, IDENTITY_QUESTIONS, SYSTEM, arithmetic,
                           arithmetic_pairs)


def alpaca_rows() -> list[dict]:
    rows: list[dict] = []
    for i, (q, a) in enumerate(FACTS):
        row = {"instruction": q, "input": "", "output": a}
        if i % 5 == 0:
            row["system"] = SYSTEM
        rows.append(row)
    for instruction, context, answer in ADVICE:
        rows.append({"instruction": instruction, "input": context, "output": answer})
    for i, (q, a) in enumerate(arithmetic(40)):
        row = {"instruction": q, "input": "", "output": a}
        if i % 8 == 3:  # a few with a previous exchange, as alpaca `history`
            prev_q, prev_a = FACTS[i % len(FACTS)]
            row["history"] = [[prev_q, prev_a]]
        rows.append(row)
    return rows


def identity_rows() -> list[dict]:
    """What `make demo` teaches: each question once, all with the same answer. Its dataset_info entry repeats
    them (LLaMA-Factory's `num_samples`), so the tiny model sees the answer often enough to learn it."""
    return [{"instruction": q, "input": "", "output": IDENTITY_ANSWER} for q in IDENTITY_QUESTIONS]


def _conversations() -> list[list[tuple[str, str]]]:
    """Role/content turn lists (roles: system, user, assistant), shared by the two chat formats."""
    convs: list[list[tuple[str, str]]] = []
    arith = arithmetic(30)
    for i, (q, a) in enumerate(FACTS):
        turns: list[tuple[str, str]] = []
        if i % 3 == 0:
            turns.append(("system", SYSTEM))
        turns += [("user", q), ("assistant", a)]
        if i % 4 == 1:  # a follow-up turn
            fq, fa = arith[i % len(arith)]
            turns += [("user", fq), ("assistant", fa)]
        convs.append(turns)
    for instruction, context, answer in ADVICE:
        convs.append([("user", f"{instruction}\n{context}"), ("assistant", answer)])
    for i, (q, a) in enumerate(arith):
        turns = [("system", SYSTEM)] if i % 6 == 0 else []
        convs.append(turns + [("user", q), ("assistant", a)])
    return convs


def messages_rows() -> list[dict]:
    return [{"messages": [{"role": r, "content": c} for r, c in conv]} for conv in _conversations()]


SHAREGPT_ROLE = {"system": "system", "user": "human", "assistant": "gpt"}


def sharegpt_rows() -> list[dict]:
    rows = []
    for conv in _conversations():
        # sharegpt keeps the system prompt as a first turn or as a `system` column; show both.
        if conv[0][0] == "system" and len(conv) % 2 == 1 and len(rows) % 2 == 0:
            rows.append({"conversations": [{"from": "human" if r == "user" else "gpt", "value": c} for r, c in conv[1:]],
                         "system": conv[0][1]})
        else:
            rows.append({"conversations": [{"from": SHAREGPT_ROLE[r], "value": c} for r, c in conv]})
    return rows


def _pairs() -> list[tuple[str | None, str, str, str]]:
    """(system, prompt, better answer, worse answer): the preference and KTO demos' rows."""
    pairs: list[tuple[str | None, str, str, str]] = []
    for i, (q, a) in enumerate(FACTS):
        pairs.append((SYSTEM if i % 4 == 0 else None, q, a, EVASIVE[i % len(EVASIVE)]))
    for (instruction, context, answer), worse in zip(ADVICE, ADVICE_WORSE, strict=True):
        pairs.append((None, f"{instruction}\n{context}", answer, worse))
    for q, right, wrong in arithmetic_pairs(40):
        pairs.append((None, q, right, wrong))
    return pairs


def dpo_rows() -> list[dict]:
    """Pairs in LLaMA-Factory's own sharegpt preference shape (its dpo_en_demo): a few with a previous exchange."""
    rows = []
    for i, (system, prompt, better, worse) in enumerate(_pairs()):
        conv = []
        if i % 6 == 5:
            prev_q, prev_a = FACTS[i % len(FACTS)]
            conv += [{"from": "human", "value": prev_q}, {"from": "gpt", "value": prev_a}]
        row = {"conversations": conv + [{"from": "human", "value": prompt}],
               "chosen": {"from": "gpt", "value": better}, "rejected": {"from": "gpt", "value": worse}}
        if system:
            row["system"] = system
        rows.append(row)
    return rows


def kto_rows() -> list[dict]:
    """KTO rows in the messages layout: the better answer labelled true, the worse false; a third of the
    prompts carry both, the others one of them."""
    rows = []
    for i, (system, prompt, better, worse) in enumerate(_pairs()):
        head = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        for answer, label, keep in ((better, True, i % 3 != 2), (worse, False, i % 3 != 1)):
            if keep:
                rows.append({"messages": head + [{"role": "assistant", "content": answer}], "label": label})
    return rows


def text_rows() -> list[dict]:
    """Documents for continued pretraining: the facts three to a paragraph, the advice, the worked sums."""
    docs = [" ".join(a for _, a in FACTS[i:i + 3]) for i in range(0, len(FACTS), 3)]
    docs += [f"{instruction} For {context}: {answer}" for instruction, context, answer in ADVICE]
    sums = [a for _, a in arithmetic(40)]
    docs += ["Worked examples: " + " ".join(sums[i:i + 5]) for i in range(0, len(sums), 5)]
    return [{"text": doc} for doc in docs]


FILES = {
    "demo_alpaca.jsonl": alpaca_rows,
    "demo_messages.jsonl": messages_rows,
    "demo_sharegpt.jsonl": sharegpt_rows,
    "demo_dpo.jsonl": dpo_rows,
    "demo_kto.jsonl": kto_rows,
    "demo_text.jsonl": text_rows,
    "demo_identity.jsonl": identity_rows,
}


def render(make_rows) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in make_rows())


def write(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make_rows in FILES.items():
        path = folder / name
        path.write_text(render(make_rows), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("data")
    for p in write(target):
        print(p)
