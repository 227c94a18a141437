#!/usr/bin/env bash
# Fails when building dtc uses a Debian package that tools/setup.sh neither installs nor pulls in
# (the gap that once let CI pass while a fresh machine stopped at CMake configure). It configures
# both build configurations of tools/test.sh (gcc release, clang sanitizer + fuzzing) in scratch
# folders under `strace -f -e trace=file`, adds every header and library a finished build used
# (`ninja -t deps` and the link lines of each BUILD_DIR given), maps each system file that was
# opened successfully to its package (`dpkg -S`), and names each package that is not in setup's
# list, not in its dependency closure (`apt-cache depends --recurse --installed`, without
# recommends) and not part of every Debian system (Essential or Priority: required, as
# `debootstrap --variant=minbase` installs). Files under /usr/local belong to no package: the
# only ones accepted are the CUDA toolkit's (preinstalled; see the comment in the script).
# Usage: tools/check_setup.sh [BUILD_DIR...]   exit 0: complete; 1: packages missing from setup
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dirs=("$@")
for tool in strace dpkg apt-cache cmake ninja; do
  command -v "$tool" >/dev/null || { echo "error: check_setup: '$tool' not found (run tools/setup.sh)" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
configure() { # configure NAME CMAKE_ARGS...
  local name=$1; shift
  if ! strace -f -qq -e trace=file -e signal=none -o "$work/$name.strace" \
      cmake -S . -B "$work/$name" -G Ninja "$@" >"$work/$name.log" 2>&1; then
    echo "error: check_setup: CMake configure ($name) failed:" >&2
    tail -n 30 "$work/$name.log" >&2
    exit 1
  fi
}
echo "check_setup: configuring (release, gcc) under strace"
configure release -DDTC_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "check_setup: configuring (sanitizers + fuzzing, clang-14) under strace"
configure asan -DDTC_WERROR=ON -DDTC_SANITIZE=ON -DDTC_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14

: >"$work/extra.txt"
for build_dir in "${build_dirs[@]}"; do
  [ -f "$build_dir/build.ninja" ] || { echo "error: check_setup: $build_dir: no build.ninja (build it first)" >&2; exit 1; }
  echo "check_setup: adding the headers and libraries the build in $build_dir used"
  ninja -C "$build_dir" -t deps 2>/dev/null | awk '/^    \// { print $1 }' >>"$work/extra.txt"
  # Absolute library paths on link lines (CMake links imported targets by full path).
  grep -o '/usr/[^ ]*\.\(so\|a\)\(\.[0-9.]*\)\?' "$build_dir/build.ninja" >>"$work/extra.txt" || true
done

tools/setup.sh --print-packages >"$work/setup.txt"
/usr/bin/python3 - "$work" <<'PYEOF'
import os, re, subprocess, sys

work = sys.argv[1]
# Successfully opened/stat'ed files: syscall("path", ...) = N with N >= 0.
# Only files read or run count (open, openat, execve): find_program/find_library also stat
# candidates they then ignore.
call = re.compile(r'^\d+\s+(?:openat|open|execve)\((?:(?:AT_FDCWD|\d+), )?"([^"]+)"')
paths = set()
for name in ("release", "asan"):
    for line in open(os.path.join(work, name + ".strace"), errors="replace"):
        if " = -1 " in line or "<unfinished" in line:
            continue
        m = call.match(line)
        if m:
            paths.add(m.group(1))
paths.update(l.strip() for l in open(os.path.join(work, "extra.txt")) if l.strip())

def system_file(p):
    # /etc holds configuration read in passing (ld.so.conf.d, locale.alias), not build inputs.
    return p.startswith(("/usr/", "/lib", "/bin/", "/sbin/")) and \
        not p.startswith(("/usr/local/", work)) and os.path.isfile(p)

candidates = set()
for p in paths:
    if not os.path.isabs(p) or not system_file(p):
        continue
    candidates.add(p)
    if system_file(os.path.realpath(p)):
        candidates.add(os.path.realpath(p))

def owners(files):
    """dpkg -S in batches; merged /usr means a file may be recorded under /lib or /usr/lib."""
    found = {}
    files = sorted(files)
    for i in range(0, len(files), 500):
        batch = files[i:i + 500]
        out = subprocess.run(["dpkg", "-S", *batch], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("diversion by") or ": " not in line:
                continue
            pkgs, path = line.split(": ", 1)
            for pkg in pkgs.split(", "):
                found.setdefault(path, set()).add(pkg.split(":")[0])
    return found

own = owners(candidates)
alias = {}
for p in candidates:
    if p in own:
        continue
    for q in (p[4:] if p.startswith("/usr/") else "/usr" + p,):
        alias[q] = p
for q, pkgs in owners(alias).items():
    own[alias[q]] = pkgs

used = {}
for path, pkgs in own.items():
    for pkg in pkgs:
        used.setdefault(pkg, path)

# /usr/local holds no Debian package, so dpkg cannot vouch for what the build reads there. The
# one thing it may read there is the CUDA toolkit (nvcc, cudart, cuBLAS, cuDNN, NCCL, CCCL):
# NVIDIA's installer puts it under /usr/local/cuda-<version> (with /usr/local/cuda, and on the
# GPU machine kind also /usr/local/{bin,include,lib} wrappers and copies of its files), it comes
# preinstalled on the machine kinds that build the CUDA backend, and tools/setup.sh cannot install
# it (Debian has no package of CUDA 13, cuDNN 9 or NCCL 2.28); where it is missing, CMake turns
# DTC_ENABLE_CUDA off and the build needs nothing from /usr/local. Accepted explicitly, file by
# file: a file whose real path lies in a toolkit root, or a wrapper or copy in /usr/local/X whose
# name the toolkit also has (X under the root itself, its targets/*/ or its lib64/). Any other
# file the build reads under /usr/local is an error.
import glob
cuda_roots = sorted({os.path.realpath(d) for d in glob.glob("/usr/local/cuda*") if os.path.isdir(d)})

def in_toolkit(p):
    real = os.path.realpath(p)
    if any(real.startswith(r + "/") for r in cuda_roots):
        return True
    rel = p[len("/usr/local/"):]
    alts = [rel]
    if rel.startswith("lib/"):
        alts.append("lib64/" + rel[len("lib/"):])
    for r in cuda_roots:
        for a in alts:
            if os.path.exists(os.path.join(r, a)) or glob.glob(os.path.join(r, "targets", "*", a)):
                return True
    return False

local = sorted(p for p in paths if os.path.isabs(p) and p.startswith("/usr/local/") and
               os.path.isfile(p))
toolkit = [p for p in local if in_toolkit(p)]
foreign = [p for p in local if p not in toolkit]
if toolkit:
    print(f"check_setup: {len(toolkit)} files of the CUDA toolkit ({', '.join(cuda_roots)}) "
          "accepted: preinstalled by NVIDIA's installer, not a Debian package")
if foreign:
    for p in foreign[:20]:
        print(f"error: check_setup: the build reads {p}, which is neither from a Debian package "
              "nor part of the CUDA toolkit", file=sys.stderr)
    sys.exit(1)

setup = [l.strip() for l in open(os.path.join(work, "setup.txt")) if l.strip()]
missing_setup = [p for p in setup if subprocess.run(
    ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True).stdout.find("install ok installed") < 0]
if missing_setup:
    sys.exit("error: check_setup: packages of tools/setup.sh are not installed: " + " ".join(missing_setup))
# Dependency closure over the installed packages (Depends and Pre-Depends, alternatives and
# virtual packages resolved to whichever installed package satisfies them), as apt-get install
# --no-install-recommends would pull them in.
fmt = "${Package}\t${Status}\t${Depends}\t${Pre-Depends}\t${Provides}\t${Essential}\t${Priority}\n"
installed, provides, base = {}, {}, set()
for line in subprocess.run(["dpkg-query", "-W", "-f=" + fmt], capture_output=True, text=True).stdout.splitlines():
    f = line.split("\t")
    if len(f) < 7 or "install ok installed" not in f[1]:
        continue
    deps = [d for d in (f[2] + "," + f[3]).split(",") if d.strip()]
    installed[f[0]] = [[a.strip().split()[0].split(":")[0] for a in d.split("|")] for d in deps]
    for v in f[4].split(","):
        if v.strip():
            provides.setdefault(v.strip().split()[0], set()).add(f[0])
    if f[5] == "yes" or f[6] == "required":
        base.add(f[0])
closure, todo = set(), list(setup)
while todo:
    pkg = todo.pop()
    if pkg in closure:
        continue
    closure.add(pkg)
    for alternatives in installed.get(pkg, []):
        for a in alternatives:
            todo.extend(p for p in ({a} if a in installed else set()) | provides.get(a, set()))
# Packages a configure step probes without needing them (the build works without them).
probed = {
    # CMake runs `ld.lld-14 --help` while identifying clang-14's toolchain; clang links with
    # GNU ld (binutils), and neither configuration asks for lld.
    "lld-14": "probed by CMake's clang toolchain detection",
    # glibc's setlocale reads locale.alias when present; the build runs in any locale.
    "locales": "read in passing by glibc",
}
missing = sorted(p for p in used if p not in closure and p not in base and p not in probed)
print(f"check_setup: {len(candidates)} system files used, from {len(used)} Debian packages; "
      f"tools/setup.sh brings {len(closure)} packages")
if missing:
    for p in missing:
        print(f"error: check_setup: the build uses package '{p}' (for example {used[p]}), "
              f"which tools/setup.sh neither installs nor pulls in", file=sys.stderr)
    sys.exit(1)
print("check_setup: every package the build uses comes with tools/setup.sh")
PYEOF
