"""Shared fixtures: the project root, an offline job environment, the CLI as a subprocess, a validation cache
of the test run's own, one trained tiny-cpu run for the session, waits on events, and the run's own checks
(a skip fails in CI; nothing started by the run outlives it).

Other test folders add their session fixtures here in sections of their own (a header comment each), so
that parallel changes rebase without touching each other's lines."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests import processes

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def offline_env(tmp: Path, **extra: str) -> dict[str, str]:
    """What every real run in the tests gets: no hub, caches in the project, run dirs in a tmp folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")}
    env.update({
        "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(ROOT / ".cache" / "hf"), "MPLCONFIGDIR": str(ROOT / ".cache" / "matplotlib"),
        "TORCH_EXTENSIONS_DIR": str(ROOT / ".cache" / "torch_extensions"),
        "ROCMFT_RUNS": str(tmp / "runs"),
    })
    env.update(extra)
    return env


def wait_until(condition, timeout: float = 60, what: str = "the condition") -> None:
    """Wait for the event itself (a line shown, a file written, a port closed), never a fixed sleep. The
    timeout is generous because the machines are shared: it bounds a hang, it is no speed claim."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)


@pytest.fixture(scope="session", autouse=True)
def validation_cache(tmp_path_factory) -> Path:
    """Every test run validates for real: a fresh `ROCMFT_VALIDATION_CACHE` for the session (inherited by the
    CLI subprocesses through `offline_env`), so a warm checkout's .cache/validated/ cannot make "validate
    every shipped recipe" pass without LLaMA-Factory or DeepSpeed looking at anything."""
    from rocmft import validate

    folder = tmp_path_factory.mktemp("validated")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(validate.CACHE_ENV, str(folder))
        yield folder


@pytest.fixture
def job_env(tmp_path) -> dict[str, str]:
    return offline_env(tmp_path)


def rocmft(*args: str, env: dict[str, str], timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "rocmft.cli.main", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, **kw)


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    model = ROOT / "models" / "tiny-llama"
    # Always asked: the script returns at once when the model is current, and rebuilds one an older script made.
    subprocess.run([PYTHON, str(ROOT / "scripts" / "make_tiny_model.py")], cwd=ROOT, check=True)
    return model


# ---- one trained tiny-cpu run for the whole session (`trained_run`), instead of one per test file

def make_env(tmp: Path, **extra: str) -> dict[str, str]:
    """`offline_env` for a nested `make`: without `make test`'s own flags (they add "Entering directory"
    lines) and without VERBOSE (it would stream the job's whole log)."""
    env = offline_env(tmp, **extra)
    return {k: v for k, v in env.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VERBOSE")}


@dataclass(frozen=True)
class TrainedRun:
    """A finished tiny-cpu run. Read its facts from it (`max_steps`, `losses`, `checkpoints`): the recipe
    changes (packing, data, step count, restarts) and the tests follow it. It is shared: never write into
    `path` (a test that would, works on `copy_to`); the session fails at its end if anything in it changed."""

    path: Path
    output: str  # what the command that trained it printed, stdout and stderr in one pipe (`2>&1`)

    @property
    def name(self) -> str:
        return self.path.name

    def trainer_log(self) -> list[dict]:
        lines = (self.path / "output" / "trainer_log.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    def losses(self) -> list[float]:
        return [row["loss"] for row in self.trainer_log() if "loss" in row]

    @property
    def max_steps(self) -> int:
        """The step count the run was configured with (what LLaMA-Factory read)."""
        import yaml

        return int(yaml.safe_load((self.path / "train.yaml").read_text())["max_steps"])

    def checkpoints(self) -> list[Path]:
        from rocmft.run import runs

        return runs.checkpoints(self.path)

    def copy_to(self, runs_dir: Path, name: str) -> Path:
        return Path(shutil.copytree(self.path, runs_dir / name, symlinks=True))


def _fingerprint(folder: Path) -> dict[str, str]:
    return {str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("*")) if f.is_file()}


@contextlib.contextmanager
def _unchanged(folder: Path, what: str):
    """A session fixture's run is read by many tests, in whatever order pytest picks: one that wrote into it
    would change what the others see (CI failed so once: a test's own task replaced the harness section another
    test compared with). The session fails at its end if anything in `folder` changed."""
    before = _fingerprint(folder)
    yield
    after = _fingerprint(folder)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"a test wrote into {what} {folder} (work on a copy: TrainedRun.copy_to): {changed[:20]}"


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, tiny_model) -> TrainedRun:
    """tiny-cpu trained once, as the README shows it: `make train RECIPE=tiny-cpu RUNTIME=local RUN_NAME=...`
    (the Makefile's variables reach the CLI), piped. Used by the training, chat/serve, serve-in-Docker and
    progress tests; a test that changes a run copies it."""
    tmp = tmp_path_factory.mktemp("trained-run")
    env = make_env(tmp)
    proc = subprocess.run(["make", "-s", "train", "RECIPE=tiny-cpu", "RUNTIME=local", "RUN_NAME=shared"], cwd=ROOT,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    run = TrainedRun(Path(env["ROCMFT_RUNS"]) / "shared", proc.stdout)
    with _unchanged(run.path, "the shared trained run"):
        yield run


# ---- the demo, once for the session (`demo_run`): `make demo` as a new user runs it (issue 23)

@pytest.fixture(scope="session")
def demo_run(tmp_path_factory, tiny_model) -> TrainedRun:
    """`make demo RUN_NAME=demo`, piped: its run (the identity rows taught on top of tiny-cpu) and everything it
    printed, the base-vs-trained answers and the next commands included. Shared like `trained_run`."""
    tmp = tmp_path_factory.mktemp("demo-run")
    env = make_env(tmp)
    proc = subprocess.run(["make", "-s", "demo", "RUN_NAME=demo"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    run = TrainedRun(Path(env["ROCMFT_RUNS"]) / "demo", proc.stdout)
    with _unchanged(run.path, "the shared demo run"):
        yield run


# ---- `make eval` of a copy of `trained_run`, once for the session (`evaluated_run`): the venv's eval.json, which
# the eval tests read and the Docker eval compares its own numbers with

EVAL_ROWS = 8  # fewer than tiny-cpu holds out, so the cap is exercised; generation is the slow part


@pytest.fixture(scope="session")
def evaluated_run(trained_run: TrainedRun, tmp_path_factory):
    """(run dir, env, what `make -s eval RUN=last N=EVAL_ROWS` printed, the command lines seen while it ran) for
    a copy of the shared run."""
    tmp = tmp_path_factory.mktemp("eval")
    env = make_env(tmp)
    run = trained_run.copy_to(tmp / "runs", "evaluated")  # eval writes into the run dir: never the shared one
    mark = processes.Mark(processes.TEST_VAR)
    with open(tmp / "out", "w") as out:
        proc = subprocess.Popen(["make", "-s", "eval", "RUN=last", f"N={EVAL_ROWS}"], cwd=ROOT, env=mark.env(env),
                                stdout=out, stderr=subprocess.STDOUT)
        try:
            seen = processes.command_lines_until_exit(proc, mark)
        finally:
            mark.stop()
    output = (tmp / "out").read_text()
    assert proc.wait() == 0, output[-3000:]
    with _unchanged(run, "the session's evaluated run"):
        yield run, env, output, seen


# ---- `make eval TASKS=rocmft_demo` of a copy of `demo_run`, once for the session (`harness_evaluated_demo`): the
# in-process lm-evaluation-harness scores that the harness tests read and the served client is compared with

# eval_tasks/rocmft_demo: the identity question (exact match), multiple choice; given as the group YAML's path, as a
# user would (the harness itself fails on a group's path: evaluate/harness_data.py hands it the group's name)
HARNESS_TASKS = "eval_tasks/rocmft_demo/rocmft_demo.yaml"


@pytest.fixture(scope="session")
def harness_evaluated_demo(demo_run: TrainedRun, tmp_path_factory):
    """(run dir, env, what `make -s eval RUN=last TASKS=<the demo group YAML> VERBOSE=1` printed) for a copy of the
    demo run."""
    tmp = tmp_path_factory.mktemp("harness-eval")
    env = make_env(tmp)
    run = demo_run.copy_to(tmp / "runs", "demo-harness")
    proc = subprocess.run(["make", "-s", "eval", "RUN=last", f"TASKS={HARNESS_TASKS}", "VERBOSE=1"], cwd=ROOT,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    with _unchanged(run, "the session's harness-evaluated demo run"):
        yield run, env, proc.stdout


# ---- benchmarks/gpu_truth.py --dry-run once for the session (`gpu_truth_dry`): its two `rocmft bench` runs of
# tiny-cpu (neat-packed and padded rows) are the bench tests' runs too (tests/train/test_bench_cpu.py), so the same
# two setups are benched once, not twice. The padded configuration runs exactly one epoch of its data.

@dataclass(frozen=True)
class GpuTruthDry:
    """What `gpu_truth.py run --dry-run --repeats 1 --steps <one epoch>` left: its work dir (model, data, bench.csv,
    the CSV/table), its runs (ROCMFT_RUNS of `env`), what it printed, and the step count. Shared: never write in
    `work` or `runs` (the session fails)."""

    work: Path
    runs: Path
    env: dict
    output: str
    steps: int
    rows: int  # rows of the data (the demo's alpaca rows, repeated once)

    def run_dir(self, config: str) -> Path:
        [found] = [p for p in self.runs.iterdir() if p.name.startswith(f"gpu_truth-{config}-")]
        return found


@pytest.fixture(scope="session")
def gpu_truth_dry(tmp_path_factory, tiny_model) -> GpuTruthDry:
    from rocmft.recipe import recipes

    tmp = tmp_path_factory.mktemp("gpu-truth-dry")
    env = offline_env(tmp, MPLCONFIGDIR=str(tmp / "mpl"))
    rows = sum(1 for line in (ROOT / "data" / "demo_alpaca.jsonl").read_text().splitlines() if line.strip())
    steps = -(-rows // int(recipes.load("tiny-cpu").llamafactory["per_device_train_batch_size"]))  # one epoch, padded
    proc = subprocess.run([PYTHON, str(ROOT / "benchmarks" / "gpu_truth.py"), "run", "--dry-run", "--matrix", "next",
                           "--steps", str(steps), "--repeats", "1", "--timeout", "900", "--work", str(tmp / "work")], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=2400, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    found = GpuTruthDry(tmp / "work", tmp / "runs", env, proc.stdout, steps, rows)
    with _unchanged(found.work, "the session's gpu_truth work dir"), _unchanged(found.runs, "the session's bench runs"):
        yield found


# ---- CI: a skip is a failure (ROCMFT_REQUIRE_SERVICES=1)
# CI starts every service and installs everything the suite uses (the CPU stack, the tiny model, Chromium),
# so nothing it runs may skip: a skipped test would be counted as a pass that proved nothing. Only skips
# that describe the host itself stay skips; their reasons hold one of these phrases.
HOST_CONDITION_SKIPS = ("has an AMD GPU driver", "assumes a root path without shell-special characters")


def _required() -> bool:
    return os.environ.get("ROCMFT_REQUIRE_SERVICES") == "1"


def _skip_that_fails(report) -> bool:
    deliberate = hasattr(report, "wasxfail") or any(p in str(report.longrepr) for p in HOST_CONDITION_SKIPS)
    return report.skipped and _required() and not deliberate


def _fail_the_skip(report, what: str) -> None:
    if _skip_that_fails(report):
        report.outcome = "failed"
        report.longrepr = f"{what} skipped although CI provides everything it needs: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_the_skip(outcome.get_result(), "this test")


_SKIPPED_MODULES: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module skipped at import (`pytest.importorskip` at module level) fails the run at its end (failing
    its collection would stop every other test)."""
    outcome = yield
    report = outcome.get_result()
    if _skip_that_fails(report):
        _SKIPPED_MODULES.append(f"{report.nodeid}: {report.longrepr}")


# ---- a test leaves the process as it found it: signal dispositions, the signal mask, os.environ (issue 33)
# Every process a test starts inherits these. A SIGTERM left ignored made every later `make`, launcher and
# training ignore SIGTERM as no user's process does; a leaked variable changes every later run's output.

# Variables the tools set themselves, whichever test first makes them: pytest's own (one value per test phase);
# torch's inductor cache folder, written into os.environ the first time torch looks it up (an optimizer's first
# step), with the default every child process computes for itself; and `import deepspeed`'s
# os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1"), which every process importing DeepSpeed sets too;
# scikit-learn's (joblib's, threadpoolctl's) setdefault of KMP_INIT_AT_FORK and KMP_DUPLICATE_LIB_OK at import
# (intel-openmp workarounds; lm-evaluation-harness brings scikit-learn, and transformers imports it when there).
_NOT_OURS = ("PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR", "PYTORCH_NVML_BASED_CUDA_CHECK", "KMP_INIT_AT_FORK",
             "KMP_DUPLICATE_LIB_OK")


def _signal_name(sig: int) -> str:
    import signal

    try:
        return signal.Signals(sig).name
    except ValueError:  # a real-time signal
        return f"signal {int(sig)}"


def _signals() -> dict[str, tuple]:
    import signal

    return {_signal_name(sig): (sig, signal.getsignal(sig)) for sig in sorted(signal.valid_signals())
            if sig not in (signal.SIGKILL, signal.SIGSTOP)}


@dataclass(frozen=True)
class ProcessState:
    signals: dict
    mask: frozenset
    environ: dict

    @classmethod
    def now(cls) -> "ProcessState":
        import signal

        environ = {k: v for k, v in os.environ.items() if k not in _NOT_OURS}
        return cls(_signals(), frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, [])), environ)

    def changes_since(self, before: "ProcessState") -> list[str]:
        out = []
        for name in sorted(before.signals.keys() | self.signals.keys()):
            was, now = before.signals.get(name, (0, None))[1], self.signals.get(name, (0, None))[1]
            if was is not now and was != now:
                out.append(f"signal {name}: {_handler(was)} -> {_handler(now)}")
        if self.mask != before.mask:
            out.append(f"signal mask: blocked {_names(before.mask)} -> {_names(self.mask)}")
        for key in sorted(before.environ.keys() | self.environ.keys()):
            if before.environ.get(key) != self.environ.get(key):
                out.append(f"os.environ[{key!r}]: {before.environ.get(key)!r} -> {self.environ.get(key)!r}")
        return out

    def restore(self) -> None:
        """Put the state back, so that one leak fails one test and not every test after it."""
        import signal

        for sig, handler in self.signals.values():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
        for key in [k for k in os.environ if k not in self.environ and k not in _NOT_OURS]:
            del os.environ[key]
        os.environ.update(self.environ)


def _names(mask: frozenset) -> str:
    return ", ".join(sorted(_signal_name(s) for s in mask)) or "none"


def _handler(handler) -> str:
    import signal

    if handler in (signal.SIG_DFL, signal.SIG_IGN):
        return signal.Handlers(handler).name
    return getattr(handler, "__qualname__", None) or repr(handler)


@pytest.fixture(autouse=True)
def leaves_the_process_as_it_found_it(request):
    """Fails a test (at its teardown, after its own fixtures such as monkeypatch are undone) that changed a
    signal disposition, the signal mask or os.environ. Fixtures of a wider scope are checked at the end of the
    session against the state the session started with (`pytest_sessionfinish`)."""
    before = ProcessState.now()
    yield
    changes = ProcessState.now().changes_since(before)
    if changes:
        before.restore()
        pytest.fail(f"{request.node.nodeid} left the test process changed (every later test and every process "
                    "it starts would inherit it):\n  " + "\n  ".join(changes), pytrace=False)


# ---- nothing the test run started outlives it (tests/processes.py says how "ours" is told apart)

_STARTED = datetime.now(timezone.utc)
os.environ[processes.SESSION_VAR] = processes.Mark(processes.SESSION_VAR).token  # inherited by all we start
_SESSION_STATE = ProcessState.now()  # what the run's end compares with (fixtures of any scope undone by then)


@pytest.fixture
def process_mark() -> processes.Mark:
    """A mark for the processes one test starts (`process_mark.env(env)`): at teardown, whatever the test's
    outcome, every process still carrying it is stopped, also one that left the test's process group."""
    mark = processes.Mark(processes.TEST_VAR)
    yield mark
    mark.stop()


def _leftover_containers(tmp_root: str) -> list:
    from rocmft.image.docker_api import connect, daemon_configured
    from rocmft.io.problems import ProblemReport

    if not daemon_configured():
        return []
    try:
        client = connect(timeout=60)
    except ProblemReport:  # no daemon to ask: nothing of ours can run there
        return []
    return [c for c in client.containers.list(all=True, ignore_removed=True)
            if processes.ours(c, _STARTED, tmp_root, str(ROOT))]


def pytest_sessionfinish(session, exitstatus):
    """The run's end: every process that carries this run's mark and every container of this run that still
    exists is a leak. Each is named, stopped or removed, and the run fails (so does a module skipped in CI)."""
    problems = [f"skipped module: {m}" for m in _SKIPPED_MODULES]
    problems += [f"the test process was left changed by a module or session fixture: {c}"
                 for c in ProcessState.now().changes_since(_SESSION_STATE)]
    mark = processes.Mark(processes.SESSION_VAR, os.environ[processes.SESSION_VAR])
    problems += [f"still running (now stopped): {p}" for p in mark.stop()]
    factory = getattr(session.config, "_tmp_path_factory", None)  # this run's basetemp: every tmp_path is in it
    for container in _leftover_containers(f"{factory.getbasetemp()}/") if factory else []:
        problems.append(f"container left behind (now removed): {container.name} ({container.status})")
        container.remove(force=True)
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("")
            reporter.write_sep("=", "this test run's end-of-run checks failed", red=True)
            for line in problems:
                reporter.write_line(line)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
