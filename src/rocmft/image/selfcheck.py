"""The image's build-time self-check (no GPU needed), run by docker/Dockerfile as its last step.

    python -m rocmft.image.selfcheck --arch cpu --torch-from wheels --torch 2.13.0 ... --write FILE
    python -m rocmft.image.selfcheck --show FILE        # what the image's default command prints

Checks: torch is the build the arch needs (ROCm: `torch.version.hip` set and the base image's version;
cpu: neither CUDA nor HIP), no `nvidia-*` package is installed, LLaMA-Factory and DeepSpeed import at
the pinned versions, every package of the arch table's list (--packages) is installed at its version and
imports, and the GPU-only packages the list leaves out are absent. The report is written into the image;
any failed check exits 1 and so fails the build.

`--rehearsal 1` (CI's rehearsal of a ROCm image on a CPU base, image/rehearsal.py) runs every check, then marks
those named in REHEARSAL_SKIPS as skipped, each with its reason and what the check found.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from dataclasses import asdict, dataclass
from importlib import metadata


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    skipped: str = ""  # the rehearsal's reason (the report shows `skip`, never `ok`)


# The checks a ROCm image's rehearsal on a CPU base cannot pass, and why. Nothing else is ever skipped.
REHEARSAL_SKIPS = {
    "torch is a ROCm build": "a CPU torch stands in for the base image's ROCm torch (needs HIP)",
    "flash-attn CK kernels": "the CK kernels (flash_attn_2_cuda) need HIP and a compile of hours: the Triton "
                             "backend's pure-Python wheel stands in",
    "torchvision imports": "no CPU torchvision wheel is reachable (PyPI's x86_64 one is a CUDA build): the rehearsal "
                           "base holds only its metadata, where a ROCm base holds its own build",
}


def _public(version: str) -> str:
    return version.split("+", 1)[0]


def _installed() -> dict[str, str]:
    found = {}
    for dist in metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower().replace("_", "-")
        if name:
            found[name] = dist.version
    return found


def _attempt(name: str, fn) -> Check:
    try:
        ok, detail = fn()
    except Exception as exc:  # an import that fails is the finding, not a crash of the check
        ok, detail = False, f"{type(exc).__name__}: {exc}"
    return Check(name, bool(ok), detail)


# The GPU-only packages (hardware/versions.py IMAGE_PINS): absent from an image whose list leaves them out.
GPU_ONLY = ("bitsandbytes", "flash-attn", "liger-kernel")
# What a package's import must reach to count: LLaMA-Factory applies Liger through liger_kernel.transformers
# (model/model_utils/liger_kernel.py), which imports its Triton kernels; the bare package imports nothing.
# lm-eval's registry of models and tasks is what `make eval TASKS=` uses: lm_eval.evaluator imports it.
IMPORTS = {"liger-kernel": "liger_kernel.transformers", "rouge-chinese": "rouge_chinese", "lm-eval": "lm_eval.evaluator"}


def parse_packages(words: str) -> dict[str, str]:
    """`name==version ...` (the IMAGE_PACKAGES build arg) -> {canonical name: version}."""
    out = {}
    for word in words.split():
        name, _, version = word.partition("==")
        out[name.lower().replace("_", "-")] = version
    return out


def _module_for(package: str) -> str:
    if package in IMPORTS:
        return IMPORTS[package]
    # A distribution may ship several top-level modules (matplotlib: mpl_toolkits too): its own name first.
    own = package.replace("-", "_")
    if any(d.lower().replace("_", "-") == package for d in metadata.packages_distributions().get(own, ())):
        return own
    for module, dists in metadata.packages_distributions().items():
        if any(d.lower().replace("_", "-") == package for d in dists) and not module.startswith("_"):
            return module
    return package.replace("-", "_")


def _import(module: str) -> tuple[bool, str]:
    import importlib

    importlib.import_module(module)
    return True, f"import {module}"


def run_checks(*, arch: str, python: str = "", torch_from: str, torch_version: str, llamafactory: str, deepspeed: str,
               flash_attn: str, flash_attn_mode: str, flash_attn_version: str,
               packages: dict[str, str] | None = None) -> list[Check]:
    packages = dict(packages or {})
    installed = _installed()
    checks: list[Check] = []
    if python:
        have_py = "{}.{}".format(*sys.version_info[:2])
        checks.append(Check("python", have_py == python, f"Python {platform.python_version()} (expected {python})"))

    def torch_check():
        import torch

        have = torch.__version__
        if _public(have) != torch_version:
            return False, f"torch {have}, expected {torch_version}"
        if torch_from == "base":
            return True, f"torch {have}, HIP {torch.version.hip} (the base image's build)"
        ok = torch.version.hip is None and torch.version.cuda is None
        return ok, f"torch {have} (CPU build: cuda={torch.version.cuda}, hip={torch.version.hip})"

    checks.append(_attempt("torch", torch_check))
    if torch_from == "base":
        def rocm_check():
            import torch

            return bool(torch.version.hip), f"HIP {torch.version.hip}, CUDA {torch.version.cuda}"

        checks.append(_attempt("torch is a ROCm build", rocm_check))

    nvidia = sorted(n for n in installed if n.startswith("nvidia-"))
    checks.append(Check("no nvidia packages", not nvidia, ", ".join(nvidia) or "none installed"))

    want_lf = llamafactory  # the imports below bind the name `llamafactory` inside the closure

    def llamafactory_check():
        import llamafactory as lf
        import llamafactory.data.mm_plugin  # noqa: F401  (imports transformers and torchaudio)
        import llamafactory.hparams  # noqa: F401

        return lf.__version__ == want_lf, f"llamafactory {lf.__version__} (expected {want_lf})"

    checks.append(_attempt("llamafactory imports", llamafactory_check))

    def deepspeed_check():
        import deepspeed as ds
        from deepspeed.accelerator import get_accelerator

        name = get_accelerator().device_name()
        return ds.__version__ == deepspeed, f"deepspeed {ds.__version__} (expected {deepspeed}), accelerator {name}"

    checks.append(_attempt("deepspeed imports", deepspeed_check))

    want_fa = flash_attn in ("ck", "triton") and flash_attn_mode != "skip"
    have_fa = installed.get("flash-attn")
    if want_fa:
        checks.append(Check("flash-attn", have_fa == flash_attn_version,
                            f"{flash_attn} backend, flash-attn {have_fa or 'missing'} (expected {flash_attn_version})"))
        checks.append(_attempt("flash-attn imports", _flash_attn_import))
        checks.append(_attempt(f"flash-attn {'CK' if flash_attn == 'ck' else 'Triton'} kernels",
                               lambda: _flash_attn_kernels(flash_attn)))
    else:
        checks.append(Check("flash-attn", have_fa is None,
                            f"not built ({'FLASH_ATTN=skip' if flash_attn_mode == 'skip' else 'no backend for ' + arch})"
                            + (f", but flash-attn {have_fa} is installed" if have_fa else "")))

    # The arch table's list: each at its version and importable; the GPU-only ones it leaves out, absent.
    # (DeepSpeed and flash-attn have their own import checks above.)
    for name, version in sorted(packages.items()):
        if name in ("deepspeed", "flash-attn"):
            continue
        have = installed.get(name)
        checks.append(Check(name, have == version, f"{name} {have or 'missing'} (expected {version})"))
        if have:
            module = _module_for(name)
            checks.append(_attempt(f"{name} imports", lambda module=module: _import(module)))
    for name in GPU_ONLY:
        if name not in packages and name != "flash-attn":
            have = installed.get(name)
            checks.append(Check(name, have is None, "not installed (not in the arch's packages)" if have is None
                                else f"not in the arch's packages, but {name} {have} is installed"))

    # mm_plugin imports torchaudio unconditionally: it must import (cpu: even with its native libraries removed).
    checks.append(_attempt("torchaudio imports", lambda: (True, f"torchaudio {__import__('torchaudio').__version__}")))
    if torch_from == "base":
        # LLaMA-Factory requires torchvision too; the base image's own build must import beside its torch (a
        # missing one would make pip pull PyPI's CUDA wheel, and transformers' image paths import it).
        checks.append(_attempt("torchvision imports",
                               lambda: (True, f"torchvision {__import__('torchvision').__version__}")))
    if torch_from == "wheels":
        # scripts/setup-venv.sh's treatment: PyPI's CUDA torchvision must be gone, torchaudio must import.
        checks.append(Check("torchvision removed", "torchvision" not in installed,
                            "absent (transformers treats it as optional)" if "torchvision" not in installed
                            else f"torchvision {installed['torchvision']} is installed"))
    return checks


def _flash_attn_import() -> tuple[bool, str]:
    """Import flash_attn the way transformers' flash_attention_2 path does.

    flash-attn 2.8.3 decides at import (flash_attn_interface.USE_TRITON_ROCM, from
    FLASH_ATTENTION_TRITON_AMD_ENABLE): a Triton build imported without it looks for flash_attn_2_cuda."""
    import os

    from flash_attn import flash_attn_func  # noqa: F401  (what transformers' flash_attention_2 imports)

    env = os.environ.get("FLASH_ATTENTION_TRITON_AMD_ENABLE", "unset")
    return True, f"flash_attn imported (FLASH_ATTENTION_TRITON_AMD_ENABLE={env})"


def _flash_attn_kernels(backend: str) -> tuple[bool, str]:
    """The kernels that import bound are the arch's backend's: Triton, or the compiled CK ones."""
    from flash_attn import flash_attn_interface as fai

    triton = bool(getattr(fai, "USE_TRITON_ROCM", False))
    return triton == (backend == "triton"), f"{'Triton' if triton else 'compiled'} kernels bound (expected {backend})"


def skip_for_rehearsal(checks: list[Check]) -> list[Check]:
    """The rehearsal's view: each check named in REHEARSAL_SKIPS marked skipped (what it found kept in its detail)."""
    return [Check(c.name, True, f"skipped in the rehearsal: {REHEARSAL_SKIPS[c.name]} (found: {c.detail})",
                  REHEARSAL_SKIPS[c.name]) if c.name in REHEARSAL_SKIPS else c for c in checks]


def report(arch: str, checks: list[Check], rehearsal: bool = False) -> dict:
    return {
        "arch": arch,
        "rehearsal": rehearsal,
        "passed": all(c.ok for c in checks),
        "python": platform.python_version(),
        "checks": [asdict(c) for c in checks],
    }


def render(data: dict) -> str:
    what = "REHEARSAL on a CPU base, not a usable image; " if data.get("rehearsal") else ""
    lines = [f"rocmft image self-check ({data['arch']}, {what}Python {data['python']}): "
             f"{'PASSED' if data['passed'] else 'FAILED'}"]
    lines += [f"  {'skip' if c.get('skipped') else 'ok  ' if c['ok'] else 'FAIL'} {c['name']}: {c['detail']}"
              for c in data["checks"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocmft.image.selfcheck", description=__doc__.splitlines()[0])
    parser.add_argument("--show", metavar="FILE", help="print a report written at build time and exit with its result")
    parser.add_argument("--arch")
    parser.add_argument("--python", default="", help="expected major.minor")
    parser.add_argument("--torch-from", choices=["base", "wheels"])
    parser.add_argument("--torch")
    parser.add_argument("--llamafactory")
    parser.add_argument("--deepspeed")
    parser.add_argument("--flash-attn", default="none")
    parser.add_argument("--flash-attn-mode", default="auto")
    parser.add_argument("--flash-attn-version", default="")
    parser.add_argument("--packages", default="", help="the arch table's list: `name==version ...`")
    parser.add_argument("--rehearsal", choices=["0", "1"], default="0",
                        help="1: CI's rehearsal on a CPU base: skip the checks of REHEARSAL_SKIPS, by name")
    parser.add_argument("--write", metavar="FILE", help="write the JSON report here")
    args = parser.parse_args(argv)
    if args.show:
        data = json.loads(open(args.show).read())
        print(render(data))
        return 0 if data["passed"] else 1
    needed = ("arch", "torch_from", "torch", "llamafactory", "deepspeed")
    missing = [f"--{n.replace('_', '-')}" for n in needed if not getattr(args, n)]
    if missing:
        parser.error(f"missing {' '.join(missing)}")
    checks = run_checks(arch=args.arch, python=args.python, torch_from=args.torch_from, torch_version=args.torch,
                        llamafactory=args.llamafactory, deepspeed=args.deepspeed, flash_attn=args.flash_attn,
                        flash_attn_mode=args.flash_attn_mode, flash_attn_version=args.flash_attn_version,
                        packages=parse_packages(args.packages))
    rehearsal = args.rehearsal == "1"
    if rehearsal:
        checks = skip_for_rehearsal(checks)
    data = report(args.arch, checks, rehearsal)
    if args.write:
        with open(args.write, "w") as handle:
            json.dump(data, handle, indent=1)
            handle.write("\n")
    print(render(data))
    return 0 if data["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
