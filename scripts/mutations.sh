#!/usr/bin/env bash
# Do the tests catch what they claim to? One-line mutations of the code, each run against the tests that should
# kill it, then reverted (`git checkout -- .`: run it in a checkout with nothing uncommitted, e.g. a clone).
# Each is a bug an audit once found surviving (issue 33) or a report's number that a test recomputes.
#   bash scripts/mutations.sh [CHECKOUT]     # ~2 min once .venv and the tiny model are set up
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
git checkout -q -- .
if (( ${#survived[@]} )); then echo "survived: ${survived[*]}"; exit 1; fi
echo "every mutation killed"
