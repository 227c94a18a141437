#!/usr/bin/env bash
# Installs everything dtc needs to build and test on a fresh Debian 12 machine (as root, or with
# sudo): the Debian packages below and, in a virtual environment inside the checkout (.venv/,
# ignored by git; Debian's Python refuses system-wide pip installs, PEP 668), the pinned Python
# test packages of tools/requirements.txt. Idempotent: a second run installs nothing new.
# tools/check_setup.sh fails when the build uses a Debian package that this list does not bring.
set -euo pipefail

DEB_PACKAGES=(
  # compilers and build tools (clang-14 builds the sanitizer and fuzzing configuration)
  build-essential cmake ninja-build pkg-config git ca-certificates
  clang-14 libclang-rt-14-dev libomp-14-dev
  # libraries dtc links (GTest's CMake package reads libgmock-dev's targets too)
  libonnx-dev libprotobuf-dev protobuf-compiler llvm-14-dev llvm-14-tools
  libcli11-dev nlohmann-json3-dev googletest libgtest-dev libgmock-dev libbenchmark-dev
  libdnnl-dev libopenmpi-dev openmpi-bin libzip-dev libxxhash-dev
  # dtc-compile's allocator (tools/CMakeLists.txt)
  libjemalloc-dev
  # parameter servers (ps=S:W): gRPC and its protoc plugin
  libgrpc++-dev protobuf-compiler-grpc
  # oneDNN's CMake package (dnnl-config.cmake) calls find_package(OpenCL) for its GPU runtime
  ocl-icd-opencl-dev opencl-headers
  # Python for the test scripts (in .venv/) and strace for tools/check_setup.sh
  python3 python3-venv python3-pip strace
)
# Read by tools/check_setup.sh.
[ "${1:-}" = "--print-packages" ] && { printf '%s\n' "${DEB_PACKAGES[@]}"; exit 0; }

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$(dirname "$here")/.venv"
# The venv is made from Debian's python3 (python3-venv above) unless PYTHON names another one.
BASE_PY="${PYTHON:-/usr/bin/python3}"
PY="$venv/bin/python3"
if [ ! -x "$PY" ] || ! "$PY" -c 'import sys' >/dev/null 2>&1; then
  echo "setup: creating the Python virtual environment $venv (from $BASE_PY)"
  rm -rf "$venv"
  "$BASE_PY" -m venv "$venv"
fi
# Installed and at the pinned versions (an older onnx lacks cases the conformance runner uses).
check_py() {
  "$PY" - "$here/requirements.txt" <<'PYEOF'
import sys
from importlib.metadata import version, PackageNotFoundError
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, want = line.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PYEOF
}
if ! check_py >/dev/null 2>&1; then
  echo "setup: installing Python test packages ($here/requirements.txt) into $venv"
  "$PY" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt"
  check_py || { echo "setup: $PY lacks the pinned packages of $here/requirements.txt" >&2; exit 1; }
fi
