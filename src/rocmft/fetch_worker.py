"""`python -m rocmft.fetch_worker --model ORG/NAME [--dataset ORG/NAME ...]`: the download `make fetch` plans
(rocmft.fetch), run where huggingface_hub is (the training venv or the image).

huggingface_hub.snapshot_download into the HF cache: its tqdm bars show progress, and an interrupted download
resumes from its `.incomplete` blobs. The token is huggingface_hub's own lookup (HF_TOKEN from the environment,
then the `hf auth login` file): never on a command line, never written. Each failure is one line and exit 2.
"""

from __future__ import annotations

import argparse
import sys

# A model repo often carries other formats of the same weights that LLaMA-Factory never reads (Llama-3's
# original/consolidated.*.pth doubles the download: 16 GB for the 8B).
MODEL_IGNORE = ["original/*", "*.pth", "*.gguf", "*.onnx", "*.onnx_data", "*.h5", "*.msgpack", "*.tflite", "*.ot"]


def fetch(repo_id: str, repo_type: str) -> tuple[int, str]:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    what = f"{repo_type} `{repo_id}`"
    try:
        path = snapshot_download(repo_id, repo_type=repo_type,
                                 ignore_patterns=MODEL_IGNORE if repo_type == "model" else None)
    except GatedRepoError:
        return 2, (f"error: {what} is gated: accept its license at https://huggingface.co/"
                   f"{'datasets/' if repo_type == 'dataset' else ''}{repo_id} and export HF_TOKEN=<a read token of that account>")
    except RepositoryNotFoundError:
        return 2, f"error: no {what} on the Hub that this token can read (check the spelling; a private repo needs HF_TOKEN)"
    except LocalEntryNotFoundError:
        return 2, (f"error: {what} is not in the Hugging Face cache and cannot be downloaded from here "
                   "(HF_HUB_OFFLINE=1, or no connection to the Hub): unset HF_HUB_OFFLINE on a machine with internet")
    except HfHubHTTPError as exc:
        return 2, f"error: the Hub refused {what}: {str(exc).splitlines()[0]}"
    return 0, f"fetched {what} -> {path}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--dataset", action="append", default=[])
    args = parser.parse_args(argv)
    worst = 0
    for repo_type, repos in (("model", args.model), ("dataset", args.dataset)):
        for repo in repos:
            code, line = fetch(repo, repo_type)
            print(line, file=sys.stderr if code else sys.stdout, flush=True)
            worst = max(worst, code)
    return worst


if __name__ == "__main__":
    sys.exit(main())
