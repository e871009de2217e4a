"""The kernel stage's probe: compile ONE flash-attn CK source against the base image's torch before the others,
and stop in seconds, with the reason, when it cannot.

Why: flash-attn 2.8.3's CK sources (csrc/flash_attn_ck/mha_fwd.cpp, mha_bwd.cpp, mha_varlen_fwd.cpp) call
`at::cuda::getCurrentHIPStream()`, which resolves only through torch's ROCm compatibility names: `c10::hip::
getCurrentHIPStream`, reached from `at::cuda` by the `using namespace c10::hip` in c10's macros. torch 2.10 declares
them unguarded; later releases put them behind preprocessor guards ("hipify v2 backward compat in external
projects"); flash-attn fixed its sources after 2.8.3 (Dao-AILab/flash-attention#1944). A base image whose torch
does not resolve it fails the whole compile (~1,400 sources: docs/image.md, "How long will it take") on its first
CK source: this probe finds out first.

What it runs, as torch's BuildExtension does for flash-attn's setup.py (torch/utils/cpp_extension.py): the source
copied to .cu (flash-attn's `rename_cpp_to_cu`), hipified by the base's torch (`hipify_python.hipify`, as
`CUDAExtension` calls it), then `hipcc -fsyntax-only` with torch's include paths and HIP flags and flash-attn's CK
flags, for the one arch (`compile_argv`). Before it, the torch headers are read for the symbol (`header_verdict`):
that is the reason printed when the compile fails, and what this machine can check without a ROCm compiler.

Run standalone (`python kernel_probe.py SDIST GPU_ARCH WORKDIR`): the kernel stage has no rocmft installed and must
not read src/ (its cache key); `make image` sends this file in the context's kernels/ folder (image/context.py).
Standard library only at import; torch is imported by the functions that run in the stage.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

SOURCE = "csrc/flash_attn_ck/mha_fwd.cpp"
SYMBOL = "getCurrentHIPStream"
# flash-attn 2.8.3.post2 setup.py, the ROCm branch: its include_dirs and the front-end part of its `nvcc` flags
# (the `-mllvm` back-end options it adds per HIP version change no parse); GPU_ARCHS and OPT_DIM do not apply here.
CK_INCLUDES = ("csrc/composable_kernel/include", "csrc/composable_kernel/library/include",
               "csrc/composable_kernel/example/ck_tile/01_fmha")
CK_FLAGS = ("-O3", "-std=c++17", "-DCK_TILE_FMHA_FWD_FAST_EXP2=1", "-fgpu-flush-denormals-to-zero", "-DCK_ENABLE_BF16",
            "-DCK_ENABLE_BF8", "-DCK_ENABLE_FP16", "-DCK_ENABLE_FP32", "-DCK_ENABLE_FP64", "-DCK_ENABLE_FP8",
            "-DCK_ENABLE_INT8", "-DCK_USE_XDL", "-DUSE_PROF_API=1", "-D__HIP_PLATFORM_HCC__=1",
            "-DCK_TILE_FLOAT_TO_BFLOAT16_DEFAULT=3")
# What hipcc (clang) defines itself, for reading the headers' guards as the compile will.
COMPILER_DEFINES = {"__cplusplus": 201703, "__clang__": 1, "__HIPCC__": 1, "__HIP__": 1, "__linux__": 1}
TIMEOUT_S = 600
ADVICE = ("flash-attn {fa}'s CK sources call at::cuda::getCurrentHIPStream(), which this base's torch {torch} does "
          "not provide to them: use a base image with torch 2.10 (docker/arches.yaml base_image and torch), or a "
          "flash-attn release with Dao-AILab/flash-attention#1944 (hardware/versions.py FLASH_ATTN_VERSION)")


# ---------------------------------------------------------------- reading the headers (pure: text in, facts out)

def _strip_comments(text: str) -> str:
    """Comments and string literals blanked, line breaks kept (line numbers stay right)."""
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', lambda m: re.sub(r"[^\n]", " ", m.group(0)), text,
                  flags=re.DOTALL)


def evaluate(condition: str, defines: dict[str, int]) -> bool | None:
    """A preprocessor condition under `defines`; None when it holds something this evaluator does not read."""
    expr = re.sub(r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)",
                  lambda m: " 1 " if (m.group(1) or m.group(2)) in defines else " 0 ", condition)
    expr = re.sub(r"\b(\d+)[uUlL]*\b", r"\1", expr)
    expr = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: f" {int(defines.get(m.group(0), 0))} ", expr)
    expr = expr.replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"!(?!=)", " not ", expr)
    if not re.fullmatch(r"[\d\s()<>=!andort]*", expr):
        return None
    try:
        return bool(eval(expr, {"__builtins__": {}}, {}))  # digits, comparisons and and/or/not only: checked above
    except Exception:  # noqa: BLE001 - anything this small grammar does not cover
        return None


# In a header's code (comments blanked): a namespace opened, `using namespace c10::hip;`, a declaration of SYMBOL
# (a type before it, or a using-declaration), and the braces that close namespaces.
TOKENS = re.compile(r"(?P<ns>\bnamespace\s+(?P<name>[\w:]*)\s*\{)"
                    r"|(?P<using>\busing\s+namespace\s+(?:::)?c10::hip\s*;)"
                    rf"|(?P<decl>(?P<type>[\w:<>]+)[\s&*]+{SYMBOL}\s*\(|\busing\s+[\w:]*::{SYMBOL}\s*;)"
                    r"|(?P<open>\{)|(?P<close>\})")
NOT_TYPES = {"return", "else", "case", "throw", "new", "co_return", "delete"}


def scan(text: str) -> list[tuple[int, str, tuple[str, ...], tuple[str, ...]]]:
    """(line, what, namespace, guards) for each declaration of SYMBOL and each `using namespace c10::hip` in a header:
    what is "declaration" or "using c10::hip"; guards are the #if conditions around it, outermost first."""
    found = []
    guards: list[list[str]] = []  # per #if level: its branch conditions so far (the last one is the live branch)
    braces: list[str | None] = []  # per open brace: the namespace it opened, None for any other brace
    for number, line in enumerate(_strip_comments(text).splitlines(), 1):
        directive = re.match(r"\s*#\s*(ifdef|ifndef|if|elif|else|endif)\b(.*)", line)
        if directive:
            kind, rest = directive.group(1), directive.group(2).strip()
            if kind in ("if", "ifdef", "ifndef"):
                guards.append([{"ifdef": f"defined({rest})", "ifndef": f"!defined({rest})"}.get(kind, rest)])
            elif kind in ("elif", "else") and guards:
                before = " && ".join(f"!({c})" for c in guards[-1])
                guards[-1].append(f"{before} && ({rest})" if kind == "elif" else before)
            elif kind == "endif" and guards:
                guards.pop()
            continue
        if line.lstrip().startswith("#"):
            continue  # #define, #include, #pragma ...
        live = tuple(level[-1] for level in guards)
        for token in TOKENS.finditer(line):
            namespace = tuple(part for name in braces if name for part in name.split("::") if part)
            if token.group("ns"):
                braces.append(token.group("name") or "(anonymous)")
            elif token.group("open"):
                braces.append(None)
            elif token.group("close"):
                if braces:
                    braces.pop()
            elif token.group("using"):
                found.append((number, "using c10::hip", namespace, live))
            elif token.group("type") not in NOT_TYPES:
                found.append((number, "declaration", namespace, live))
    return found


def header_verdict(include_dirs: list[str], defines: dict[str, int]) -> tuple[bool, str]:
    """Whether `at::cuda::getCurrentHIPStream` resolves in these headers under these defines, and why (one line).
    It resolves when declared in at::cuda, or declared in c10::hip and at::cuda has `using namespace c10::hip`, each
    under guards that hold. Every header is read (a superset of what the source includes)."""
    seen: dict[str, list[tuple[str, tuple[str, ...], tuple[str, ...]]]] = {}
    for root in include_dirs:
        for folder, _, files in sorted(os.walk(root)):
            for name in sorted(files):
                path = Path(folder) / name
                try:
                    data = path.read_bytes()
                except OSError:
                    continue
                if SYMBOL.encode() not in data and b"c10::hip" not in data:
                    continue
                for number, what, namespace, guards in scan(data.decode(errors="replace")):
                    seen.setdefault(what, []).append((f"{path.relative_to(root)}:{number}", namespace, guards))

    def usable(entries, namespace):
        out = []
        for where, ns, guards in entries:
            if ns != namespace:
                continue
            results = [evaluate(g, defines) for g in guards]
            if all(r is True for r in results):
                out.append((where, ""))
            else:
                failed = [g for g, r in zip(guards, results) if r is not True]
                out.append((where, f"guarded by `#if {' && '.join(failed)}`, false under the build's defines"))
        return out

    direct = usable(seen.get("declaration", []), ("at", "cuda"))
    hip = usable(seen.get("declaration", []), ("c10", "hip"))
    alias = usable(seen.get("using c10::hip", []), ("at", "cuda"))
    ok = [w for w, why in direct if not why]
    if ok:
        return True, f"at::cuda::{SYMBOL} is declared in at::cuda ({ok[0]})"
    hip_ok = [w for w, why in hip if not why]
    alias_ok = [w for w, why in alias if not why]
    if hip_ok and alias_ok:
        return True, f"c10::hip::{SYMBOL} ({hip_ok[0]}) reaches at::cuda through `using namespace c10::hip` ({alias_ok[0]})"
    if not hip and not direct:
        return False, f"no header declares {SYMBOL} in c10::hip or at::cuda"
    why = [f"{w}: {reason}" for w, reason in (*direct, *hip) if reason][:1] or \
          [f"{w}: {reason}" for w, reason in alias if reason][:1] or ["at::cuda does not use namespace c10::hip"]
    return False, f"at::cuda::{SYMBOL} does not resolve: {why[0]}"


def defines_of(flags: list[str]) -> dict[str, int]:
    """The -D macros of a compile line (value 1 when none or not a number), with the compiler's own."""
    out = dict(COMPILER_DEFINES)
    for flag in flags:
        if flag.startswith("-D"):
            name, _, value = flag[2:].partition("=")
            out[name] = int(value) if value.lstrip("-").isdigit() else 1
    return out


# ---------------------------------------------------------------- the compile line (pure)

def compile_argv(hipcc: str, source: str, src_root: str, arch: str, torch_includes: list[str], python_include: str,
                 hip_flags: list[str], hipcc_flags: list[str], cxx11_abi: bool) -> list[str]:
    """hipcc on the hipified source as torch's BuildExtension would run it for flash-attn's extension, parse only."""
    includes = [os.path.join(src_root, d) for d in CK_INCLUDES] + list(torch_includes) + [python_include]
    return [hipcc, "-fsyntax-only", *(f"-I{d}" for d in includes), *hip_flags, *hipcc_flags, f"--offload-arch={arch}",
            *CK_FLAGS, "-DTORCH_API_INCLUDE_EXTENSION_H", "-DTORCH_EXTENSION_NAME=flash_attn_2_cuda",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(cxx11_abi)}", source]


# ---------------------------------------------------------------- what runs in the stage

def torch_facts() -> dict:
    """The base's torch, as BuildExtension sees it: ROCm home, include paths, HIP flags, ABI, version."""
    import sysconfig

    import torch
    from torch.utils import cpp_extension as ext

    try:
        includes = ext.include_paths(device_type="cuda")  # on ROCm: torch's and ROCm's (IS_HIP_EXTENSION)
    except OSError:  # a torch built for neither CUDA nor ROCm: no compiler to probe with (main says so)
        includes = ext.include_paths()
    return {"torch": torch.__version__, "rocm_home": ext.ROCM_HOME, "includes": list(includes),
            "torch_include": os.path.join(os.path.dirname(torch.__file__), "include"),
            "python_include": sysconfig.get_paths()["include"], "hip_flags": list(ext.COMMON_HIP_FLAGS),
            "hipcc_flags": list(ext.COMMON_HIPCC_FLAGS), "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI)}


def extract(sdist: Path, dest: Path) -> Path:
    """The sdist's top folder under `dest`."""
    with tarfile.open(sdist) as tar:
        kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(dest, **kwargs)
    [top] = [p for p in dest.iterdir() if p.is_dir()]
    return top


def hipify(src_root: Path) -> Path:
    """SOURCE copied to .cu and hipified by the installed torch, with the arguments CUDAExtension passes on ROCm."""
    from torch.utils.hipify import hipify_python

    cpp = src_root / SOURCE
    cu = cpp.with_suffix(".cu")
    shutil.copy(cpp, cu)
    build_dir = str(src_root)
    result = hipify_python.hipify(project_directory=build_dir, output_directory=build_dir, header_include_dirs=[],
                                  includes=[os.path.join(build_dir, "*")], extra_files=[str(cu.resolve())],
                                  show_detailed=False, is_pytorch_extension=True, hipify_extra_files_only=True)
    entry = result.get(str(cu.resolve()))
    return Path(entry.hipified_path) if entry is not None and entry.hipified_path else cu


def flash_attn_version(src_root: Path) -> str:
    match = re.search(r'__version__\s*=\s*"([^"]+)"', (src_root / "flash_attn" / "__init__.py").read_text())
    return match.group(1) if match else "?"


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 3:
        print("usage: kernel_probe.py SDIST GPU_ARCH WORKDIR", file=sys.stderr)
        return 2
    sdist, arch, work = Path(args[0]), args[1].split(";")[0], Path(args[2])
    work.mkdir(parents=True, exist_ok=True)
    src_root = extract(sdist, work)
    source = hipify(src_root)
    facts = torch_facts()
    fa = flash_attn_version(src_root)
    hipcc = os.path.join(facts["rocm_home"], "bin", "hipcc") if facts["rocm_home"] else ""
    argv_ = compile_argv(hipcc, str(source), str(src_root), arch, facts["includes"], facts["python_include"],
                         facts["hip_flags"], facts["hipcc_flags"], facts["cxx11_abi"])
    resolves, why = header_verdict([facts["torch_include"]], defines_of(argv_))
    print(f"kernel probe: torch {facts['torch']}, flash-attn {fa}, {source.relative_to(src_root)} for {arch}: "
          f"headers: {why}", flush=True)
    if not hipcc or not os.access(hipcc, os.X_OK):
        print(f"kernel probe: error: no hipcc under torch's ROCM_HOME ({facts['rocm_home']}): the base image is not "
              "a ROCm build with its compiler", file=sys.stderr)
        return 1
    print("kernel probe: " + " ".join(argv_), flush=True)
    try:
        proc = subprocess.run(argv_, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        print(f"kernel probe: error: one source did not parse in {TIMEOUT_S} s", file=sys.stderr)
        return 1
    if proc.returncode == 0:
        print(f"kernel probe: {source.name} compiles: building the rest", flush=True)
        return 0
    errors = [line for line in proc.stderr.splitlines() if "error:" in line][:5]
    print("\n".join(["kernel probe: error: flash-attn's CK sources do not compile against this base:", *errors,
                     f"kernel probe: {why}" if not resolves else "",
                     "kernel probe: " + ADVICE.format(fa=fa, torch=facts["torch"])]).replace("\n\n", "\n"),
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
