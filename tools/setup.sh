#!/usr/bin/env bash
# Installs everything dtc needs to build and test on a fresh Debian 12 machine: Debian
# packages (compilers' libraries, ONNX, protobuf, LLVM ADT + lit tools, oneDNN, Open MPI, ...)
# and the pinned Python test packages. Idempotent: a second run installs nothing new.
set -euo pipefail

DEB_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler
  llvm-14-dev llvm-14-tools clang-14 libclang-rt-14-dev libomp-14-dev
  libcli11-dev nlohmann-json3-dev googletest libgtest-dev libbenchmark-dev
  libdnnl-dev libopenmpi-dev openmpi-bin libzip-dev
  python3-pip
)

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
PY="${PYTHON:-python3}"
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
  echo "setup: installing Python test packages ($here/requirements.txt)"
  "$PY" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt" 2>&1 | grep -v -i "running pip as the 'root' user" || true
  check_py || { echo "setup: $PY lacks the pinned packages of $here/requirements.txt" >&2; exit 1; }
fi
