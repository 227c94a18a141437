#!/usr/bin/env python3
# Parameter-server and central-storage benchmark (issue 16), on the bundled digits MLP:
#   1. a slow worker: W = 3 workers whose step costs --compute seconds (--step-delay stands in
#      for the compute of a bigger model), one of them 5x slower. Samples/s of the fast workers
#      (the chief's log) under ps=1:3 asynchronous (--async-rule scaled and aggregate), ps=1:3
#      with --staleness 2, ps=1:3 synchronous (--staleness 0), and dp=3 over MPI (which waits
#      for the slowest every step):
#      the point of asynchronous training, in numbers;
#   2. server throughput: ps=1:W asynchronous without delays for W = 1, 2, 4, 8 (workers
#      oversubscribe the 2 cores beyond 2): pushes/s and MB/s the server absorbs, beside the
#      raw gRPC rate of the same message size on the same machine (dtc_grpc_bench, a server
#      that only acknowledges: the transport's ceiling);
#   3. cs=2 against dp=2 (and one device) on the same global batch: samples/s.
#
#     .venv/bin/python3 tools/bench/ps_bench.py [--build build] [--steps 60] [--compute 0.02]
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(REPO, "models", "mlp_digits.onnx")
DIGITS = os.path.join(REPO, "models", "data", "digits_train.npz")


def env():
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = "1"
    e["OMP_WAIT_POLICY"] = "passive"
    return e


def run(cmd, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return r


def rate(log, skip=3):
    """Median samples/s of the logged steps after `skip` warm-up steps."""
    with open(log) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    steps = [row["samples_per_s"] for row in rows if row.get("event") == "step"][skip:]
    return statistics.median(steps) if steps else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--compute", type=float, default=0.02)
    ap.add_argument("--only", default="1,2,3", help="sections to run, e.g. 2,3")
    args = ap.parse_args()
    compile_tool = os.path.join(args.build, "tools", "dtc-compile")
    run_tool = os.path.join(args.build, "tools", "dtc-run")
    grpc_bench = os.path.join(args.build, "tools", "bench", "dtc_grpc_bench")
    tmp = tempfile.mkdtemp(prefix="dtc-ps-bench-")
    flags = ["--batch-size", "48", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]

    def plan(name, strategy, extra=()):
        out = os.path.join(tmp, name + ".dtc")
        run([compile_tool, MLP, "-o", out, "--strategy", strategy] + flags + list(extra))
        return out

    cluster_steps = ["--data", DIGITS, "--steps", str(args.steps)]
    only = args.only.split(",")
    if "1" in only:
        slow_section(args, plan, run_tool, tmp, cluster_steps)
    if "2" in only:
        throughput_section(args, plan, run_tool, grpc_bench, tmp, cluster_steps)
    if "3" in only:
        central_section(args, compile_tool, run_tool, tmp)


def slow_section(args, plan, run_tool, tmp, cluster_steps):
    print("1. a slow worker (5x) among 3; per-step compute "
          f"{args.compute * 1000:.0f} ms; steps/s of a fast worker (16 samples each):")
    results = {}
    for name, strategy, extra in [("ps async", "ps=1:3", []),
                                  ("ps async agg", "ps=1:3", ["--async-rule", "aggregate"]),
                                  ("ps staleness 2", "ps=1:3", ["--staleness", "2"]),
                                  ("ps sync", "ps=1:3", ["--staleness", "0"]),
                                  ("dp=3", "dp=3", [])]:
        p = plan(name.replace(" ", "_"), strategy, extra)
        log = os.path.join(tmp, name.replace(" ", "_") + ".jsonl")
        if strategy.startswith("dp"):
            # Every rank computes as long as the slowest: dp waits for it at each all-reduce.
            cmd = [run_tool, p, "--log", log, "--nproc", "3", "--step-delay",
                   str(5 * args.compute)] + cluster_steps
            run(cmd)
            results[name] = rate(log)
        else:
            results[name] = slow_cluster(run_tool, p, log, cluster_steps, args.compute, tmp)
    base = results["dp=3"]
    for name, v in results.items():
        print(f"   {name:16s} {v / 48:7.2f} steps/s   ratio to dp=3 {v / base:5.2f}")



def throughput_section(args, plan, run_tool, grpc_bench, tmp, cluster_steps):
    print("2. server throughput, ps=1:W asynchronous, no delay "
          "(a push carries the 10.6 KB of the MLP's gradients):")
    for w in (1, 2, 4, 8):
        p = plan(f"ps1_{w}", f"ps=1:{w}")
        log = os.path.join(tmp, f"ps1_{w}.jsonl")
        run([run_tool, p, "--local-cluster", "--quiet", "--log", log] + cluster_steps)
        # Steady state: W workers at the chief's median step rate, one push each per step.
        pushes_per_s = w * rate(log) / 48
        raw = ""
        if os.access(grpc_bench, os.X_OK):
            r = run([grpc_bench, "--clients", str(w), "--bytes", "10632", "--calls",
                     str(args.steps * 4)])
            raw = "   raw gRPC " + r.stdout.strip()
        print(f"   W={w}: {pushes_per_s:8.1f} pushes/s, {pushes_per_s * 10632 / 1e6:6.2f} MB/s "
              f"(a step: pull, compute, push){raw}")



def central_section(args, compile_tool, run_tool, tmp):
    print("3. central storage against data parallelism, the bundled CNN (global batch 16):")
    cnn = os.path.join(REPO, "models", "cnn_train.onnx")
    cnn_data = os.path.join(REPO, "tests", "e2e", "golden", "cnn_data.npz")
    for name, strategy, nproc in [("single", "single", 0), ("dp=2", "dp=2", 2),
                                  ("cs=2", "cs=2", 0)]:
        p = os.path.join(tmp, "cnn_" + name.replace("=", "") + ".dtc")
        run([compile_tool, cnn, "-o", p, "--strategy", strategy, "--batch-size", "16",
             "--optimizer", "sgd", "--lr", "0.05"])
        log = os.path.join(tmp, "cnn_" + name.replace("=", "") + ".jsonl")
        cmd = [run_tool, p, "--log", log, "--quiet", "--data", cnn_data, "--steps",
               str(args.steps)]
        if nproc:
            cmd += ["--nproc", str(nproc)]
        run(cmd)
        print(f"   {name:8s} {rate(log):9.1f} samples/s")


def slow_cluster(run_tool, plan, log, steps, compute, tmp):
    """ps=1:3 with worker 2 five times slower; the chief's (a fast worker's) samples/s."""
    import socket
    socks = [socket.socket() for _ in range(4)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    cluster = os.path.join(tmp, f"cluster-{ports[0]}.json")
    with open(cluster, "w") as f:
        json.dump({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports[:3]],
                               "ps": [f"127.0.0.1:{ports[3]}"]}}, f)
    token = os.path.join(tmp, "token")
    with open(token, "w") as f:
        f.write("0123456789abcdef0123456789abcdef\n")
    base = [run_tool, plan, "--cluster", cluster, "--job-token-file", token, "--quiet"]
    procs = [subprocess.Popen(base + ["--task", "ps:0"], env=env())]
    for w in range(3):
        delay = compute * (5 if w == 2 else 1)
        extra = ["--log", log] if w == 0 else []
        procs.append(subprocess.Popen(base + ["--task", f"worker:{w}", "--step-delay",
                                              str(delay)] + steps + extra, env=env()))
    for p in procs[1:]:
        p.wait(timeout=600)
    procs[0].wait(timeout=60)
    return rate(log)


if __name__ == "__main__":
    main()
