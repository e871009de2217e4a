"""`rocmft data` as users run it: one line per problem and exit 2; nothing heavy imported."""

from __future__ import annotations

import json
import subprocess
import sys

from rocmft.cli import main as cli

from .helpers import ALPACA, write


def test_cli_registers_into_the_given_data_dir(tmp_path, capsys):
    src = write(tmp_path / "in.jsonl", ALPACA, b"oops\n")
    assert cli.main(["data", str(src), "mine", "--data-dir", str(tmp_path / "d"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "2 rows read, 1 kept, 1 rejected (alpaca)" in out and "registered `mine`" in out
    assert json.loads((tmp_path / "d" / "dataset_info.json").read_text())["mine"]["file_name"] == "mine.jsonl"


def test_cli_data_dir_from_the_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ROCMFT_DATA_DIR", str(tmp_path / "env"))
    assert cli.main(["data", str(write(tmp_path / "in.jsonl", ALPACA)), "mine"]) == 0
    assert (tmp_path / "env" / "mine.jsonl").exists()


def test_cli_problems_one_line_each_exit_2(tmp_path, capsys):
    code = cli.main(["data", str(tmp_path / "missing.jsonl"), "a/b", "--data-dir", str(tmp_path / "d")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 2 and all(line.startswith("error: ") for line in err)
    assert any("NAME" in line for line in err) and any("file not found" in line for line in err)


def test_cli_check_needs_no_name(tmp_path, capsys):
    assert cli.main(["data", str(write(tmp_path / "in.jsonl", ALPACA)), "--check"]) == 0
    assert "1 rows read, 1 kept" in capsys.readouterr().out


def test_cli_name_required_without_check(tmp_path, capsys):
    assert cli.main(["data", str(write(tmp_path / "in.jsonl", ALPACA)), "--data-dir", str(tmp_path)]) == 2
    assert "NAME: missing" in capsys.readouterr().err


def test_cli_module_imports_nothing_heavy():
    code = ("import sys, rocmft.cli.data, rocmft.data.prepare; "
            "heavy = [m for m in ('torch', 'transformers', 'llamafactory', 'datasets', 'rich') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
