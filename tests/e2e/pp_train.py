#!/usr/bin/env python3
"""End-to-end checks of pipeline parallelism (dtc-compile --strategy pp=S,microbatches=M,
schedule=gpipe|1f1b|zb-h1|interleaved, alone and with dp=D; dtc-run --nproc S*D).

Groups (--only takes a comma-separated subset; all by default):
  equivalence  The law: parameters after 5 steps (--no-shuffle --save-params) equal
               --strategy single on the same global batch, with the law of e2e/dp_train.py
               (per tensor max|pp - single| / max(max|single|, 1e-2) <= 1e-5, Adam noise left
               out). Models without BatchNormalization compare with single at --batch-size B;
               models with it (CNN, ResNet, U-Net) normalize each micro-batch on its own, as
               GPipe and DeepSpeed do, so they compare with single at --batch-size B/M
               --grad-accum-steps M (running statistics included). Cases: the MLP (SGD with
               momentum, Adam) at pp=2 and pp=4 for M = 1, 4, 8 and every schedule (GPipe, 1F1B,
               ZB-H1); the CNN,
               the ResNet and the U-Net (skip connections across stages) at pp=2 and pp=4; the
               GPT (Adam, --class-axis -1); dp=2,pp=2 on 4 ranks; --grad-accum-steps 2 on top of
               a pipeline; user cuts (--pp-cuts) and 3 stages over an uneven node count; a
               weight read on the first and the last stage (tied embeddings:
               one copy on stage 0, sent to stage 1, gradients summed); interleaved 1F1B (V = 2
               and 3 model chunks per rank) on the MLP, the GPT (tied embedding across its first
               and last chunk), the U-Net and dp=2,pp=2. Every run also checks that each logged
               loss equals single device's (rel 1e-4).
  state        --dump-gradients of a pp=2 plan equals single device's (law); --export writes one
               ONNX model holding every stage's parameters, equal to --save-params.
  checkpoints  Sharded checkpoints (runtime/Checkpoint.h) of pp=2 (MLP, Adam), dp=2,pp=2 on 4
               ranks (CNN, momentum, synchronized BatchNorm: running statistics) and dp=2:
               one shard per program (not per rank) and a manifest per step, each shard holding
               exactly its program's parameters, optimizer state and running statistics (names
               from --emit plan-text); a run stopped after a checkpoint whose last manifest is
               lost (its shards left without one) resumes from the one before and ends bit for
               bit (np.array_equal) where an uninterrupted run does; a deleted, truncated or
               bit-flipped shard makes --resume fail on every rank with an error naming the
               shard and the rank; a pp=2 job killed (SIGKILL of rank 1) while checkpointing
               every step resumes from its newest complete checkpoint, bit for bit, and the
               leftovers of the cut write are removed.
  errors       Compile errors: more stages than forward nodes (names the node count), a global
               batch that dp*M does not divide; a pp=2 plan started on 1 process says how to
               start it.
  faults       SIGKILL and SIGSTOP of stage 1 of a running pp=2 job: non-zero exit within
               --timeout + slack and a line naming rank 1.

Prints one line per check (PASS/FAIL name: details, seconds); exits 1 listing the failing
checks.

Usage: pp_train.py --build BUILD_DIR [--only equivalence,state,checkpoints,errors,faults] [--keep]
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dp_train import (FAULT_TIMEOUT, GOLDEN, HARD_LIMIT, MODELS, SLACK, STEPS,  # noqa: E402
                      CheckFailed, Job, Runner, assert_law, procs_with)

GROUPS = ["equivalence", "state", "checkpoints", "errors", "faults"]
LOSS_RTOL = 1e-4


def losses(rows):
    return [x["loss"] for x in rows if x.get("event") == "step"]


def same_losses(single_rows, pp_rows):
    a, b = losses(single_rows), losses(pp_rows)
    if len(a) != len(b) or len(b) != STEPS:
        raise CheckFailed(f"{len(b)} logged steps, single device {len(a)} (expected {STEPS})")
    for i, (x, y) in enumerate(zip(a, b)):
        if not math.isfinite(y) or abs(x - y) > LOSS_RTOL * max(abs(x), 1e-3):
            raise CheckFailed(f"step {i}: loss {y}, single device {x}")


def mlp():
    return os.path.join(MODELS, "mlp_digits.onnx"), os.path.join(MODELS, "data",
                                                                  "digits_train.npz")


def equivalence_cases():
    m, digits = mlp()
    sgd = ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]
    adam = ["--batch-size", "16", "--optimizer", "adam", "--lr", "0.01"]
    cases = []
    # name, model, data, flags, strategy, nproc, batch-norm (compare with accumulation), adam
    for pp in (2, 4):
        for mb in (1, 4, 8):
            for sched in (("1f1b",) if mb == 1 else ("gpipe", "1f1b", "zb-h1")):
                cases.append((f"mlp-sgd/pp={pp},M={mb},{sched}", m, digits, sgd,
                              f"pp={pp},microbatches={mb},schedule={sched}", pp, False, False))
    cases.append(("mlp-adam/pp=2,M=4,1f1b", m, digits, adam, "pp=2,microbatches=4", 2, False,
                  True))
    cases.append(("mlp-sgd/dp=2,pp=2,M=2", m, digits, sgd, "dp=2,pp=2,microbatches=2", 4, False,
                  False))
    cases.append(("mlp-sgd/pp=2,M=2,grad-accum=2", m, digits, sgd + ["--grad-accum-steps", "2"],
                  "pp=2,microbatches=2", 2, False, False))
    cases.append(("mlp-sgd/dp=2,pp=2,M=2,grad-accum=2", m, digits,
                  sgd + ["--grad-accum-steps", "2"], "dp=2,pp=2,microbatches=2", 4, False, False))
    cases.append(("mlp-adam/pp=2,M=4,clip-grad-norm", m, digits,
                  adam + ["--clip-grad-norm", "0.5"], "pp=2,microbatches=4", 2, False, True))
    # Synchronized BatchNorm over a stage's replicas: with one micro-batch it normalizes over
    # the global batch, as one device does.
    cases.append(("cnn-sgd/dp=2,pp=2,M=1,sync-batchnorm", os.path.join(MODELS, "cnn_train.onnx"),
                  os.path.join(GOLDEN, "cnn_data.npz"),
                  ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"],
                  "dp=2,pp=2,microbatches=1", 4, False, False))
    # User cuts: stage 0 ends after the first Gemm's Relu (uneven: 2 of 4 nodes, then 2).
    cases.append(("mlp-sgd/pp=2,M=4,--pp-cuts", m, digits, sgd + ["--pp-cuts", "/net/net.1/Relu"],
                  "pp=2,microbatches=4", 2, False, False))
    cases.append(("cnn-sgd/pp=3,M=2,1f1b", os.path.join(MODELS, "cnn_train.onnx"),
                  os.path.join(GOLDEN, "cnn_data.npz"),
                  ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"],
                  "pp=3,microbatches=2", 3, True, False))
    bn_sgd = ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]
    for name, pps in (("cnn", (2, 4)), ("resnet", (2,)), ("unet", (2, 4))):
        model = os.path.join(MODELS, f"{name}_train.onnx")
        data = os.path.join(GOLDEN, f"{name}_data.npz")
        for pp in pps:
            cases.append((f"{name}-sgd/pp={pp},M=2,1f1b", model, data, bn_sgd,
                          f"pp={pp},microbatches=2", pp, True, False))
    cases.append(("unet-sgd/pp=4,M=4,zb-h1", os.path.join(MODELS, "unet_train.onnx"),
                  os.path.join(GOLDEN, "unet_data.npz"), bn_sgd, "pp=4,microbatches=4,schedule=zb-h1",
                  4, True, False))
    cases.append(("gpt-adam/pp=2,M=4,zb-h1", os.path.join(MODELS, "gpt_train.onnx"),
                  os.path.join(GOLDEN, "gpt_data.npz"),
                  ["--batch-size", "8", "--class-axis", "-1", "--optimizer", "adam", "--lr",
                   "1e-3"], "pp=2,microbatches=4,schedule=zb-h1", 2, False, True))
    cases.append(("cnn-sgd/pp=2,M=4,gpipe", os.path.join(MODELS, "cnn_train.onnx"),
                  os.path.join(GOLDEN, "cnn_data.npz"), bn_sgd, "pp=2,microbatches=4,schedule=gpipe",
                  2, True, False))
    cases.append(("gpt-adam/pp=2,M=2,1f1b", os.path.join(MODELS, "gpt_train.onnx"),
                  os.path.join(GOLDEN, "gpt_data.npz"),
                  ["--batch-size", "8", "--class-axis", "-1", "--optimizer", "adam", "--lr",
                   "1e-3"], "pp=2,microbatches=2", 2, False, True))
    # Interleaved 1F1B: V model chunks per rank (virtual stage v on rank v % S). The GPT's tied
    # embedding spans its first and last chunk; the U-Net's skips cross chunks, some of them
    # between two chunks of one rank (no transfer).
    inter = "schedule=interleaved"
    cases.append(("mlp-sgd/pp=2,M=4,interleaved,V=2", m, digits, sgd,
                  f"pp=2,microbatches=4,{inter}", 2, False, False))
    cases.append(("mlp-adam/dp=2,pp=2,M=2,interleaved,V=2", m, digits, adam,
                  f"dp=2,pp=2,microbatches=2,{inter}", 4, False, True))
    cases.append(("gpt-adam/pp=2,M=4,interleaved,V=3", os.path.join(MODELS, "gpt_train.onnx"),
                  os.path.join(GOLDEN, "gpt_data.npz"),
                  ["--batch-size", "8", "--class-axis", "-1", "--optimizer", "adam", "--lr",
                   "1e-3"], f"pp=2,microbatches=4,{inter},virtual-stages=3", 2, False, True))
    cases.append(("unet-sgd/pp=2,M=2,interleaved,V=2", os.path.join(MODELS, "unet_train.onnx"),
                  os.path.join(GOLDEN, "unet_data.npz"), bn_sgd, f"pp=2,microbatches=2,{inter}",
                  2, True, False))
    return cases


def strategy_microbatches(strategy):
    m = re.search(r"microbatches=(\d+)", strategy)
    return int(m.group(1)) if m else int(re.search(r"pp=(\d+)", strategy).group(1))


def baseline_flags(flags, strategy, batchnorm):
    """single-device flags the pipeline must equal: the same global batch, and for batch-norm
    models the same micro-batches (--batch-size B/M --grad-accum-steps M). Pipeline-only
    flags (--pp-cuts) are left out."""
    out = list(flags)
    if "--pp-cuts" in out:
        i = out.index("--pp-cuts")
        del out[i:i + 2]
    if not batchnorm:
        return out
    mb = strategy_microbatches(strategy)
    i = out.index("--batch-size")
    out[i + 1] = str(int(out[i + 1]) // mb)
    return out + ["--grad-accum-steps", str(mb)]


def run_equivalence(r):
    run_args = ["--steps", str(STEPS), "--no-shuffle"]
    baselines = {}
    name_of = {}
    for name, model, data, flags, strategy, nproc, batchnorm, adam in equivalence_cases():
        name_of[strategy, tuple(flags)] = name_of.get((strategy, tuple(flags)), "") + name
        def case(model=model, data=data, flags=flags, strategy=strategy, nproc=nproc,
                 batchnorm=batchnorm, adam=adam):
            base = baseline_flags(flags, strategy, batchnorm)
            key = (model, tuple(base))
            if key not in baselines:
                plan = r.compile(model, ["--strategy", "single"] + base)
                params, rows = r.train(plan, data, 0, run_args)
                grad1 = r.gradients(plan, data) if adam else None
                baselines[key] = (params, rows, grad1)
            params, rows, grad1 = baselines[key]
            extra = ["--sync-batchnorm"] if "sync-batchnorm" in name_of[strategy, tuple(flags)] else []
            plan = r.compile(model, ["--strategy", strategy] + flags + extra)
            pp_params, pp_rows = r.train(plan, data, nproc, run_args)
            same_losses(rows, pp_rows)
            msg = assert_law(params, pp_params, grad1)
            stats = [k for k in params if "running_" in k]
            return msg + (f", {len(stats)} running statistics included" if stats else "")

        r.check(f"equivalence/{name}", case)


def run_state(r):
    model, digits = mlp()
    flags = ["--batch-size", "16", "--optimizer", "adam", "--lr", "0.01", "--strategy",
             "pp=2,microbatches=4"]

    def gradients():
        single = r.gradients(r.compile(model, flags[:-2] + ["--strategy", "single"]), digits)
        plan = r.compile(model, flags)
        g = r.path("pp-grads.npz")
        cmd = [r.run_tool, plan, "--data", digits, "--steps", "1", "--no-shuffle",
               "--dump-gradients", g, "--nproc", "2", "--timeout", "60"]
        out = r.exec(cmd)
        if out.returncode != 0:
            raise CheckFailed(f"dtc-run failed: {out.stderr.strip()[-2000:]}")
        with np.load(g) as z:
            pp = {k: z[k] for k in z.files}
        return assert_law(single, pp)

    r.check("state/dump-gradients/pp=2", gradients)

    def export():
        import onnx
        from onnx import numpy_helper
        plan = r.compile(model, flags)
        out = r.path("pp-export.onnx")
        params, _ = r.train(plan, digits, 2, ["--steps", "2", "--no-shuffle", "--export", out])
        m = onnx.load(out)
        inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
        missing = [k for k in params if k not in inits]
        diff = [k for k in params if k in inits and not np.array_equal(inits[k], params[k])]
        if missing or diff:
            raise CheckFailed(f"exported model lacks {missing}, differs in {diff}")
        onnx.checker.check_model(m)
        return f"{len(params)} parameters of both stages in {os.path.basename(out)}"

    r.check("state/export/pp=2", export)


def persistent_buffers(text):
    """{program: (ranks, names)} from --emit plan-text: the buffers a checkpoint shard of the
    program holds (parameters, optimizer state and the training section's state buffers)."""
    out, prog, names = {}, None, {}
    for line in text.splitlines():
        m = re.match(r"program (\d+) ranks=\[([\d,]*)\]", line)
        if m:
            prog, names = int(m.group(1)), {}
            out[prog] = ([int(x) for x in m.group(2).split(",") if x], set())
            continue
        if prog is None:
            continue
        m = re.match(r'\s+buffer %(\d+) "([^"]*)" (\w+) ', line)
        if m:
            names[int(m.group(1))] = m.group(2)
            if m.group(3) in ("param", "opt_state"):
                out[prog][1].add(m.group(2))
            continue
        m = re.match(r"\s+state buffer=(\d+)", line)
        if m:
            out[prog][1].add(names[int(m.group(1))])
    return out


def manifests_of(ck):
    """{step: manifest} of the complete checkpoints in folder ck."""
    out = {}
    for f in os.listdir(ck):
        m = re.fullmatch(r"ckpt-(\d+)\.manifest\.json", f)
        if m:
            with open(os.path.join(ck, f)) as fh:
                out[int(m.group(1))] = json.load(fh)
    return out


def check_layout(ck, expected):
    """Every file of ck is a manifest or a shard it names; one shard per program, holding
    exactly the program's persistent buffers. Returns the shard sizes of the newest step."""
    manifests = manifests_of(ck)
    if not manifests:
        raise CheckFailed(f"no manifest in {ck}: {sorted(os.listdir(ck))}")
    named = set()
    for step, mf in sorted(manifests.items()):
        progs = [s["program"] for s in mf["shards"]]
        if mf["step"] != step or progs != sorted(expected):
            raise CheckFailed(f"manifest of step {step}: step {mf['step']}, shards of programs "
                              f"{progs}, expected {sorted(expected)}")
        for sh in mf["shards"]:
            path = os.path.join(ck, sh["file"])
            named.add(sh["file"])
            if os.path.getsize(path) != sh["bytes"]:
                raise CheckFailed(f"{sh['file']}: {os.path.getsize(path)} bytes, manifest says "
                                  f"{sh['bytes']}")
            with np.load(path) as z:
                arrays = set(z.files) - {"__meta__"}
                meta = json.loads(bytes(z["__meta__"]).decode())
            want = expected[sh["program"]][1]
            if arrays != want or meta["program"] != sh["program"] or meta["step"] != step:
                raise CheckFailed(f"{sh['file']} holds {sorted(arrays)} (meta {meta}); program "
                                  f"{sh['program']} has {sorted(want)}")
    extra = sorted(set(os.listdir(ck)) - named -
                   {f"ckpt-{s:08d}.manifest.json" for s in manifests})
    if extra:
        raise CheckFailed(f"files no manifest names in {ck}: {extra}")
    newest = manifests[max(manifests)]
    return [s["bytes"] for s in newest["shards"]]


def same_params(full, resumed):
    diff = [k for k in full if not np.array_equal(full[k], resumed.get(k))]
    if sorted(full) != sorted(resumed) or diff:
        raise CheckFailed(f"resumed run differs from the uninterrupted one in {diff or 'names'}")


def resume_fails(r, plan, data, nproc, ck, steps, needles):
    """--resume must fail, every rank ending (no hang), with an error line holding needles."""
    cmd = [r.run_tool, plan, "--data", data, "--steps", str(steps), "--checkpoint-dir", ck,
           "--resume", "--nproc", str(nproc), "--timeout", "30"]
    out = r.exec(cmd, timeout=90)
    lines = [ln for ln in (out.stderr + out.stdout).splitlines() if "error:" in ln]
    hit = [ln for ln in lines if all(n in ln for n in needles)]
    if out.returncode == 0 or not hit:
        raise CheckFailed(f"exit {out.returncode}, expected an error line naming {needles}:\n" +
                          (out.stderr + out.stdout)[-2000:])
    return hit[0][hit[0].index("error:"):][:200]


def checkpoint_cases():
    m, digits = mlp()
    adam = ["--batch-size", "16", "--optimizer", "adam", "--lr", "0.01"]
    cnn_sgd = ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9",
               "--sync-batchnorm"]
    # name, model, data, flags, nproc, rank reading program 1's shard (the one the errors name)
    return [("pp=2", m, digits, adam + ["--strategy", "pp=2,microbatches=4"], 2, "rank 1"),
            ("dp=2,pp=2", os.path.join(MODELS, "cnn_train.onnx"),
             os.path.join(GOLDEN, "cnn_data.npz"),
             cnn_sgd + ["--strategy", "dp=2,pp=2,microbatches=1"], 4, "rank 2"),
            ("dp=2", m, digits, adam + ["--strategy", "dp=2"], 2, None)]


def run_checkpoints(r):
    for name, model, data, flags, nproc, reader in checkpoint_cases():
        def case(model=model, data=data, flags=flags, nproc=nproc, reader=reader, name=name):
            plan = r.compile(model, flags)
            text = r.exec([r.compile_tool, model, "--emit", "plan-text"] + flags).stdout
            expected = persistent_buffers(text)
            if not expected or any(not names for _, names in expected.values()):
                raise CheckFailed(f"no persistent buffers in the plan text: {expected}")
            ck_full, ck = r.path(f"ck-full-{name}"), r.path(f"ck-{name}")
            for d in (ck_full, ck):
                shutil.rmtree(d, ignore_errors=True)
            full, _ = r.train(plan, data, nproc, ["--steps", "6", "--checkpoint-dir", ck_full,
                                                  "--checkpoint-every", "6"])
            # Stopped after the checkpoint of step 4; then that step's manifest is lost (a kill
            # between its shards and its manifest): its shards are ignored, the run resumes
            # from step 2.
            r.train(plan, data, nproc, ["--steps", "4", "--checkpoint-dir", ck,
                                        "--checkpoint-every", "2"])
            sizes = check_layout(ck, expected)
            os.remove(os.path.join(ck, "ckpt-00000004.manifest.json"))
            cmd = [r.run_tool, plan, "--data", data, "--steps", "6", "--checkpoint-dir", ck,
                   "--checkpoint-every", "2", "--resume", "--nproc", str(nproc), "--timeout",
                   "60", "--save-params", r.path(f"resumed-{name}.npz")]
            out = r.exec(cmd)
            if out.returncode != 0 or "resuming from " + os.path.join(ck, "ckpt-00000002") \
                    not in out.stderr:
                raise CheckFailed(f"exit {out.returncode}, expected a resume from step 2:\n"
                                  + (out.stderr + out.stdout)[-2000:])
            with np.load(r.path(f"resumed-{name}.npz")) as z:
                same_params(full, {k: z[k] for k in z.files})
            check_layout(ck, expected)
            # Every persistent buffer (optimizer state and running statistics too) of step 6.
            state = 0
            for p in expected:
                f = f"ckpt-00000006.shard-{p}.npz"
                with np.load(os.path.join(ck_full, f)) as a, np.load(os.path.join(ck, f)) as b:
                    same_params({k: a[k] for k in a.files if k != "__meta__"},
                                {k: b[k] for k in b.files if k != "__meta__"})
                    state += len(a.files) - 1
            msg = (f"{len(expected)} shards per step for {nproc} ranks ({sizes} bytes); after "
                   f"resume {len(full)} parameters and {state} persistent buffers bit-identical")
            if reader is None:
                return msg
            # A deleted, truncated or bit-flipped shard: every rank ends, naming it.
            shard1 = os.path.join(ck, "ckpt-00000006.shard-1.npz")
            saved = open(shard1, "rb").read()
            os.remove(shard1)
            errors = [resume_fails(r, plan, data, nproc, ck, 8,
                                   ["ckpt-00000006.shard-1.npz: is missing", reader])]
            with open(shard1, "wb") as f:
                f.write(saved[:len(saved) // 2])
            errors.append(resume_fails(r, plan, data, nproc, ck, 8,
                                       ["ckpt-00000006.shard-1.npz: corrupt checkpoint shard",
                                        reader]))
            flipped = bytearray(saved)
            flipped[len(flipped) // 2] ^= 0x01
            with open(shard1, "wb") as f:
                f.write(bytes(flipped))
            errors.append(resume_fails(r, plan, data, nproc, ck, 8,
                                       ["ckpt-00000006.shard-1.npz: corrupt checkpoint shard",
                                        reader]))
            return msg + "; refused: " + " | ".join(errors)

        r.check(f"checkpoints/layout-resume-refusals/{name}", case)

    def killed():
        """A pp=2 job checkpointing every step is killed (SIGKILL of rank 1) once it has
        checkpoints; --resume continues from the newest complete one and ends bit for bit where
        an uninterrupted run of as many steps does, and the cut write's leftovers are gone."""
        model, digits = mlp()
        flags = ["--batch-size", "16", "--optimizer", "adam", "--lr", "0.01", "--strategy",
                 "pp=2,microbatches=4"]
        plan = r.compile(model, flags)
        marked = r.path(f"pp-ckpt-kill-{os.getpid()}.dtc")
        if not os.path.exists(marked):
            os.link(plan, marked)
        ck, log = r.path("ck-killed"), r.path("ck-killed.jsonl")
        shutil.rmtree(ck, ignore_errors=True)
        job = Job([r.run_tool, marked, "--nproc", "2", "--data", digits, "--steps", "1000000",
                   "--checkpoint-dir", ck, "--checkpoint-every", "1", "--timeout",
                   str(FAULT_TIMEOUT), "--print-every", "1000000", "--log", log], marked)
        try:
            ranks = job.ranks(2, log)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(manifests_of(ck)) < 3:
                time.sleep(0.05)
            os.kill(ranks[1], signal.SIGKILL)
            rc = job.wait(HARD_LIMIT)
            if rc is None or rc == 0:
                raise CheckFailed(f"the killed job exited {rc}:\n" + job.text()[-2000:])
        finally:
            job.cleanup()
        if procs_with(marked):
            raise CheckFailed("processes of the killed job remain")
        before = sorted(os.listdir(ck))
        newest = max(manifests_of(ck))
        steps = newest + 3
        full, _ = r.train(plan, digits, 2, ["--steps", str(steps)])
        resumed, _ = r.train(plan, digits, 2, ["--steps", str(steps), "--checkpoint-dir", ck,
                                               "--checkpoint-every", "1000000", "--resume"])
        same_params(full, resumed)
        expected = persistent_buffers(
            r.exec([r.compile_tool, model, "--emit", "plan-text"] + flags).stdout)
        check_layout(ck, expected)
        leftovers = [f for f in before if not re.fullmatch(
            r"ckpt-\d+\.(manifest\.json|shard-\d\.npz)", f) or (
            f.endswith(".npz") and int(f[5:13]) > newest)]
        return (f"killed after {newest} checkpoints (leftovers of the cut write: "
                f"{leftovers or 'none'}); resumed to step {steps}, {len(full)} tensors "
                f"bit-identical; folder clean")

    r.check("checkpoints/killed-and-resumed/pp=2", killed)


def compile_error(r, model, flags, *needles):
    cmd = [r.compile_tool, model, "-o", r.path("bad.dtc")] + flags
    out = r.exec(cmd)
    text = out.stderr.strip()
    if out.returncode == 0 or not text.startswith("error:") or \
            any(n not in text for n in needles) or os.path.exists(r.path("bad.dtc")):
        raise CheckFailed(f"exit {out.returncode}, expected an error naming {needles}: {text}")
    return text.splitlines()[0][:160]


def tied_model(path, data):
    """x[N,8] -> MatMul W -> Relu -> Tanh -> Sigmoid -> Gemm(., W, transB=1): W read by the
    first and the last node (a tied embedding's shape of use), with mse data."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((0.5 * rng.standard_normal((8, 8))).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Tanh", ["r"], ["t"], name="tanh"),
             helper.make_node("Sigmoid", ["t"], ["s"], name="sig"),
             helper.make_node("Gemm", ["s", "w"], ["logits"], name="head", transB=1)]
    g = helper.make_graph(nodes, "tied",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 8])],
                          [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    np.savez(data, x=rng.standard_normal((64, 8)).astype(np.float32),
             label=rng.standard_normal((64, 8)).astype(np.float32))


def run_errors(r):
    model, digits = mlp()
    r.check("errors/too-many-stages", lambda: compile_error(
        r, model, ["--batch-size", "16", "--strategy", "pp=8"], "pp=8", "forward nodes"))
    r.check("errors/interleaved-microbatches", lambda: compile_error(
        r, model, ["--batch-size", "12", "--strategy", "pp=2,microbatches=3,schedule=interleaved"],
        "schedule=interleaved needs microbatches to be a multiple of pp=2, got 3"))
    r.check("errors/virtual-stages-without-interleaving", lambda: compile_error(
        r, model, ["--batch-size", "16", "--strategy", "pp=2,virtual-stages=2"],
        "virtual-stages is an option of schedule=interleaved"))
    r.check("errors/batch-not-divisible", lambda: compile_error(
        r, model, ["--batch-size", "10", "--strategy", "pp=2,microbatches=4"], "--batch-size",
        "4 micro-batches"))

    def tied():
        path, data = r.path("tied.onnx"), r.path("tied.npz")
        tied_model(path, data)
        flags = ["--batch-size", "8", "--loss", "mse", "--optimizer", "adam", "--lr", "0.01"]
        run_args = ["--steps", str(STEPS), "--no-shuffle"]
        single, rows = r.train(r.compile(path, flags + ["--strategy", "single"]), data, 0,
                               run_args)
        grad1 = r.gradients(r.compile(path, flags + ["--strategy", "single"]), data)
        msgs = []
        for strategy in ("pp=2,microbatches=2", "pp=2,microbatches=4",
                         "pp=2,microbatches=8,schedule=gpipe", "pp=2,microbatches=4,schedule=zb-h1"):
            plan = r.compile(path, flags + ["--strategy", strategy])
            text = r.plan_text(path, flags + ["--strategy", strategy])
            if not re.search(r'send\(%\d+\) group="pp" peer=1 .*name="w/for_stage1', text):
                raise CheckFailed(f"{strategy}: stage 0 does not send w to stage 1:\n" +
                                  text[-1500:])
            pp, pp_rows = r.train(plan, data, 2, run_args)
            same_losses(rows, pp_rows)
            msgs.append(f"{strategy}: " + assert_law(single, pp, grad1))
        return "w lives on stage 0 and is sent to stage 1; " + "; ".join(msgs)

    r.check("equivalence/tied-weight-across-stages/pp=2", tied)

    def one_process():
        plan = r.compile(model, ["--batch-size", "16", "--strategy", "pp=2"])
        out = r.exec([r.run_tool, plan, "--data", digits, "--steps", "1"])
        if out.returncode == 0 or "--nproc 2" not in out.stderr:
            raise CheckFailed(f"exit {out.returncode}: {out.stderr.strip()[-500:]}")
        return out.stderr.strip().splitlines()[-1][:160]

    r.check("errors/pp-plan-on-one-process", one_process)


def run_faults(r):
    model, digits = mlp()

    def fault(sig, name):
        """Stage 1 of a running pp=2 job gets `sig`: the job must end non-zero within --timeout
        + slack with a line naming rank 1 (SIGKILL: mpirun sees the death; SIGSTOP: the other
        stage's heartbeats stop)."""
        plan = r.compile(model, ["--batch-size", "16", "--strategy", "pp=2,microbatches=4"])
        marked = r.path(f"pp-{name}-{os.getpid()}.dtc")
        if not os.path.exists(marked):
            os.link(plan, marked)
        log = r.path(f"pp-{name}.jsonl")
        job = Job([r.run_tool, marked, "--nproc", "2", "--data", digits, "--steps", "1000000",
                   "--timeout", str(FAULT_TIMEOUT), "--print-every", "1000000", "--log", log],
                  marked)
        ranks = {}
        try:
            ranks = job.ranks(2, log)
            time.sleep(2.0)
            if job.proc.poll() is not None:
                raise CheckFailed(f"the job ended before the signal (exit {job.proc.poll()}):\n"
                                  + job.text()[-2000:])
            t0 = time.monotonic()
            os.kill(ranks[1], sig)
            rc = job.wait(HARD_LIMIT)
            dt = time.monotonic() - t0
            job.reader.join(5)
            out = job.text()
            named = [ln for ln in out.splitlines() if re.search(r"\brank 1\b", ln)]
            if rc is None or rc == 0 or dt > FAULT_TIMEOUT + SLACK or not named:
                raise CheckFailed(f"exit {rc} after {dt:.1f} s (expected non-zero within "
                                  f"{FAULT_TIMEOUT + SLACK:.0f} s naming rank 1):\n"
                                  + out[-2000:])
            return f"exit {rc} {dt:.1f} s after the signal: {named[0].strip()[:150]}"
        finally:
            if sig == signal.SIGSTOP and 1 in ranks:
                try:
                    os.kill(ranks[1], signal.SIGCONT)
                except OSError:
                    pass
            job.cleanup()

    r.check("faults/sigkill-stage-1/pp=2", lambda: fault(signal.SIGKILL, "kill"))
    r.check("faults/sigstop-stage-1/pp=2", lambda: fault(signal.SIGSTOP, "stop"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="build directory (holds tools/dtc-compile)")
    ap.add_argument("--only", default=",".join(GROUPS))
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    only = args.only.split(",")
    unknown = [g for g in only if g not in GROUPS]
    if unknown:
        sys.exit(f"error: --only {','.join(unknown)}: known groups are {', '.join(GROUPS)}")
    if shutil.which("mpirun") is None:
        sys.exit("error: mpirun not found (tools/setup.sh installs Open MPI)")
    tmp = tempfile.mkdtemp(prefix="dtc-pp-")
    r = Runner(os.path.abspath(args.build), tmp)
    try:
        for g in GROUPS:
            if g in only:
                globals()[f"run_{g}"](r)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    failed = [n for n, ok in r.results if not ok]
    print(f"{len(r.results) - len(failed)}/{len(r.results)} checks passed")
    if failed:
        print("FAILED: " + ", ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
