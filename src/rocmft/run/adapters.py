"""What a run's adapter was stacked on: read by the chain (a run that starts FROM another) and by the serve
target (loading a run), which is why it lives in neither."""

from __future__ import annotations

from typing import Any

__all__ = ["upstream_adapters"]


def upstream_adapters(train_args: dict[str, Any]) -> list[str]:
    """The adapters a run's own adapter was trained on top of (merged into its base first): to load the run,
    they come before its own, in order."""
    if not train_args.get("create_new_adapter"):
        return []
    named = train_args.get("adapter_name_or_path") or []
    names = named if isinstance(named, list) else str(named).split(",")
    return [n.strip() for n in names if n.strip()]
