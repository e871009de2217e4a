"""The kernel stage's probe (rocmft.image.kernel_probe): one flash-attn CK source hipified and parsed against the base's
torch before the ~1,400 others. No ROCm compiler runs here, so: the header check runs for real against the installed
torch's headers (the CPU wheel ships c10's ROCm branches) and on hand-made header trees; the hipify step runs for real
with the installed torch; the hipcc line and the Dockerfile step are tested as data; the script runs end to end here up
to the compiler it cannot find."""

from __future__ import annotations

import re
import tarfile
from importlib.util import find_spec
from pathlib import Path

import pytest

from rocmft.hardware import arches
from rocmft.hardware.versions import from_lock
from rocmft.image import build_plan, context
from rocmft.image import kernel_probe as kp
from rocmft.image.kernels import MaxJobs
from tests.unit.image.test_kernels import DOCKERFILE, stages

torch_spec = find_spec("torch")
TORCH_INCLUDE = str(Path(torch_spec.origin).parent / "include") if torch_spec else ""


def _torch_hip_defines() -> dict[str, int]:
    """The -D flags torch's BuildExtension adds to every HIP compile (COMMON_HIP_FLAGS: USE_ROCM=1 among them)."""
    from torch.utils import cpp_extension

    return kp.defines_of(list(cpp_extension.COMMON_HIP_FLAGS) + list(cpp_extension.COMMON_HIPCC_FLAGS))


def test_real_torch_headers_resolve_the_call_only_with_the_extension_builds_defines():
    ok, why = kp.header_verdict([TORCH_INCLUDE], _torch_hip_defines())
    assert ok, why
    assert "c10/cuda/CUDAStream.h" in why and "using namespace c10::hip" in why and "Macros.h" in why
    # The same headers without USE_ROCM: the compatibility names are behind `#ifdef USE_ROCM` in this torch
    without = {k: v for k, v in _torch_hip_defines().items() if k != "USE_ROCM"}
    ok, why = kp.header_verdict([TORCH_INCLUDE], without)
    assert not ok and "guarded by `#if defined(USE_ROCM)`" in why and "CUDAStream.h" in why


def _tree(tmp_path: Path, stream_h: str) -> str:
    """A torch include tree of two headers: c10's macros (at::cuda uses c10::hip) and a stream header."""
    root = tmp_path / "include"
    (root / "c10" / "macros").mkdir(parents=True)
    (root / "c10" / "hip").mkdir(parents=True)
    (root / "c10" / "macros" / "Macros.h").write_text(
        "#ifndef C10_MACROS_H_\n#define C10_MACROS_H_\n#ifdef __cplusplus\n"
        "namespace at::cuda {\nusing namespace c10::hip;\n} // namespace at::cuda\n#endif\n#endif\n")
    (root / "c10" / "hip" / "HIPStream.h").write_text(stream_h)
    return str(root)


DEFINES = kp.defines_of(["-D__HIP_PLATFORM_AMD__=1", "-DUSE_ROCM=1"])


def test_header_data_torch_210_layout_unguarded_resolves(tmp_path):
    # the hipify-v1 layout: c10::hip's own function, declared with no guard
    ok, why = kp.header_verdict([_tree(tmp_path, (
        "#pragma once\nnamespace c10 { namespace hip {\n"
        "C10_HIP_API HIPStream getCurrentHIPStream(DeviceIndex device_index = -1);\n}} // namespace c10::hip\n"))], DEFINES)
    assert ok and "c10/hip/HIPStream.h:3" in why


def test_header_data_a_guard_the_build_does_not_define_is_the_reason(tmp_path):
    ok, why = kp.header_verdict([_tree(tmp_path, (
        "#pragma once\n// hipify v2 backward compat in external projects\n"
        "#if defined(USE_ROCM) && defined(TORCH_HIP_COMPAT_NAMES)\nnamespace c10::hip {\n"
        "inline c10::cuda::CUDAStream getCurrentHIPStream(DeviceIndex i = -1) {\n"
        "  return c10::cuda::getCurrentCUDAStream(i);\n}\n} // namespace c10::hip\n#endif\n"))], DEFINES)
    assert not ok
    assert why == ("at::cuda::getCurrentHIPStream does not resolve: c10/hip/HIPStream.h:5: guarded by "
                   "`#if defined(USE_ROCM) && defined(TORCH_HIP_COMPAT_NAMES)`, false under the build's defines")


def test_header_data_else_branches_using_declarations_and_calls(tmp_path):
    # the #else branch of a satisfied #ifdef is dead; a call (`return getCurrentHIPStream(...)`) declares nothing
    ok, why = kp.header_verdict([_tree(tmp_path, (
        "#ifdef USE_ROCM\nnamespace c10::hip { void other(); }\n#else\nnamespace c10::hip {\n"
        "HIPStream getCurrentHIPStream(int d);\n}\n#endif\n"
        "namespace c10::hip { inline auto f() { return getCurrentHIPStream(0); } }\n"))], DEFINES)
    assert not ok and "!(defined(USE_ROCM))" in why
    # a using-declaration in at::cuda itself is enough
    ok, why = kp.header_verdict([_tree(tmp_path / "b", (
        "namespace c10::hip { HIPStream getCurrentHIPStream(int d); }\n"
        "namespace at { namespace cuda {\nusing c10::hip::getCurrentHIPStream;\n}}\n"))], {})
    assert ok and "declared in at::cuda" in why


@pytest.mark.parametrize("condition, value", [
    ("defined(USE_ROCM)", True), ("!defined(USE_ROCM)", False), ("defined USE_ROCM && !defined(X)", True),
    ("ROCM_VERSION >= 70000", False), ("__cplusplus >= 201703L", True), ("(A || USE_ROCM) && !B", True),
    ("__has_include(<x.h>)", None),
])
def test_guard_evaluation_data(condition, value):
    assert kp.evaluate(condition, DEFINES) is value


def _flash_attn_like(root: Path) -> Path:
    """The two files of flash-attn 2.8.3.post2's csrc/flash_attn_ck the probe compiles, cut to what hipify acts on:
    flash_common.hpp's torch includes and mha_fwd.cpp's include and stream call (verbatim lines)."""
    ck = root / "csrc" / "flash_attn_ck"
    ck.mkdir(parents=True)
    (ck / "flash_common.hpp").write_text("#pragma once\n#include <torch/python.h>\n#include <ATen/cuda/CUDAContext.h>\n"
                                         "#include <c10/cuda/CUDAGuard.h>\n")
    (ck / "mha_fwd.cpp").write_text('#include "flash_common.hpp"\n\nvoid probe() {\n'
                                    "        auto stream = at::cuda::getCurrentHIPStream().stream();\n}\n")
    (root / "flash_attn").mkdir()
    (root / "flash_attn" / "__init__.py").write_text('__version__ = "2.8.3.post2"\n')
    return root


def test_real_hipify_keeps_the_call_the_header_check_looks_for(tmp_path):
    root = _flash_attn_like(tmp_path / "flash_attn-2.8.3.post2")
    hip = kp.hipify(root)
    assert hip.name == "mha_fwd.hip" and hip.parent == root / "csrc" / "flash_attn_ck"
    text = hip.read_text()
    assert '#include "flash_common_hip.hpp"' in text and "at::cuda::getCurrentHIPStream().stream()" in text
    assert "#include <ATen/hip/HIPContext.h>" in (hip.parent / "flash_common_hip.hpp").read_text()


def test_compile_line_data_hipcc_parses_the_one_source_with_torchs_and_flash_attns_flags():
    from torch.utils import cpp_extension

    argv = kp.compile_argv("/opt/rocm/bin/hipcc", "/w/fa/csrc/flash_attn_ck/mha_fwd.hip", "/w/fa", "gfx942",
                           ["/t/include", "/t/include/torch/csrc/api/include", "/opt/rocm/include"], "/py/include",
                           list(cpp_extension.COMMON_HIP_FLAGS), list(cpp_extension.COMMON_HIPCC_FLAGS), False)
    assert argv[:2] == ["/opt/rocm/bin/hipcc", "-fsyntax-only"] and argv[-1] == "/w/fa/csrc/flash_attn_ck/mha_fwd.hip"
    assert argv[2:8] == ["-I/w/fa/csrc/composable_kernel/include", "-I/w/fa/csrc/composable_kernel/library/include",
                         "-I/w/fa/csrc/composable_kernel/example/ck_tile/01_fmha", "-I/t/include",
                         "-I/t/include/torch/csrc/api/include", "-I/opt/rocm/include"]
    assert {"-DUSE_ROCM=1", "-D__HIP_PLATFORM_AMD__=1", "--offload-arch=gfx942", "-std=c++17",
            "-DCK_TILE_FLOAT_TO_BFLOAT16_DEFAULT=3", "-DTORCH_EXTENSION_NAME=flash_attn_2_cuda",
            "-D_GLIBCXX_USE_CXX11_ABI=0"} <= set(argv)
    assert "-c" not in argv and "-o" not in argv  # parse only: nothing is written


def test_the_script_runs_here_up_to_the_compiler_it_cannot_find(tmp_path, capsys):
    root = _flash_attn_like(tmp_path / "src" / "flash_attn-2.8.3.post2")
    sdist = tmp_path / "flash_attn-2.8.3.post2.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(root, arcname=root.name)
    code = kp.main([str(sdist), "gfx942;gfx950", str(tmp_path / "work")])
    out, err = capsys.readouterr()
    assert code == 1  # this torch is a CPU build: no hipcc
    assert re.search(r"kernel probe: torch \S+, flash-attn 2\.8\.3\.post2, csrc/flash_attn_ck/mha_fwd\.hip for gfx942: "
                     r"headers: c10::hip::getCurrentHIPStream", out)
    assert "error: no hipcc under torch's ROCM_HOME" in err
    assert kp.main([]) == 2


def test_dockerfile_data_a_ck_compile_runs_the_probe_first_and_only_then():
    run = next(i for i in stages(DOCKERFILE)["kernels"] if i.startswith("RUN "))
    probe, wheel = run.index("/kernels-in/kernel_probe.py \"${sdist[0]}\" \"$GPU_ARCHS\""), run.index("pip wheel")
    assert run.index('if [ "$KERNEL_BACKEND" = ck ] && [ -f /kernels-in/kernel_probe.py ]') < probe < wheel
    # the sdist it reads comes the way `pip wheel` takes it (the wheelhouse offline, the index online)
    download = run.index('-m pip download --no-cache-dir "${src[@]}"')
    assert download < probe and "FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE" in run[download - 120:download]
    # the host-kept wheel and the base's own flash-attn branches come before it: they compile nothing, probe nothing
    assert run.index("cp /kernels-in/flash_attn-*.whl") < run.index("source=base") < probe


def test_context_data_the_probe_travels_only_with_a_ck_compile(tmp_path):
    versions = from_lock()
    ck = build_plan(arches.table()["gfx942"], versions, "c", offline=False, max_jobs=MaxJobs(8, "x"),
                    kernel_cache_root=str(tmp_path / "none"))
    members = dict(context.kernel_members(ck))
    assert members["kernels/kernel_probe.py"] == Path(kp.__file__)
    triton = build_plan(arches.table()["gfx1100"], versions, "c", offline=False, max_jobs=MaxJobs(8, "x"))
    assert "kernels/kernel_probe.py" not in dict(context.kernel_members(triton))  # the rehearsal's compiling arch
    assert "a probe compiles csrc/flash_attn_ck/mha_fwd alone first" in "\n".join(ck.lines())


def test_the_probe_imports_nothing_but_the_standard_library_at_module_level():
    """It runs in the kernel stage's build venv, where rocmft is not installed."""
    tree = Path(kp.__file__).read_text()
    top = [line for line in tree.splitlines() if re.match(r"(import|from) ", line)]
    assert all(re.match(r"(from __future__|import (os|re|shutil|subprocess|sys|tarfile)$|from pathlib )", line)
               for line in top), top
