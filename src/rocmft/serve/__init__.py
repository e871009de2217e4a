"""Try what you trained: `make chat`, `make serve` (OpenAI-compatible API) and `make webui` (LlamaBoard).

The flow, one job per module:
  (run/target.py: a run dir -> what to load: base model + adapter, its merged export, or a full fine-tune's
               output; the run's own template; the arch and the runtime it trained in)
  settings.py  SET="max_new_tokens=256 temperature=0.2" -> generation settings, checked against the
               keys LLaMA-Factory's inference parser takes
  plan.py      pure: target + settings + host/port -> a `ServePlan` (argv, environment, secret names,
               the URL): what a test pins as data; who may use a server (API key, LlamaBoard's password)
  session.py   the above for one command line, every problem reported at once
  ports.py     is the port free, is the server answering
  local.py     runs a plan as a process of this venv; docker.py runs it in the arch's container on the
               host's network, bound to HOST (the container spec comes from launch/docker, as for training)
  foreground.py  a server until Ctrl-C/SIGTERM: URL once it answers, its log, nothing left behind
  ask.py       what runs INSIDE the runtime for `PROMPT=`: LLaMA-Factory's ChatModel answers one prompt
  llamaboard.py  what runs INSIDE the runtime for `make webui`: LlamaBoard, never shared, a login beyond loopback

Nothing here imports torch or LLaMA-Factory except ask.py and llamaboard.py, which only run in the job's runtime.

May import: io, hardware, recipe, run, launch.
"""
