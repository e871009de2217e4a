"""A shared data folder: a link planted at the name a temporary file would get never redirects a write, and a
private dataset stays private in its registered copy."""

from __future__ import annotations

import os
import stat

from tests.unit.data.helpers import ALPACA, run, write


def test_a_link_planted_at_the_old_temporary_names_is_never_written_through(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    for name in ("ds.jsonl", "ds.rejects.jsonl", "dataset_info.json"):  # the names a same-pid run used to open
        (data / f".{name}.tmp-{os.getpid()}").symlink_to(victim)
    src = write(tmp_path / "in" / "x.jsonl", ALPACA, b"not json\n")
    summary = run(src, data)
    assert summary.kept == 1 and victim.read_text() == "mine\n"
    assert (data / "ds.jsonl").is_file() and not (data / "ds.jsonl").is_symlink()
    assert not [p for p in data.iterdir() if p.name.endswith(".tmp")]  # nothing left behind


def test_a_private_dataset_is_registered_private(tmp_path):
    src = write(tmp_path / "in" / "x.jsonl", ALPACA, b"not json\n")
    src.chmod(0o600)
    run(src, tmp_path / "data")
    for name in ("ds.jsonl", "ds.rejects.jsonl"):
        assert stat.S_IMODE((tmp_path / "data" / name).stat().st_mode) == 0o600, name
