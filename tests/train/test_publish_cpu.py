"""From the demo's adapter to where people run it (issue 46), for real (`pytest -m train`): `make export FORMAT=gguf`
merges the demo run and converts it with llama.cpp's own converter, and the `gguf` package's reader reads the file
back (its tensors are the merged model's, the architecture llama, the chat template the run's); an Ollama Modelfile
sits beside it; q8_0 writes 8-bit tensors; `make push DRY_RUN=1` lists a private repo and its files without the
token, and a local stand-in for the Hub receives exactly those files. One copy of the session's demo run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, make_env
from tests.unit.publish.hub_standin import Serving

pytestmark = pytest.mark.train

TOKEN = "hf_rocmftDemoPushToken42"


@pytest.fixture(scope="module")
def env(tmp_path_factory, demo_run):
    env = make_env(tmp_path_factory.mktemp("publish"))
    return env


@pytest.fixture(scope="module")
def run(env, demo_run) -> Path:
    return demo_run.copy_to(Path(env["ROCMFT_RUNS"]), "demo-published")  # export writes into the run


@pytest.fixture(scope="module")
def exported(env, run):
    proc = make(env, "export", f"RUN={run}", "FORMAT=gguf")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def make(env, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def read(path: Path):
    from gguf import GGUFReader

    return GGUFReader(str(path))


def test_the_demo_run_exports_to_gguf_and_the_reader_reads_it_back(run, exported):
    from safetensors import safe_open

    assert (run / "merged" / "config.json").is_file()  # merged first: the GGUF is the merged model
    gguf = read(run / "gguf-f16" / "model.gguf")
    with safe_open(str(run / "merged" / "model.safetensors"), "pt") as merged:
        names = list(merged.keys())
    assert len(gguf.tensors) == len(names)
    assert gguf.fields["general.architecture"].contents() == "llama"
    assert gguf.fields["tokenizer.chat_template"].contents() == (run / "merged" / "chat_template.jinja").read_text()
    assert "<|start_header_id|>" in gguf.fields["tokenizer.chat_template"].contents()  # the run's llama3 template
    assert {t.tensor_type.name for t in gguf.tensors} == {"F16", "F32"}  # 2-D weights f16, norms f32 (llama.cpp's rule)
    import json

    vocab = json.loads((run / "merged" / "tokenizer.json").read_text())
    assert len(gguf.fields["tokenizer.ggml.tokens"].contents()) == len(vocab["model"]["vocab"]) + len(
        [t for t in vocab["added_tokens"] if t["content"] not in vocab["model"]["vocab"]])
    # the tiny tokenizer is no published model's: its GPT-2 split is read from tokenizer.json, and said
    assert gguf.fields["tokenizer.ggml.pre"].contents() == "gpt-2"
    assert "note: llama.cpp's converter does not know this tokenizer by its hash" in exported.stderr


def test_an_ollama_modelfile_beside_it_and_the_one_ollama_create_line(run, exported):
    modelfile = (run / "gguf-f16" / "Modelfile").read_text()
    assert modelfile.splitlines()[2] == "FROM ./model.gguf"
    assert 'TEMPLATE """<|begin_of_text|>' in modelfile and 'PARAMETER stop "<|eot_id|>"' in modelfile
    # LLaMA-Factory's own Modelfile for the merged folder, but for its FROM line
    merged = (run / "merged" / "Modelfile").read_text()
    assert modelfile.replace("FROM ./model.gguf", "FROM .") == merged
    [line] = [ln for ln in exported.stdout.splitlines() if "ollama create" in ln]
    assert line.endswith(f"ollama create demo-published:f16 -f {run}/gguf-f16/Modelfile"), line
    assert "llama-quantize" in exported.stdout


def test_q8_0_writes_8_bit_tensors(env, run, exported):
    proc = make(env, "export", f"RUN={run}", "FORMAT=gguf", "OUTTYPE=q8_0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    gguf = read(run / "gguf-q8_0" / "model.gguf")
    assert "Q8_0" in {t.tensor_type.name for t in gguf.tensors}
    assert len(gguf.tensors) == len(read(run / "gguf-f16" / "model.gguf").tensors)


def test_push_dry_run_then_the_stand_in_hub_receives_exactly_the_listed_files(env, run, exported):
    push_env = {k: v for k, v in env.items() if k != "HF_HUB_OFFLINE"} | {"HF_TOKEN": TOKEN}
    with Serving() as hub:
        push_env["HF_ENDPOINT"] = hub.url
        dry = make(push_env, "push", f"RUN={run}", "REPO=my-org/demo", "DRY_RUN=1")
        assert dry.returncode == 0, dry.stderr
        assert hub.requests == []
        pushed = make(push_env, "push", f"RUN={run}", "REPO=my-org/demo")
        assert pushed.returncode == 0, pushed.stderr
    assert f"repo      my-org/demo (private) on {hub.url}" in dry.stdout
    files = re.findall(r"^    (\S+)  \(", dry.stdout, re.MULTILINE)
    assert "adapter_model.safetensors" in files and "README.md" in files
    assert sorted(hub.committed("my-org/demo")) == sorted(files)
    assert hub.committed("my-org/demo")["adapter_model.safetensors"] == (run / "output" / "adapter_model.safetensors").read_bytes()
    assert hub.repos == {"my-org/demo": True}
    assert TOKEN not in dry.stdout + dry.stderr + pushed.stdout + pushed.stderr
    card = hub.committed("my-org/demo")["README.md"].decode()
    assert "recipe `tiny-cpu-demo`" in card and "| final loss |" in card
