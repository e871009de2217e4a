"""Token lengths as training will see them (TOKENIZER=<model dir>): imported only when asked for.

With LLaMA-Factory installed and the recipe naming a `template`, a row is encoded by that template
exactly as LLaMA-Factory's supervised preprocessing does before it truncates to `cutoff_len`, so
"exceeds cutoff_len" here means "will be truncated" (a pair counts its longer answer; a pretraining
document is its text plus EOS). Without it, the turns are joined with newlines
and tokenized as plain text (a lower bound: the chat markup is not counted).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..io.problems import Problem, ProblemReport


class TokenCounter:
    def __init__(self, tokenizer_dir: str, template: str | None) -> None:
        if not Path(tokenizer_dir).is_dir():
            raise ProblemReport([Problem("", "TOKENIZER", f"`{tokenizer_dir}` is not a folder",
                                         "give the model (or tokenizer) folder, e.g. TOKENIZER=models/tiny-llama")])
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise ProblemReport([Problem("", "TOKENIZER", "needs the training stack (transformers)", "run `make setup` first")]) from None
        try:
            with _quiet():
                self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any failure here is the user's folder
            raise ProblemReport([Problem("", "TOKENIZER", f"cannot load a tokenizer from `{tokenizer_dir}`: {exc}".splitlines()[0])]) from None
        self.template = None
        self.how = "plain text (turns joined; chat markup not counted)"
        if template:
            try:
                from llamafactory.data.template import get_template_and_fix_tokenizer
                from llamafactory.hparams import DataArguments
            except ImportError:
                pass
            else:
                import logging

                logging.getLogger("llamafactory").setLevel(logging.ERROR)
                with _quiet():
                    self.template = get_template_and_fix_tokenizer(self.tokenizer, DataArguments(template=template))
                self.how = f"LLaMA-Factory template `{template}`"

    def count(self, system: str | None, turns: list[tuple[str, str]]) -> int:
        with _quiet():
            if self.template is not None:
                messages = [{"role": role, "content": content} for role, content in turns]
                pairs = self.template.encode_multiturn(self.tokenizer, messages, system, None)
                return sum(len(a) + len(b) for a, b in pairs) + (1 if self.template.efficient_eos else 0)
            text = "\n".join(([system] if system else []) + [content for _, content in turns])
            return len(self.tokenizer(text, add_special_tokens=True)["input_ids"])

    def count_text(self, document: str) -> int:
        """A pretraining document as LLaMA-Factory's `pt` preprocessing tokenizes it: the text, then EOS."""
        with _quiet():
            return len(self.tokenizer(document, add_special_tokens=False)["input_ids"]) + 1


@contextlib.contextmanager
def _quiet():
    """transformers' own warnings (a row longer than the model's max length, ...) would drown the report. Its
    logger's level, for the duration of a call: never TRANSFORMERS_VERBOSITY in os.environ, which every process
    started afterwards would inherit, nor a level left behind for the rest of this process."""
    from transformers.utils import logging as transformers_logging

    before = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(before)
