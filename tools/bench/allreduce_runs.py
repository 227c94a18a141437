#!/usr/bin/env python3
"""Repeats the communicator benchmark (tools/bench/allreduce_bench.cpp) and summarizes it.

On a shared machine one run of dtc_allreduce_bench says little from 1 MiB on (the raw MPI times
themselves swing 2-10x between runs), so this runs it --runs times on 2 ranks and prints, per
kind and size, the medians over the runs of the median times, and the median and the minimum
over the runs of the ratios raw time / dtc time (1 = as fast as raw MPI) of the blocking,
submit-then-wait and persistent forms, with the machine's load average while it ran.

  .venv/bin/python3 tools/bench/allreduce_runs.py --build build [--runs 5] [--kinds allreduce]
      [--min-bytes 4096] [--max-bytes 67108864] [--env DTC_COMM_EXCHANGE=0,4032]

Errors (the bench missing or failing) end it with a line starting with "error:" and exit 1.
"""
import argparse
import collections
import os
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="the build folder")
    ap.add_argument("--runs", type=int, default=5, help="runs of the bench")
    ap.add_argument("--kinds", default="allreduce,allgather,reducescatter")
    ap.add_argument("--min-bytes", type=int, default=4096)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--reps-scale", type=int, default=1, help="the bench's repetitions x this")
    ap.add_argument("--env", action="append", default=[],
                    help="NAME=VALUE for the bench's environment (repeatable)")
    args = ap.parse_args()
    bench = os.path.join(args.build, "tools", "bench", "dtc_allreduce_bench")
    if not os.access(bench, os.X_OK):
        print(f"error: {bench}: not built (ninja -C {args.build} dtc_allreduce_bench)", file=sys.stderr)
        return 1
    env = dict(os.environ)
    for kv in args.env:
        if "=" not in kv:
            print(f"error: --env {kv}: expected NAME=VALUE", file=sys.stderr)
            return 1
        k, v = kv.split("=", 1)
        env[k] = v
    cmd = ["mpirun", "--allow-run-as-root", "-n", "2", bench, str(args.reps_scale), args.kinds,
           str(args.max_bytes), str(args.min_bytes)]
    rows = collections.OrderedDict()
    loads = []
    for _ in range(args.runs):
        loads.append(os.getloadavg()[0])
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"error: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-400:]}",
                  file=sys.stderr)
            return 1
        for line in p.stdout.splitlines():
            f = line.split()
            # kind bytes raw dtc async pers rawGB persGB ratio async persist best
            if len(f) == 12 and f[1].isdigit():
                rows.setdefault((f[0], int(f[1])), []).append([float(x) for x in f[2:]])
    print(f"{args.runs} runs on 2 ranks; load average {statistics.median(loads):.1f} "
          f"(from {min(loads):.1f} to {max(loads):.1f}); ratio = raw MPI time / dtc time")
    print(f"{'kind':<13} {'bytes':>9} {'raw us':>9} {'dtc us':>9} {'async us':>9} {'pers us':>9}"
          f" | {'median ratio: blk':>18} {'async':>6} {'pers':>6} | {'min: blk':>9} {'async':>6}"
          f" {'pers':>6}")
    for (kind, size), runs in rows.items():
        med = [statistics.median(r[j] for r in runs) for j in range(10)]
        low = [min(r[j] for r in runs) for j in range(10)]
        print(f"{kind:<13} {size:>9} {med[0]:>9.1f} {med[1]:>9.1f} {med[2]:>9.1f} {med[3]:>9.1f}"
              f" | {med[6]:>18.2f} {med[7]:>6.2f} {med[8]:>6.2f} | {low[6]:>9.2f} {low[7]:>6.2f}"
              f" {low[8]:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
