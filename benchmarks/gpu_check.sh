#!/usr/bin/env bash
# The GPU figures in one device call (~9 minutes on one H200, 2026-11-29), each step's output in $OUT/<step>.log
# and the lines benchmarks/README.md needs gathered in $OUT/summary.txt. A failing step is recorded and the next
# one runs.
#
#   bash benchmarks/gpu_check.sh            # on the GPU machine, from the repository root
#   bash benchmarks/gpu_check.sh --smoke    # here, on the CPU: every step with small sizes, to check it starts
#   STEPS="generate judge" bash benchmarks/gpu_check.sh    # only these steps (gpu-tests, harness, generate, judge)
#
# The GPU machine lacks some packages (diffusers, open_clip_torch, pyspng, pydantic, datasets and what they need):
# carry them as wheels in .whl (the list and the download command: benchmarks/README.md, "gpu_check.sh"); this
# script installs them into /tmp/site when .whl is there.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu-check}"
mkdir -p "$OUT"
SMOKE=0
[ "${1:-}" = "--smoke" ] && SMOKE=1
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] && [ "$SMOKE" = 1 ] && PYTHON=.venv/bin/python
if [ -d .whl ]; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl && export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
QWEN=()  # Qwen's own tokenizer for the judge's prompts, from the dashscope wheel where .whl holds it
for wheel in .whl/dashscope-*.whl; do [ -f "$wheel" ] && QWEN=(--qwen-vocab "$wheel"); done

STEPS="${STEPS:-gpu-tests harness generate judge}"
step() {  # step NAME SECONDS COMMAND...: run it with a time limit, its output in $OUT/NAME.log
    local name=$1 limit=$2
    shift 2
    case " $STEPS " in *" ${name%-[0-9]} "*) ;; *) return ;; esac
    local start=$SECONDS
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    local code=$?
    echo "== $name: exit $code after $((SECONDS - start)) s" | tee -a "$OUT/summary.txt"
}

: >"$OUT/summary.txt"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU"
  "$PYTHON" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  nproc; git log -1 --format='project at %h %s' 2>/dev/null; } >>"$OUT/summary.txt" 2>&1

# The judge runs second: its figure weighs most in a suite's GPU-hours. The third harness run also profiles one more
# cold run (its trace in /tmp/harness-profile and $OUT, both tables in its log), to see what the device waits on.
if [ "$SMOKE" = 1 ]; then
    DEVICE=cpu
    step gpu-tests 300 "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_harness_gpu.py
    step judge 600 "$PYTHON" benchmarks/judge_cost.py --device $DEVICE --images 1 --repeats 1 --token-images 1 \
        --token-size 224 --entity-chars 400 "${QWEN[@]}"
    for run in 1 2 3; do
        PROFILE=()
        [ "$run" = 3 ] && PROFILE=(--profile /tmp/harness-profile)
        step "harness-$run" 300 "$PYTHON" benchmarks/harness_speed.py --device $DEVICE --images 16 --size 128 \
            --submission "$OUT/submission" --worker-cpu 4 --no-naive --no-baseline "${PROFILE[@]}"
    done
    step generate 600 "$PYTHON" benchmarks/generate_speed.py --device $DEVICE --images 2 --batch-sizes 1 2
else
    DEVICE=cuda
    # Sized to fit one 600 s call: 1,000 images a harness run (the last measurements used 2,000), 8 images a way
    # and batch size for generation (two batches of 4: the last batch's writes, which nothing follows, weigh 1/2).
    step gpu-tests 90 "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_harness_gpu.py
    step judge 160 "$PYTHON" benchmarks/judge_cost.py --real-size-7b --device $DEVICE --size 1024 --images 3 \
        --repeats 2 --token-images 2 "${QWEN[@]}"
    for run in 1 2 3; do  # three runs on one machine, the submission made once
        PROFILE=()
        [ "$run" = 3 ] && PROFILE=(--profile /tmp/harness-profile)
        step "harness-$run" $((run == 1 ? 150 : run == 2 ? 120 : 170)) "$PYTHON" benchmarks/harness_speed.py \
            --device $DEVICE --real-size --images 1000 --size 1024 --submission /tmp/harness-submission \
            --worker-cpu 16 "${PROFILE[@]}"
    done
    step generate 200 "$PYTHON" benchmarks/generate_speed.py --device $DEVICE --real-size --images 8 --batch-sizes 1 4
fi
# the profile's trace comes back with the logs where it is small enough (the device tool returns files up to 16 MiB)
cp /tmp/harness-profile/trace.json.gz "$OUT/" 2>/dev/null

{ [ -f "$OUT/gpu-tests.log" ] && { echo "-- tests"; tail -n 3 "$OUT/gpu-tests.log"; }
  for run in 1 2 3; do
      [ -f "$OUT/harness-$run.log" ] || continue
      echo "-- harness run $run"
      grep -E "worker CPU|floor|harness|main loop|^  [a-z]|inputs prepared|Error|error" "$OUT/harness-$run.log" \
          | grep -v Warning
      [ "$run" = 3 ] && sed -n "/^profile of one more cold run/,\$p" "$OUT/harness-3.log"
  done
  [ -f "$OUT/generate.log" ] && { echo "-- generation"; grep -E "SDXL|batch|Error|error" "$OUT/generate.log"; }
  [ -f "$OUT/judge.log" ] && { echo "-- judge"; grep -E "today|shared|plain forward|largest|random Qwen|Error|error" \
      "$OUT/judge.log"; }
} >>"$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
