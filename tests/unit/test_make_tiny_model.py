"""`make tiny-model` says one line: what the libraries print while it builds goes to a log beside the model."""

import subprocess

from tests.conftest import PYTHON, ROOT


def test_building_prints_one_line_and_keeps_the_libraries_output_in_a_log(tmp_path):
    out = tmp_path / "tiny"
    proc = subprocess.run([PYTHON, str(ROOT / "scripts" / "make_tiny_model.py"), "--out", str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert (proc.stdout + proc.stderr).splitlines() == [f"tiny model: {out} (built; the libraries' output: {out / 'build.log'})"]
    log = (out / "build.log").read_text()
    assert "Writing model shards" in log  # transformers' bar, kept
    assert (out / "config.json").is_file()
