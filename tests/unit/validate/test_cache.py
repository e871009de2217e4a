"""The validation cache cannot go stale: its key holds the code that judged, not the package version.

The end-to-end case is a `git pull` made real: a copy of the checkout validates tiny-cpu (LLaMA-Factory's
parser runs, the verdict is cached), validates it again (the cached verdict, said so), then a pull changes only
arches.py, outside validate/ but imported by the checks (judged again), then its validation code changes to
refuse a key tiny-cpu uses, and the same recipe must now be refused. With the key of
before (the inputs, the stack versions and `rocmft=0.1.0`) the third run passed on the stale verdict.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from rocmft import validate
from rocmft.io import paths
from tests.conftest import PYTHON, ROOT, offline_env
from tests.install.conftest import fresh_copy


def _package_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "rocmft"
    shutil.copytree(ROOT / "src" / "rocmft", copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_the_digest_follows_the_code_that_judges(tmp_path):
    package = _package_copy(tmp_path)
    arches = paths.arches_file()
    before = validate.code_digest(package, arches)
    assert validate.code_digest(package, arches) == before  # stable for the same files
    assert before == validate.code_digest(ROOT / "src" / "rocmft", arches)  # path-independent: same files, same key
    checker = package / "validate" / "deepspeed.py"
    checker.write_text(checker.read_text() + "\n# a pulled change\n")
    assert validate.code_digest(package, arches) != before
    checker.write_text(checker.read_text().removesuffix("\n# a pulled change\n"))
    assert validate.code_digest(package, arches) == before
    (package / "validate" / "new_check.py").write_text("")  # a module added by a pull counts too
    assert validate.code_digest(package, arches) != before
    (package / "validate" / "new_check.py").unlink()
    assert validate.code_digest(package, arches) == before
    # Validation imports modules outside validate/ (inputs: stages, data/formats; model: hubcache; the stack
    # check: arches, problems): a change to any of them is a change to what judged.
    for imported in ("recipe/stages.py", "data/formats.py", "io/hubcache.py", "hardware/arches.py", "io/problems.py"):
        module = package / imported
        original = module.read_text()
        module.write_text(original + "\n# a pulled change\n")
        assert validate.code_digest(package, arches) != before, imported
        module.write_text(original)
    assert validate.code_digest(package, arches) == before
    table = tmp_path / "arches.yaml"
    table.write_text(arches.read_text().replace("bf16", "bf16 ", 1))  # the arch table the checks read
    assert validate.code_digest(ROOT / "src" / "rocmft", table) != before


def test_the_key_holds_code_and_stack_not_the_package_version():
    one = validate.cache_key("train", "ds", "cpu", "1", stack="image=sha256:1", code="a")
    assert one != validate.cache_key("train", "ds", "cpu", "1", stack="image=sha256:1", code="b")
    assert one != validate.cache_key("train", "ds", "cpu", "1", stack="image=sha256:2", code="a")
    assert one != validate.cache_key("train", "ds", "cpu", "1", code="a")  # the venv's versions
    assert "rocmft=" not in validate._stack_versions()  # constant across commits: the code digest replaces it


def test_a_container_judges_with_the_mounted_checkout(tmp_path):
    """In an image the checks run the mounted checkout's src (where.container_request puts it first on
    PYTHONPATH): that tree is what the key must hash, not the host's installed copy."""
    (tmp_path / "src" / "rocmft").mkdir(parents=True)
    assert validate.judging_source("docker", tmp_path) == tmp_path / "src" / "rocmft"
    assert validate.judging_source("apptainer", tmp_path) == tmp_path / "src" / "rocmft"
    assert validate.judging_source("venv", tmp_path) == Path(validate.__file__).resolve().parents[1]
    assert validate.judging_source("docker", tmp_path / "no-checkout").name == ""  # the image id covers its copy


def test_the_cache_folder_is_the_environments_when_set(tmp_path, monkeypatch):
    monkeypatch.setenv(validate.CACHE_ENV, str(tmp_path / "mine"))
    validate.remember_valid("k" * 64)
    assert validate.already_valid("k" * 64) and (tmp_path / "mine" / ("k" * 64)).is_file()
    monkeypatch.delenv(validate.CACHE_ENV)
    assert validate.cache_dir() == paths.cache_dir() / "validated"


def test_a_cache_this_user_cannot_use_means_validating_again(tmp_path, monkeypatch):
    """A cache folder made by another user (root's 0700 tmp, a .cache written by a root container) is no error."""
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder should be")  # unreadable as a folder for root as well
    monkeypatch.setenv(validate.CACHE_ENV, str(blocked / "validated"))
    assert validate.already_valid("k" * 64) is False
    validate.remember_valid("k" * 64)  # no exception
    assert validate.already_valid("k" * 64) is False


def test_the_test_run_has_a_cache_of_its_own(validation_cache):
    assert Path(os.environ[validate.CACHE_ENV]) == validation_cache != paths.cache_dir() / "validated"


PULLED_CHANGE = '''

# --- appended by the test: the validation code a `git pull` brought, refusing a key tiny-cpu sets
_check_before_the_pull = check


def check(args, file, arch=None):
    found = _check_before_the_pull(args, file, arch)
    if "lora_rank" in args:
        found.problems.append(Problem(file, "lora_rank", "refused by the pulled validation code"))
    return found
'''


def test_a_pull_that_changes_validation_revalidates(tmp_path):
    checkout = fresh_copy(tmp_path / "checkout")
    (checkout / "models").symlink_to(ROOT / "models", target_is_directory=True)  # the tiny model (not in git)
    env = offline_env(tmp_path, PYTHONPATH=str(checkout / "src"), ROCMFT_ROOT=str(checkout))
    env[validate.CACHE_ENV] = str(tmp_path / "cache")

    def render(name: str) -> subprocess.CompletedProcess:
        return subprocess.run([PYTHON, "-m", "rocmft.cli.main", "render", "tiny-cpu", "--run-name", name], cwd=checkout,
                              env=env, capture_output=True, text=True, timeout=600, check=False)

    first = render("first")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "validated  yes: LLaMA-Factory parser, in this venv\n" in first.stdout  # judged, not cached
    assert len(list((tmp_path / "cache").iterdir())) == 1

    again = render("again")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "in this venv (cached: same files, stack and code)" in again.stdout

    # A pull that changes only a module outside validate/ that the stack check imports (the arch table's code):
    # judged again, once.
    table_code = checkout / "src" / "rocmft" / "hardware" / "arches.py"
    table_code.write_text(table_code.read_text() + "\n# a pulled change outside validate/\n")
    outside = render("outside")
    assert outside.returncode == 0, outside.stdout + outside.stderr
    assert "validated  yes: LLaMA-Factory parser, in this venv\n" in outside.stdout  # judged, not cached
    assert len(list((tmp_path / "cache").iterdir())) == 2

    checker = checkout / "src" / "rocmft" / "validate" / "llamafactory.py"
    checker.write_text(checker.read_text() + PULLED_CHANGE)
    pulled = render("pulled")
    assert pulled.returncode == 2, pulled.stdout + pulled.stderr
    assert "lora_rank: refused by the pulled validation code" in pulled.stderr, pulled.stderr
    assert not (tmp_path / "runs" / "pulled").exists()
