"""`rocmft runs`: every run with its stage, status, steps, final loss, tokens/s per GPU and duration (from the
runs' progress events), its attempts (Slurm requeues) and torchrun restarts; containers a crashed launcher left."""

from __future__ import annotations

NAME = "runs"
HELP = "list the runs (stage, status, steps, final loss, tokens/s per GPU, duration) and containers left by a crashed launcher"


def add_arguments(parser) -> None:
    parser.add_argument("--last", type=int, default=0, help="only the newest N runs")
    parser.add_argument("--price", default=None,
                        help="USD per GPU-hour: add each run's measured GPU-hours and cost (make runs PRICE=)")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _containers():
    """(left behind, run -> active container, note) from the daemon, when one is configured."""
    import socket

    from ..launch import docker as rt

    if not rt.daemon_configured():
        return [], {}, ""
    try:
        found = rt.labelled(rt.connect(timeout=10))
    except Exception as exc:  # noqa: BLE001 - the runs table is shown without it
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return [], {}, f"could not ask Docker for leftover containers: {first}"
    left, active = rt.leftovers(found, socket.gethostname(), rt.pid_alive)
    return left, active, ""


def _attempts_note(status: dict) -> list[str]:
    attempts = status.get("attempts") or []
    restarts = sum(int(a.get("restarts") or 0) for a in attempts)
    note = [f"{len(attempts)} attempts"] if len(attempts) > 1 else []
    if restarts:
        note.append(f"{restarts} restart{'s' if restarts != 1 else ''}")
    last = attempts[-1] if attempts else {}
    if status.get("state") in ("interrupted", "requeued") and last.get("checkpoint"):
        note.append(f"saved {last['checkpoint']}")
    return note


def run(args) -> int:
    from ..evaluate.report import harness_headline, tuned_loss
    from ..io.safe_text import one_line
    from ..plan import cost
    from ..run import runs

    price = cost.parse_price(getattr(args, "price", None))

    infos = runs.all_runs()
    if args.last:
        infos = infos[-args.last:]
    left, active, note = _containers()
    left_by_run = {c.run: c for c in left}
    rows = [("RUN", "RECIPE", "STAGE", "STATUS", "STEPS", "LOSS", "EVAL", "TOK/S/GPU", "TIME", "STARTED (UTC)",
             *(("GPU-H", f"COST @${price:g}") if price is not None else ()), "NOTE")]
    for info in infos:
        status = runs.read_status(info.path)
        state = info.state.upper() if info.state in ("diverged", "failed") else info.state
        path = str(info.path.resolve())
        extra = []
        if info.state == "diverged":
            extra.append(f"{status.get('cause', '?')}; last good: {status.get('last_good_checkpoint') or 'none'}")
        elif info.state == "failed" and info.exit_code is not None:
            extra.append(f"exit {info.exit_code}")
        elif info.state == "interrupted" and status.get("signal"):
            extra.append(status["signal"])
        elif info.state == "interrupted" and status.get("state") == "running":
            extra.append("launcher gone")
        elif info.state == "requeued":
            extra.append(f"slurm job {status.get('job_id', '?')} waits for its next attempt")
        extra += _attempts_note(status)
        if isinstance(status.get("reward_accuracy"), (int, float)):
            extra.append(f"reward accuracy {status['reward_accuracy']:.2f} (last logged steps)")
        benchmark = harness_headline(info.path)  # the last `make eval TASKS=`: first task's metric, its change
        if benchmark:
            extra.append(f"harness {benchmark}")
        tracked = tracking_of(info.path)
        if tracked:
            extra.append("tracking: " + ", ".join(tracked))
        if path in active:
            extra.append(f"in container {active[path]}")
        if path in left_by_run:
            c = left_by_run[path]
            extra.append(f"container {c.name} {c.status}, launcher gone: {c.fix}")
        loss = f"{info.final_loss:.4f}" if info.final_loss is not None else "-"
        evaluated = tuned_loss(info.path)  # the tuned model's, from the last `make eval`
        eval_loss = f"{evaluated:.4f}" if evaluated is not None else "-"
        tps = f"{info.tokens_per_s_per_gpu:,.0f}" if info.tokens_per_s_per_gpu else "-"
        steps = f"{info.last_step}/{info.max_steps or '?'}" if info.last_step is not None else "-"
        row = (info.path.name, info.recipe, info.stage, state, steps, loss, eval_loss, tps, _duration(info.duration_s),
               runs.utc_iso(info.started))
        if price is not None:
            row += money_cells(info.path, info.duration_s, price)
        # every cell one line of text: the recipe, stage, state and notes come from files the job can write
        rows.append(tuple(one_line(cell) for cell in (*row, "; ".join(str(e) for e in extra))))
    if len(rows) == 1:
        print("no runs yet: `make demo` trains the tiny model, `make train RECIPE=...` a recipe")
    else:
        shown = len(rows[0]) - 1  # the note is left unpadded, last
        widths = [max(len(r[i]) for r in rows) for i in range(shown)]
        for r in rows:
            print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r[:shown])) + ("  " + r[shown] if r[shown] else ""))
    if left:
        print()
        print("Containers left by a crashed launcher (remove them; a running one still holds its GPUs):")
        for c in left:
            print(f"  {c.name}  {c.status}  run {c.run}  ({c.launcher}: {c.why})")
            print(f"    {c.fix}")
    if note:
        print(f"note: {note}")
    return 0


def tracking_of(run_dir) -> list[str]:
    """Where the run's `report_to` trackers wrote: its train.yaml's trackers, each with the folder or server its
    launch plan gave it (plan.json's environment; a server URI exported in the shell is not recorded)."""
    import json

    import yaml

    from ..recipe import tracking

    try:
        report_to = (yaml.safe_load((run_dir / "train.yaml").read_text()) or {}).get("report_to")
        env = json.loads((run_dir / "plan.json").read_text()).get("env") or {}
    except (OSError, ValueError, AttributeError, yaml.YAMLError):
        return []
    if not isinstance(env, dict):
        return []
    # `all`: the trackers the images carry (docker/arches.yaml), the ones rocmft points at the run dir
    return tracking.where(tracking.names(report_to, {tracking.PACKAGES[t]: "" for t in tracking.KEPT}), env)


def gpus_of(run_dir) -> int | None:
    """The run's GPUs (processes per node x nodes) from its launch plan."""
    import json

    try:
        plan = json.loads((run_dir / "plan.json").read_text())
        return int(plan["nproc_per_node"]) * int(plan["nnodes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def money_cells(run_dir, seconds: float | None, price: float) -> tuple[str, str]:
    """(GPU-hours, cost) measured: the run's wall time from start to end x its GPUs."""
    from ..plan import cost

    gpus = gpus_of(run_dir)
    if seconds is None or gpus is None:
        return "-", "-"
    hours = cost.gpu_hours(seconds, gpus)
    return cost.hours_text(hours), cost.money(hours * price)
