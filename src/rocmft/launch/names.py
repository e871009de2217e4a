"""What a value may hold where rocmft writes it into text another program parses: `#SBATCH` lines and the
shell script around them, a Kubernetes manifest. Checked before anything is rendered, one problem each: a
newline in PARTITION would start a new script line, a YAML document in K8S_NAMESPACE a new object."""

from __future__ import annotations

import re

from ..io.problems import Problem

CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Kubernetes object names (apimachinery's IsDNS1123Label / IsDNS1123Subdomain): a namespace is a label,
# a PVC or Secret a subdomain.
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# Slurm partition and account names (a comma-separated list of partitions is allowed).
SLURM_NAME = re.compile(r"[A-Za-z0-9_.+-]+(,[A-Za-z0-9_.+-]+)*")
# An image reference as Docker spells one: [registry[:port]/]path[:tag][@digest].
IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")


def has_control(value: str) -> bool:
    return bool(CONTROL.search(value))


def printable(value: str) -> str:
    """The value for an error line: control characters shown, never acted on."""
    return value.encode("unicode_escape").decode("ascii") if has_control(value) else value


def check(key: str, value: str | None, pattern: re.Pattern | None = None, hint: str = "",
          max_len: int | None = None) -> list[Problem]:
    """[] when `value` is unset or fits; else one problem naming KEY."""
    if not value:
        return []
    if has_control(value):
        return [Problem("", key, f"`{printable(value)}` holds a control character (a newline, tab, ...)",
                        "one line of plain text")]
    if pattern is not None and not pattern.fullmatch(value) or max_len is not None and len(value) > max_len:
        return [Problem("", key, f"`{value}` is not {hint}")]
    return []
