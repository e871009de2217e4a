"""The host side of chat/serve/webui imports no ML stack: it runs on the light host (RUNTIME=docker needs
only the Docker SDK); only ask.py, api.py and evaluate/job.py, run inside the job's runtime, import LLaMA-Factory (when run)."""

import subprocess
import sys

MODULES = ("rocmft.cli.chat", "rocmft.cli.serve", "rocmft.cli.webui", "rocmft.run.target", "rocmft.serve.settings",
           "rocmft.serve.plan", "rocmft.serve.ports", "rocmft.serve.session", "rocmft.serve.local",
           "rocmft.serve.docker", "rocmft.serve.foreground", "rocmft.serve.ask", "rocmft.serve.api",
           "rocmft.serve.private_file", "rocmft.cli.eval", "rocmft.evaluate.job")


def test_host_modules_import_no_torch_or_llamafactory():
    code = (f"import sys, importlib; [importlib.import_module(m) for m in {MODULES!r}]; "
            "bad = [m for m in ('torch', 'transformers', 'deepspeed', 'llamafactory', 'docker', 'fastapi') if m in sys.modules]; "
            "sys.exit(repr(bad) if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
