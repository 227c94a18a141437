#!/usr/bin/env bash
# The GPU check of the CUDA backend (issue 17), one command on a machine with NVIDIA GPUs:
#   1. configures a build with the CUDA backend (-Werror; CUDA architectures: the GPUs present,
#      else CMake's default 80;90) and builds only what the GPU tests need;
#   2. ctest -L gpu: every CUDA kernel against the CPU kernel, the CUDA device and executor tests,
#      the NCCL checks (2 ranks under mpirun; they skip with fewer than 2 GPUs);
#   3. tests/gpu/gpu_parity.py: the bundled models on cuda vs cpu (inference, 1 and 20 training
#      steps, sgd/momentum/adam/adamw) and vs the PyTorch goldens; with 2 or more GPUs also dp=2
#      over NCCL against one GPU;
#   4. tools/bench/gpu_step_bench.py: training step time vs PyTorch CUDA eager (when available);
#   then a summary with the counts of passed, failed and skipped checks. Meant to finish within
#   8 minutes on a 16-core machine. Without a GPU it builds, runs the GPU tests (which skip;
#   the CPU-side ones run), says so, and exits 0 unless something failed.
# Usage: tests/gpu/check.sh [BUILD_DIR]   (default build-gpu; exit 0: all passed or skipped)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${1:-build-gpu}
jobs=$(nproc)
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
summary=()
failed=0

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
echo "== tests/gpu/check.sh: $gpus GPU(s) visible to nvidia-smi, $jobs cores =="
[ "$gpus" -gt 0 ] && nvidia-smi -L

# The interpreter for the scripts: the project's venv, else one with numpy.
py=""
for p in .venv/bin/python3 python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c "import numpy" >/dev/null 2>&1; then
    py=$p
    break
  fi
done

echo "== configure ($build) =="
args=(-DDTC_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTC_ENABLE_CUDA=ON)
if command -v ccache >/dev/null 2>&1; then
  args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
# Compile the kernels for the GPUs present only (CMake >= 3.24 knows "native"), which halves the
# CUDA compile time; an existing build keeps its architectures.
if [ "$gpus" -gt 0 ] && [ ! -f "$build/CMakeCache.txt" ]; then
  args+=(-DCMAKE_CUDA_ARCHITECTURES=native)
fi
if [ -n "$py" ]; then
  case $py in
    /*) ;;
    */*) py=$PWD/$py ;; # the venv's own path (not its target: a venv is found through it)
    *) py=$(command -v "$py") ;;
  esac
  args+=("-DPython3_EXECUTABLE=$py")
fi
if ! cmake -S . -B "$build" -G Ninja "${args[@]}" >"$build.configure.log" 2>&1; then
  tail -n 30 "$build.configure.log" >&2
  echo "error: check.sh: CMake configure failed (log: $build.configure.log)" >&2
  exit 1
fi
rm -f "$build.configure.log"
targets=(dtc-compile dtc-run dtc_gpu_tests)
if ninja -C "$build" -t targets all 2>/dev/null | grep -q '^dtc_nccl_check:'; then
  targets+=(dtc_nccl_check)
fi
echo "== build: ${targets[*]} =="
if ! ninja -C "$build" -j"$jobs" "${targets[@]}"; then
  echo "error: check.sh: the build failed" >&2
  exit 1
fi
summary+=("build: ${targets[*]} in $(elapsed) s")

echo "== ctest -L gpu =="
ctest_log=$(mktemp)
ctest --test-dir "$build" -L gpu -E '^gpu_e2e_parity$' --timeout 300 -j"$(( gpus > 0 ? 4 : jobs ))" \
  --output-on-failure 2>&1 | tee "$ctest_log"
passed=$(grep -cE 'Test +#[0-9]+: .* +Passed' "$ctest_log" || true)
skipped=$(grep -cE 'Test +#[0-9]+: .*\*\*\*Skipped' "$ctest_log" || true)
bad=$(grep -cE 'Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|Not Run)' "$ctest_log" || true)
# (nccl_check, which needs 2 GPUs, reports itself skipped through its SKIP_REGULAR_EXPRESSION.)
rm -f "$ctest_log"
summary+=("ctest -L gpu: $passed passed, $bad failed, $skipped skipped")
[ "$bad" -gt 0 ] && failed=1

if [ "$gpus" -eq 0 ]; then
  summary+=("no GPU on this machine: the GPU tests skipped; model parity and benchmark not run")
else
  if [ -z "$py" ]; then
    summary+=("gpu_parity.py and gpu_step_bench.py: skipped (no Python with numpy)")
  else
    echo "== tests/gpu/gpu_parity.py =="
    dp=()
    [ "$gpus" -ge 2 ] && dp=(--dp 2)
    parity_log=$(mktemp)
    timeout 300 "$py" tests/gpu/gpu_parity.py --build "$build" "${dp[@]}" 2>&1 | tee "$parity_log"
    rc=${PIPESTATUS[0]}
    line=$(grep '^gpu_parity:' "$parity_log" | tail -n 1)
    rm -f "$parity_log"
    case $rc in
      0) summary+=("${line:-gpu_parity: passed}${dp:+ (with dp=2 over NCCL)}") ;;
      77) summary+=("${line:-gpu_parity: skipped}") ;;
      124) summary+=("gpu_parity: TIMEOUT after 300 s"); failed=1 ;;
      *) summary+=("${line:-gpu_parity: failed (exit $rc)}"); failed=1 ;;
    esac
    [ "$gpus" -lt 2 ] && summary+=("dp=2 over NCCL: skipped ($gpus GPU)")

    echo "== tools/bench/gpu_step_bench.py =="
    if timeout 180 "$py" tools/bench/gpu_step_bench.py --build "$build" --steps 20 --warmup 3; then
      summary+=("benchmark: printed above")
    else
      summary+=("benchmark: failed or timed out")
      failed=1
    fi
  fi
fi

echo "== summary ($(elapsed) s) =="
for s in "${summary[@]}"; do
  echo "  $s"
done
if [ "$failed" -ne 0 ]; then
  echo "check.sh: FAILED"
  exit 1
fi
echo "check.sh: ok"
exit 0
