#!/usr/bin/env bash
# The README's test command: installs what is missing, builds dtc, and runs every test:
#   1. Release build with -Werror: unit tests (GoogleTest) and lit golden/error tests (ctest);
#      with the CUDA backend where nvcc is found (DTC_ENABLE_CUDA: kernels, CUDA device, NCCL
#      communicator compile and link; the GPU tests skip without a GPU: tests/gpu/check.sh runs
#      them where there is one);
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build (clang; the CUDA backend off), then
#      tools/check_setup.sh (every Debian package either build uses comes with tools/setup.sh;
#      under /usr/local only the CUDA toolkit), then the unit tests
#      and the bad-input lit tests under the sanitizers;
#   3. libFuzzer targets (ONNX importer, plan reader + validator, training plans through the
#      training loop, NPY/NPZ reader): short runs from their seed corpora.
# Usage: tools/test.sh [--quick]   (--quick: step 1 only)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)

tools/setup.sh

echo "== build (release, -Werror) =="
cmake -S . -B build -G Ninja -DDTC_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"$jobs"
echo "== tests (release) =="
ctest --test-dir build --output-on-failure -j"$jobs"

if [ "$quick" = 1 ]; then
  echo "== set-up completeness (tools/check_setup.sh) =="
  tools/check_setup.sh build
  exit 0
fi

echo "== build (ASan + UBSan, clang) =="
cmake -S . -B build-asan -G Ninja -DDTC_WERROR=ON -DDTC_SANITIZE=ON -DDTC_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
ninja -C build-asan -j"$jobs"
echo "== set-up completeness (tools/check_setup.sh: both configurations and what both builds used) =="
tools/check_setup.sh build build-asan
echo "== tests (ASan + UBSan: unit and bad-input) =="
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j"$jobs" -L 'unit|badinput'

# Each fuzzer starts from a copy of its seed corpus (new inputs stay out of the repository).
fuzz() { # fuzz TARGET SEED_DIR SECONDS
  local corpus
  corpus=$(mktemp -d)
  find "$2" -maxdepth 1 -type f -exec cp {} "$corpus"/ \;
  echo "== fuzz ($1, $3 s) =="
  build-asan/tests/fuzz/"$1" -max_total_time="$3" -rss_limit_mb=4096 -timeout=10 \
    -print_final_stats=0 "$corpus" 2>&1 | tail -n 3
  rm -rf "$corpus"
}
fuzz fuzz_importer tests/fuzz/corpus 60
fuzz fuzz_plan tests/fuzz/corpus/plan 30
fuzz fuzz_train tests/fuzz/corpus/train 30
fuzz fuzz_npy tests/fuzz/corpus/npy 30
echo "all test stages passed"
