"""What an existing image holds, from its labels (`make image-info ARCH=...`)."""

from __future__ import annotations

from .plan import LABEL_PREFIX

# The order people read them in; any other ai.rocmft.* label follows.
_ORDER = ("arch", "pytorch_rocm_arch", "rocm", "python", "torch", "llamafactory", "deepspeed", "deepspeed_ops",
          "flash_attn", "bitsandbytes", "liger_kernel", "packages", "selfcheck", "offline", "version", "commit")


def rocmft_labels(labels: dict[str, str]) -> list[tuple[str, str]]:
    ours = {k[len(LABEL_PREFIX):]: v for k, v in labels.items() if k.startswith(LABEL_PREFIX)}
    keys = [k for k in _ORDER if k in ours] + sorted(k for k in ours if k not in _ORDER)
    return [(k, ours[k]) for k in keys]


def label_lines(image) -> list[str]:
    labels = dict((image.attrs.get("Config") or {}).get("Labels") or {})
    pairs = rocmft_labels(labels)
    if not pairs:
        return ["  labels    (none of rocmft's: not a rocmft image?)"]
    width = max(len(k) for k, _ in pairs)
    out = ["  holds"]
    for k, v in pairs:
        if k == "packages":  # the arch table's list (docker/arches.yaml): one package and version a line
            words = v.split() or ["-"]
            out += [f"    {k if i == 0 else '':<{width}}  {w.replace('==', ' ')}" for i, w in enumerate(words)]
        else:
            out.append(f"    {k:<{width}}  {v if v != '' else '-'}")
    base = labels.get("org.opencontainers.image.base.name")
    if base:
        out.append(f"    {'base':<{width}}  {base}")
    return out


def info_lines(image) -> list[str]:
    attrs = image.attrs
    tags = ", ".join(image.tags) or "(untagged)"
    size = (attrs.get("Size") or 0) / 1e9
    return [
        f"image     {tags}",
        f"  id        {image.id.split(':')[-1][:12]}  {size:.2f} GB, created {attrs.get('Created', '?')[:19]}",
        *label_lines(image),
    ]


_SOURCES = {"built": "compiled in the image's build", "host": "a wheel kept on the build host (compiled by an earlier build)",
            "base": "the base image's own"}


def kernel_lines(record: dict) -> list[str]:
    """Where the image's kernel wheel came from and how long its stage took (/opt/rocmft/kernels.json)."""
    if not record:
        return ["  kernel    (no record: built before the kernel stage existed)"]
    from .kernels import fmt_duration

    source = record.get("source", "?")
    out = ["  kernel",
           f"    source     {source}: " + (f"{_SOURCES[source]} - " if source in _SOURCES else "") + record.get("detail", ""),
           f"    stage took {fmt_duration(float(record.get('seconds') or 0))}"]
    if record.get("backend", "none") != "none":
        out.append(f"    flash-attn {record.get('version')} ({record.get('backend')}, {record.get('gpu_archs')}), "
                   f"head dims {record.get('head_dims') or '-'}, MAX_JOBS {record.get('max_jobs')}")
    if record.get("wheels"):
        out.append(f"    wheel      {record['wheels']}")
    return out
