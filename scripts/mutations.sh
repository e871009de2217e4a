#!/usr/bin/env bash
# Do the tests catch what they claim to? One-line mutations of the code, each run against the tests that should
# kill it, then reverted (`git checkout -- .`: run it in a checkout with nothing uncommitted, e.g. a clone).
# Each is a bug an audit once found surviving (issue 33) or a report's number that a test recomputes.
#   bash scripts/mutations.sh [CHECKOUT]     # once .venv and the tiny model are set up: the unit-test mutations take
#   ~5 min; each real CPU run (pytest -m train tests) minutes more on a loaded 2-core machine
# Prints each mutation, the tests' verdict, and exits 1 when one survives (its tests passed).
set -u
cd "${1:-.}"
[[ -z $(git status --porcelain --untracked-files=no) ]] || { echo "error: uncommitted changes here: $PWD (run it in a clone)" >&2; exit 2; }
PY=.venv/bin/python
survived=()
run() {  # name, sed-expr file, tests...
  local name=$1 expr=$2 file=$3; shift 3
  git checkout -q -- . && sed -i "$expr" "$file"
  if git diff --quiet; then echo "--- $name: SURVIVED: the code it mutates moved (sed changed nothing)"; survived+=("$name"); return; fi
  echo "=== MUTATION $name: $(git diff -U0 | grep '^[-+][^-+]' | tr '\n' ' ')"
  $PY -m pytest -q -p no:cacheprovider -x "$@" 2>&1 | tail -4
  local code=${PIPESTATUS[0]}
  if [[ $code == 1 ]]; then echo "--- $name: killed"; else echo "--- $name: SURVIVED (pytest exit $code)"; survived+=("$name"); fi
  git checkout -q -- .
}
run resume_lr_noop '/def on_train_begin(self, args, state, control/a\        return' src/rocmft/callbacks/resume_lr.py \
  tests/unit/callbacks/test_resume_lr_callback.py
run digest_validate_only 's|validate.judging_source(place.kind, paths.root())|validate.judging_source(place.kind, paths.root()) / "validate"|' src/rocmft/pipeline.py \
  tests/unit/validate/test_cache.py
# The same mutation twice: with -x the first failing test stops a run, and each anchor must kill it on its own.
run throughput_half 's|^        tps = (lo \* w.peak_tflops \* 1e12 / flops \* factor, hi \* w.peak_tflops \* 1e12 / flops \* factor)|        tps = (0.5 * lo * w.peak_tflops * 1e12 / flops * factor, 0.5 * hi * w.peak_tflops * 1e12 / flops * factor)|' src/rocmft/plan/throughput.py \
  tests/unit/plan/test_published_throughput.py
run throughput_half_readme 's|^        tps = (lo \* w.peak_tflops \* 1e12 / flops \* factor, hi \* w.peak_tflops \* 1e12 / flops \* factor)|        tps = (0.5 * lo * w.peak_tflops * 1e12 / flops * factor, 0.5 * hi * w.peak_tflops * 1e12 / flops * factor)|' src/rocmft/plan/throughput.py \
  tests/unit/plan/test_readme_throughput.py tests/unit/benchmarks/test_gpu_truth.py
run throughput_double 's|^        tps = (lo \* w.peak_tflops \* 1e12 / flops \* factor, hi \* w.peak_tflops \* 1e12 / flops \* factor)|        tps = (2 * lo * w.peak_tflops * 1e12 / flops * factor, 2 * hi * w.peak_tflops * 1e12 / flops * factor)|' src/rocmft/plan/throughput.py \
  tests/unit/plan/test_published_throughput.py
run kernel_estimate_ignores_max_jobs 's|return sources_estimate(spec) \* JOB_SECONDS_PER_SOURCE / max(1, jobs)|return sources_estimate(spec) * JOB_SECONDS_PER_SOURCE / 128|' src/rocmft/image/kernels.py \
  tests/unit/image/test_kernels.py
run verbosity_in_environ 's|^    before = transformers_logging.get_verbosity()|    import os; os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error"); before = transformers_logging.get_verbosity()|' src/rocmft/data/tokens.py \
  tests/unit/plan/test_plan_real_tokens.py
run harness_noise_inverted 's|return abs(diff) <= Z95|return abs(diff) > Z95|' src/rocmft/evaluate/harness_report.py \
  tests/unit/evaluate/test_harness.py
run perplexity_off_its_loss 's|        return math.exp(loss)$|        return math.exp(loss) * 1.01|' src/rocmft/evaluate/plan.py \
  tests/train/test_eval_cpu.py
run eval_sides_swapped 's|base, tuned = side(results, "base"), side(results, "tuned")|base, tuned = side(results, "tuned"), side(results, "base")|' src/rocmft/evaluate/report.py \
  tests/train/test_eval_cpu.py
run resume_lr_noop_real '/def on_train_begin(self, args, state, control/a\        return' src/rocmft/callbacks/resume_lr.py \
  "tests/train/test_train_cpu.py::test_resume_continues_the_step_count_with_a_lower_learning_rate"
# Issue 44: the checks that guard a GPU booking, and the tests that now prove what they claim.
run canary_grad_norm_dropped 's|for quantity in ("loss", "grad_norm"):|for quantity in ("loss",):|' src/rocmft/canary/__init__.py \
  tests/unit/canary/test_canary.py
run price_upper_end_doubled 's|{cost.money(slow \* price)}|{cost.money(2 * slow * price)}|' src/rocmft/cli/plan.py \
  tests/unit/plan/test_cost.py
run price_per_million_collapsed 's|cost.per_million_tokens(price, lo))}|cost.per_million_tokens(price, hi))}|' src/rocmft/cli/plan.py \
  tests/unit/plan/test_cost.py
run default_hf_cache_refused 's|if first.startswith(".") and first != ".cache":|if first.startswith("."):|' src/rocmft/launch/mountable.py \
  tests/unit/launch/test_mountable.py
run var_lib_not_a_system_tree 's|"/var/run", "/var/lib", |"/var/run", |' src/rocmft/launch/mountable.py \
  tests/unit/launch/test_mountable.py
run liger_rule_skips_pt 's|^FLCE_STAGES = ("sft", "pt")|FLCE_STAGES = ("sft",)|' src/rocmft/recipe/rules.py \
  tests/unit/recipe/test_rules.py
run liger_rule_skips_freeze 's|        return "lm_head" in _listed(args.get("freeze_extra_modules"))|        return False|' src/rocmft/recipe/rules.py \
  tests/unit/recipe/test_rules.py
run certificates_one_variable 's|^ALL_SERVICES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_\*")|ALL_SERVICES = ("REQUESTS_CA_BUNDLE",)|' src/rocmft/recipe/recipe_env.py \
  tests/unit/launch/test_job_trust.py -k certificates
run certificates_need_no_opt_in 's|^             "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_\*")|             "REQUESTS_CA_BUNDLE")|' src/rocmft/recipe/recipe_env.py \
  tests/unit/launch/test_job_trust.py -k "opt_in and not trust_remote_code"
run dry_run_prints_a_secret "s|=<from your shell, never written>\" for name in secrets\]|={__import__('os').environ.get(name)}\" for name in secrets]|" src/rocmft/launch/dry_run.py \
  tests/unit/cli/test_train_dry_run.py
run real_tokens_per_gpu_not_divided 's|"real_tokens_per_s_per_gpu": real_total / elapsed / max(1, world_size)}|"real_tokens_per_s_per_gpu": real_total / elapsed}|' src/rocmft/callbacks/metrics.py \
  tests/unit/callbacks/test_real_tokens.py
run real_tokens_warmup_counted 's|        before = self.steps\[warmup - 1\]\["real_tokens"\] if warmup > 0 else 0|        before = 0|' src/rocmft/callbacks/metrics.py \
  tests/unit/callbacks/test_real_tokens.py
run real_tokens_shard_not_unwrapped 's|        loader = getattr(loader, "base_dataloader", loader)|        loader = loader|' src/rocmft/callbacks/metrics.py \
  tests/unit/callbacks/test_real_tokens.py
run memory_trace_free_requested_frees 's|        elif action == "free_completed" and addr in live:|        elif action in ("free_requested", "free_completed") and addr in live:|' src/rocmft/callbacks/memory_trace.py \
  tests/unit/callbacks/test_memory_trace.py
run tunableop_key_without_batch 's|"batch": str(args.get("per_device_train_batch_size") or 1)|"batch": "1"|' src/rocmft/launch/tuning.py \
  tests/unit/launch/test_tuning.py
run dequant_rdna3_as_cdna3 's|"rdna3": 128.0|"rdna3": 247.0|' src/rocmft/plan/quant.py tests/unit/plan/test_plan_quant.py
run dequant_family_ignored 's|    ratio = FLOPS_PER_BYTE.get(family, FALLBACK_FLOPS_PER_BYTE)|    ratio = FLOPS_PER_BYTE["cdna3"]|' src/rocmft/plan/quant.py \
  tests/unit/plan/test_plan_quant.py
run terminal_c1_passed_on 's|^TERMINAL_CONTROL = re.compile(r"\[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u2028\\u2029\]")|TERMINAL_CONTROL = re.compile(r"[\\x00-\\x08\\x0b-\\x1f\\x7f\\u2028\\u2029]")|' src/rocmft/io/safe_text.py \
  tests/unit/launch/test_terminal_escapes.py
run one_line_c1_passed_on 's|^CONTROL = re.compile(r"\[\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029\]")|CONTROL = re.compile(r"[\\x00-\\x1f\\x7f\\u2028\\u2029]")|' src/rocmft/io/safe_text.py \
  tests/unit/launch/test_terminal_escapes.py
run append_to_another_users_file 's|    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_uid != os.getuid():|    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:|' src/rocmft/io/hostio.py \
  tests/unit/run/test_run_dir_attacks.py
run session_guard_blind 's|^    changes = ProcessState.now().changes_since(before)$|    changes = []|' tests/conftest.py \
  tests/unit/test_session_guard.py
run session_guard_never_restores 's|^        before.restore()$|        pass|' tests/conftest.py tests/unit/test_session_guard.py
run harness_sections_merged 's|        data\["harness"\] = dict(harness)|        data["harness"] = {**dict(harness), "rows": [*(existing.get("harness") or {}).get("rows", []), *harness["rows"]]}|' src/rocmft/evaluate/report.py \
  tests/unit/evaluate/test_harness.py
# Issue 44's fresh mutations of this round's GPU-selection rule (launch/devices.py); four survived the first
# tests (the boundary of "free", a pre-rule plan on a two-arch host, a boolean pid, a label spelled through a link).
DEV=src/rocmft/launch/devices.py
run dev_other_host_holds 's|    if status.get("state") != "running" or status.get("host") != hostname:|    if status.get("state") != "running":|' $DEV \
  tests/unit/launch/test_devices.py
run dev_exited_container_holds 's|    elif container is not None and container\[1\] in HOLDING_STATES:|    elif container is not None:|' $DEV \
  tests/unit/launch/test_devices.py
run dev_last_gpus_not_first 's|    return tuple(mine\[:nproc\])|    return tuple(mine[len(mine) - nproc:])|' $DEV tests/unit/launch/test_devices.py
run dev_other_arch_gpus_chosen 's|    mine = \[str(g.index) for g in host_gpus if g.gfx == arch.name\]|    mine = [str(g.index) for g in host_gpus]|' $DEV \
  tests/unit/launch/test_devices.py
run dev_free_counts_taken 's|if g.gfx == arch.name and str(g.index) not in taken\]|if g.gfx == arch.name]|' $DEV tests/unit/launch/test_devices.py
run dev_free_off_by_one 's|    if len(free) >= nproc:|    if len(free) > nproc:|' $DEV tests/unit/launch/test_devices.py
run dev_pre_rule_plan_holds_every_arch 's|        return tuple(str(g.index) for g in host_gpus if not gfx or g.gfx == gfx)|        return tuple(str(g.index) for g in host_gpus)|' $DEV \
  tests/unit/launch/test_devices.py
run dev_boolean_pid_alive 's|    if isinstance(pid, int) and not isinstance(pid, bool) and alive(pid):|    if isinstance(pid, int) and alive(pid):|' $DEV \
  tests/unit/launch/test_devices.py
run dev_user_selection_ignored 's|    return prep.gpus or default_selection(|    return default_selection(|' $DEV tests/unit/launch/test_devices.py
run dev_label_not_resolved 's|    return os.path.realpath(path)|    return str(path)|' $DEV tests/unit/launch/test_devices.py
# Issue 44's fresh mutations of this round's RESUME=, Hub-token and ZeRO-3 planner code that survived the first
# tests (a checkpoint at exactly max_steps, a key inside a block given again, a copy's description, a cut-short
# checkpoint's warning, the original FROM=, a null hub key, each of the two stored-token guards alone, the auto and
# boundary persistence rules, QLoRA's linear swap, freeze's trained layers, an extra lm_head).
RES=src/rocmft/run/resume.py
run resume_past_end_off_by_one 's|or max_steps <= 0 or step < max_steps:|or max_steps <= 0 or step <= max_steps:|' $RES \
  tests/unit/run/test_resume.py
run resume_asked_subkey_not_winning 's|        if any(key == k or key.startswith(k + ".") or k.startswith(key + ".") for k in mine):|        if any(key == k for k in mine):|' $RES \
  tests/unit/run/test_resume.py
run resume_description_carried 's|^NOT_CARRIED = ("description",)|NOT_CARRIED = ()|' $RES tests/unit/run/test_resume.py
run resume_incomplete_not_warned 's|                for s in skipped\]|                for s in []]|' $RES tests/unit/run/test_resume.py
run resume_from_dropped 's|    return runs.read_status(run_dir).get("from_spec")|    return None|' $RES tests/unit/run/test_resume.py
run hub_key_unset_counted 's|(k.startswith("hub_") and v is not None)|(k.startswith("hub_"))|' src/rocmft/recipe/hub_push.py \
  tests/unit/importer/test_injection.py -k hub_keys_an_imported_config_leaves_unset
run stored_token_file_read 's|{"HF_TOKEN_PATH": "/dev/null", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}|{"HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}|' src/rocmft/launch/plan.py \
  tests/unit/launch/test_job_trust.py -k reads_no_stored_token
run implicit_token_on 's|"HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}}|"HF_HUB_DISABLE_IMPLICIT_TOKEN": "0"}}|' src/rocmft/launch/plan.py \
  tests/unit/launch/test_job_trust.py -k reads_no_stored_token
Z3=src/rocmft/plan/zero3.py
run z3_auto_threshold_1x 's|    return w.ds_persistence if w.ds_persistence is not None else 10 \* w.model.hidden_size|    return w.ds_persistence if w.ds_persistence is not None else w.model.hidden_size|' $Z3 \
  tests/unit/plan/test_plan_memory.py -k deepspeed_keeps_whole
run z3_threshold_exclusive 's|    return sum(n for n, _ in parameters(w) if n > limit)|    return sum(n for n, _ in parameters(w) if n >= limit)|' $Z3 \
  tests/unit/plan/test_plan_memory.py -k deepspeed_keeps_whole
run z3_linear_swap_on_qlora 's|    return w.zero_stage == 3 and w.ds_mem_efficient_linear and not (w.quant_bits and w.method == "lora")|    return w.zero_stage == 3 and w.ds_mem_efficient_linear|' $Z3 \
  tests/unit/plan/test_plan_memory.py -k linear_swap_keeps
run z3_freeze_first_layers 's|(lambda layer: layer >= n - k) if w.freeze_layers > 0|(lambda layer: layer < k) if w.freeze_layers > 0|' $Z3 \
  tests/unit/plan/test_plan_architecture.py -k freeze_tuning
run z3_head_never_trains 's|    out.append((m.head_params, w.method == "full" or "lm_head" in w.extra_trainable))|    out.append((m.head_params, w.method == "full"))|' $Z3 \
  tests/unit/plan/test_plan_architecture.py -k freeze_tuning
# Real runs (pytest -m train): DeepSpeed's own ZeRO-3 layout (its CPU comm op is compiled once into .cache/), the
# canary's tolerance against a bf16 run that must agree.
run zero3_shard_not_counted 's|        held = getattr(param, "ds_tensor", None)|        held = None|' src/rocmft/callbacks/metrics.py \
  tests/train/test_zero3_layout_cpu.py
run canary_false_alarm_on_bf16 's|    return 2 \* step \* max(UNIT_ROUNDOFF\[precision_name\], FP32_REORDER)|    return 2 * step * FP32_REORDER|' src/rocmft/canary/__init__.py \
  tests/train/test_canary_cpu.py -k bf16
git checkout -q -- .
if (( ${#survived[@]} )); then echo "survived: ${survived[*]}"; exit 1; fi
echo "every mutation killed"
