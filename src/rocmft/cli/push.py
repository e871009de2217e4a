"""`rocmft push RUN --repo owner/name`: the run's adapter (or merged model) and a model card to the Hugging Face
Hub, private unless --public, the token from the shell's HF_TOKEN (rocmft.publish.hub)."""

from __future__ import annotations

import os
import sys

HELP = "push a run's adapter (or --what merged) and a model card to the Hugging Face Hub, private unless --public"


def add_arguments(parser) -> None:
    parser.add_argument("run", nargs="?", default="last", help="run dir or name, or `last`")
    parser.add_argument("--repo", default="", help="the Hub repo, owner/name")
    parser.add_argument("--what", default="adapter", help="adapter (default) or merged")
    parser.add_argument("--public", action="store_true", help="create the repo public (make push PRIVATE=0)")
    parser.add_argument("--dry-run", action="store_true", help="print the repo, its visibility and the files; send nothing")


def run(args) -> int:
    from ..io.problems import ProblemReport
    from ..io.safe_text import one_line
    from ..publish import hub, source

    env = os.environ
    plan = hub.plan(source.load(args.run), args.repo, args.what, not args.public, env, args.dry_run)
    if plan.endpoint != hub.DEFAULT_ENDPOINT:
        print(f"[rocmft] note: HF_ENDPOINT is {plan.endpoint}: the token goes there, not to huggingface.co",
              file=sys.stderr)
    if args.dry_run:
        print("[rocmft] dry run: nothing sent")
        print("\n".join(plan.lines(env)))
        print()
        print(plan.card)
        return 0
    print(f"[rocmft] pushing the {plan.what} of {plan.run.run_path} to {plan.repo} "
          f"({'private' if plan.private else 'PUBLIC'}): {len(plan.files) + 1} files", flush=True)
    try:
        url = hub.push(plan, env)
    except ProblemReport:
        raise
    except Exception as exc:  # noqa: BLE001 - the Hub's answer (huggingface_hub's HfHubHTTPError, ...), one line
        print(f"[rocmft] push FAILED: {one_line(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)}",
              file=sys.stderr)
        return 1
    print(f"[rocmft] pushed: {url}")
    return 0
