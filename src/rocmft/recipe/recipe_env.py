"""A recipe's `env:` is code too. A variable there can send the job's requests elsewhere (HF_ENDPOINT, a
`*_BASE_URL`, a CA bundle) or run code before any of ours (LD_PRELOAD, PYTHONPATH, BASH_ENV) or in a build the job
does (PATH's ninja, CC, ROCM_PATH's hipcc, CFLAGS). A recipe copied
from a post or a colleague runs such a variable only when the user says so for that command
(TRUST_RECIPE_ENV=1), and a secret never goes to a job whose recipe redirects the service it authenticates to,
opt-in or not: the token would be sent to that address with the first request."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

from ..io.problems import Problem

OPT_IN = "TRUST_RECIPE_ENV"
# Where a job connects to: the service's address, a proxy, the certificates that say who answers.
# MLFLOW_TRACKING_URI is MLflow's server address: a recipe setting it would receive the user's MLflow credentials.
REDIRECTS = ("HF_ENDPOINT", "HF_HUB_*", "*_BASE_URL", "*_ENDPOINT", "*_TRACKING_URI", "*_PROXY",
             "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_*")
# What the dynamic loader, Python or bash read before the job's own code.
LOADERS = ("LD_*", "PYTHON*", "BASH_ENV")
# What a build in the job runs and reads (issue 43, N9): DeepSpeed's op builder and torch's cpp_extension JIT-compile
# on first use (CPU Adam, shm comm) and find ninja by PATH, the compilers by CC/CXX (ROCm: ROCM_PATH/HIP_PATH's
# hipcc), headers and libraries by the search paths; a flag variable can load a compiler plugin (-fplugin=).
TOOLCHAIN = ("PATH", "CC", "CXX", "CPP", "LD", "AS", "AR", "NVCC", "HIPCC", "HIPCC_*", "CPATH", "C_INCLUDE_PATH",
             "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "COMPILER_PATH", "GCC_EXEC_PREFIX", "CFLAGS", "CXXFLAGS",
             "CPPFLAGS", "LDFLAGS", "ROCM_PATH", "ROCM_HOME", "ROCM_ROOT", "HIP_PATH", "HIP_CLANG_PATH",
             "HIP_DEVICE_LIB_PATH", "CUDA_HOME", "CUDA_PATH", "PKG_CONFIG_*", "CMAKE_*")
# Certificates decide who may answer for every host: with them replaced, no secret is safe. A proxy is not in
# here: HTTPS passes through it as an opaque tunnel.
ALL_SERVICES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_*")
# A secret's service is the first word of its name; these names spell the same service another way.
SERVICE_ALIASES = {"HUGGING": "HF"}


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name.upper(), p) for p in patterns)


def guarded(env: Mapping[str, str]) -> list[str]:
    """The recipe's variables that redirect a service or load code: each needs the opt-in."""
    return [name for name in env if _matches(name, REDIRECTS + LOADERS + TOOLCHAIN)]


def _service(name: str) -> str:
    word = name.upper().split("_", 1)[0]
    return SERVICE_ALIASES.get(word, word)


def withheld(env: Mapping[str, str], secrets: Iterable[str]) -> tuple[str, ...]:
    """The secrets (names) a job of this recipe must not get: those of a service its env redirects."""
    redirected = [name for name in env if _matches(name, REDIRECTS) and not _matches(name, ("*_PROXY",))]
    if any(_matches(name, ALL_SERVICES) for name in redirected):
        return tuple(dict.fromkeys(secrets))
    services = {_service(name) for name in redirected}
    return tuple(dict.fromkeys(s for s in secrets if _service(s) in services))


def opted_in(host_env: Mapping[str, str]) -> bool:
    return host_env.get(OPT_IN, "").strip().lower() in ("1", "yes", "true")


def problems(recipe_file: str, env: Mapping[str, str], host_env: Mapping[str, str], secrets: Iterable[str]) -> list[Problem]:
    """An error per guarded variable without the opt-in; a warning per secret withheld from the job."""
    out = []
    if not opted_in(host_env):
        for name in guarded(env):
            kind = ("sends the job's requests elsewhere" if _matches(name, REDIRECTS) else "loads code into the job")
            out.append(Problem(recipe_file, f"env.{name}", f"{kind}: a recipe sets it only with your opt-in",
                               f"{OPT_IN}=1 to allow it for this command, if you trust this recipe"))
    for name in withheld(env, secrets):
        out.append(Problem(recipe_file, "env", f"{name} is not passed to this job: the recipe redirects the "
                           "service it authenticates to", "unset the redirect to use the token", severity="warning"))
    return out
