"""A recipe that uploads: `push_to_hub: true` makes the HF Trainer create a repo in the account of the token the
job holds (transformers' Trainer.init_hf_repo, at start) and push every save to it; `hub_private_repo: false`
makes that repo public. A recipe copied from a post, or `make import` of someone's config, did both with the
user's HF_TOKEN and no question (issue 43, N3). So such a recipe trains only when the user says so for that
command (PUSH_TO_HUB=1), every `hub_*` key with it; the repo is private unless the recipe says
`hub_private_repo: false` AND the user says PRIVATE=0 (as `make push` does)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..io.problems import Problem

OPT_IN = "PUSH_TO_HUB"
PUBLIC = "PRIVATE"  # PRIVATE=0: a public repo (make push's word too)


def keys(llamafactory: Mapping[str, Any]) -> list[str]:
    """The recipe's keys that push or say where and how: push_to_hub when on, every hub_* key that is set."""
    return [k for k, v in llamafactory.items()
            if (k == "push_to_hub" and v not in (False, None)) or (k.startswith("hub_") and v is not None)]


def render_default(args: dict[str, Any]) -> None:
    """A pushing recipe's repo is private unless it says otherwise (transformers' default, None, is the account's
    default: public for a personal one)."""
    if args.get("push_to_hub") not in (False, None) and args.get("hub_private_repo") is None:
        args["hub_private_repo"] = True


def problems(recipe_file: str, llamafactory: Mapping[str, Any], env: Mapping[str, str]) -> list[Problem]:
    """For a job (train, bench): an error per hub key without PUSH_TO_HUB=1, and for a public repo without PRIVATE=0."""
    out = []
    pushing = keys(llamafactory)
    if pushing and env.get(OPT_IN, "").strip().lower() not in ("1", "yes", "true"):
        for key in pushing:
            what = ("uploads the model to the Hugging Face Hub with your token" if key == "push_to_hub"
                    else "configures an upload to the Hugging Face Hub")
            out.append(Problem(recipe_file, f"llamafactory.{key}", f"{what}: a recipe does that only with your opt-in",
                               f"{OPT_IN}=1 to allow it for this command, if you mean to publish this run"))
    if llamafactory.get("hub_private_repo") is False and env.get(PUBLIC, "").strip() != "0":
        out.append(Problem(recipe_file, "llamafactory.hub_private_repo", "false makes the repo public: a recipe "
                           "does that only with your word", f"{PUBLIC}=0 on the command to publish it, or drop the key "
                           "(the repo is private then)"))
    return out
