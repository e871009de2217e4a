"""Benchmark: how many CK kernel sources flash-attn's ROCm build compiles, all head dims vs the image's 64,128.

    python benchmarks/ck_kernel_count.py --ck <flash-attn source root or its csrc/composable_kernel>
    python benchmarks/ck_kernel_count.py --ck /tmp/flash_attn-2.8.3.post2 --write-check

The flash-attn sdist (the kernel stage's source; it ships the composable_kernel tree its setup.py uses) comes from
`pip download --no-deps --no-binary :all: --no-build-isolation flash-attn==2.8.3.post2` run in an env with torch
(setup.py imports it to prepare metadata); untar it and pass its folder.

Runs composable_kernel's own generator (example/ck_tile/01_fmha/generate.py) with `--list_blobs`, once per API and
head-dim set, with the arguments flash-attn 2.8.3's setup.py passes it (ROCm branch, setup.py lines 328-332 at tag
v2.8.3 and in the 2.8.3.post2 sdist, identical):

    optdim = os.getenv("OPT_DIM", "32,64,128,256")
    subprocess.run([sys.executable, f"{ck_dir}/example/ck_tile/01_fmha/generate.py", "-d", "fwd",
                    "--output_dir", "build", "--receipt", "2", "--optdim", optdim], check=True)
    ... the same for "fwd_appendkv", "fwd_splitkv", "bwd"

and counts what setup.py then compiles of it: `glob.glob("build/fmha_*wd*.cpp")` (setup.py line 364), which
includes each API's dispatcher file (fmha_fwd_api.cpp, ...). flash-attn adds 7 sources of its own
(csrc/flash_attn_ck/*.cpp), not counted here. The generator of the commit 2.8.3 pins takes no GPU arch:
the count is the same for every arch; GPU_ARCHS only adds `--offload-arch` flags to each source's compile.
`--write-check` also runs the generator the way setup.py does (writing into a temp dir) and globs the result,
to show the listing and the written files agree. Pure stdlib, no network, nothing written into the CK tree.
Prints counts; asserts nothing.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import subprocess
import sys
import tempfile
from pathlib import Path

APIS = ("fwd", "fwd_appendkv", "fwd_splitkv", "bwd")  # setup.py's order
ALL_DIMS = "32,64,128,256"  # setup.py's OPT_DIM default
IMAGE_DIMS = "64,128"  # docker/Dockerfile FLASH_ATTN_HEAD_DIMS default
SETUP_GLOB = "fmha_*wd*.cpp"
GENERATOR = Path("example/ck_tile/01_fmha/generate.py")


def find_generator(root: Path) -> Path | None:
    for base in (root, root / "csrc" / "composable_kernel"):
        if (base / GENERATOR).is_file():
            return base / GENERATOR
    return None


def run_generator(generator: Path, api: str, optdim: str, extra: list[str], cwd: str) -> None:
    # No bytecode: the generator imports its codegen package, which would leave __pycache__ in the CK tree.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([sys.executable, str(generator), "-d", api, "--receipt", "2", "--optdim", optdim, *extra],
                   check=True, cwd=cwd, env=env, stdout=subprocess.DEVNULL)


def listed(generator: Path, api: str, optdim: str) -> set[str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "blobs.txt"
        run_generator(generator, api, optdim, ["--list_blobs", str(out)], tmp)
        names = {Path(line).name for line in out.read_text().split()}
    return {n for n in names if fnmatch.fnmatch(n, SETUP_GLOB)}


def written(generator: Path, api: str, optdim: str) -> set[str]:
    with tempfile.TemporaryDirectory() as tmp:
        run_generator(generator, api, optdim, ["--output_dir", "build"], tmp)
        return {p.name for p in (Path(tmp) / "build").glob(SETUP_GLOB)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ck", required=True, type=Path,
                        help="a composable_kernel checkout, or a flash-attn source tree holding csrc/composable_kernel")
    parser.add_argument("--optdim", action="append",
                        help=f"head-dim set(s) to count (default: {ALL_DIMS} and {IMAGE_DIMS})")
    parser.add_argument("--write-check", action="store_true",
                        help="also generate the files as setup.py does and check they match the listing")
    args = parser.parse_args()
    generator = find_generator(args.ck)
    if generator is None:
        print(f"--ck {args.ck}: no {GENERATOR} there or under csrc/composable_kernel; "
              "give a composable_kernel checkout or a flash-attn source tree", file=sys.stderr)
        return 2
    if "--optdim" not in generator.read_text():
        print(f"--ck {args.ck}: this generator has no --optdim (older than flash-attn 2.8's CK pin); "
              "give the composable_kernel flash-attn 2.8.3 pins", file=sys.stderr)
        return 2
    sets = args.optdim or [ALL_DIMS, IMAGE_DIMS]
    print(f"generator: {generator}")
    totals: dict[str, int] = {}
    mismatches = 0
    print(f"{'api':<14}" + "".join(f"{s:>16}" for s in sets))
    for api in APIS:
        row = []
        for optdim in sets:
            names = listed(generator, api, optdim)
            if args.write_check:
                files = written(generator, api, optdim)
                if files != names:
                    mismatches += 1
                    print(f"  {api} {optdim}: listed {len(names)} != written {len(files)}", file=sys.stderr)
            row.append(len(names))
            totals[optdim] = totals.get(optdim, 0) + len(names)
        print(f"{api:<14}" + "".join(f"{n:>16}" for n in row))
    print(f"{'total':<14}" + "".join(f"{totals[s]:>16}" for s in sets))
    if ALL_DIMS in totals and IMAGE_DIMS in totals:
        print(f"ratio {IMAGE_DIMS} / {ALL_DIMS}: {totals[IMAGE_DIMS] / totals[ALL_DIMS]:.3f}")
    if args.write_check:
        print("write check: " + ("listing == written files" if not mismatches else f"{mismatches} mismatches"))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
