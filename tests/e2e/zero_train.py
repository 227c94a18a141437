#!/usr/bin/env python3
"""End-to-end checks of ZeRO (dtc-compile --strategy dp=N --zero 1|2; Rajbhandari et al. 2020):
optimizer state (and with --zero 2 gradients) sharded over the data-parallel ranks.

Groups (--only takes a comma-separated subset; all by default):
  equivalence  The law of e2e/dp_train.py: parameters after 5 steps (--no-shuffle
               --save-params) equal --strategy single on the same global batch, per tensor
               max|zero - single| / max(max|single|, 1e-2) <= 1e-5 (Adam noise left out), and
               every logged loss matches. Cases: the digits MLP with SGD + momentum and with
               Adam, --zero 1 and 2, dp=2 and dp=4 (its 2410 parameters are not a multiple of 4:
               the flat bucket is padded; --bucket-mb 0.001 puts every tensor in its own bucket,
               the 10-element bias padded to 12), --clip-grad-norm (global norm from the shards'
               squares all-reduced over dp), --grad-accum-steps 2 (the accumulated gradients
               sharded once per step); the GPT with Adam and with SGD + momentum (--zero 1, 2;
               dp=2, 4); the tied-embedding GPT (one weight used twice); the CNN with
               --sync-batchnorm (running statistics compared too); dp=2,pp=2 (the MLP with Adam,
               the GPT with 2 micro-batches; each stage's dp group shards its buckets);
               dp=2,tp=2 (MLP, GPT: each tp rank's dp group shards its local weights); the tied
               GPT on the full mesh dp=2,pp=2,tp=2 (8 ranks); --clip-grad-norm on those meshes
               (dp=2,pp=2 --zero 1, dp=2,tp=2 --zero 2, the tied GPT on dp=2,pp=2,tp=2: the
               norm sums each stage's shards once, split weights over tp, replicated ones
               once), with a threshold that binds (single device with and without it differ).
  plans        --emit plan-text: --zero 2 reduce-scatters every gradient bucket and all-gathers
               the updated parameters, both on group "dp", and keeps no whole-gradient
               all-reduce; --zero 1 all-reduces as dp and all-gathers; optimizer-state bytes per
               rank are 1/N of single's (plus padding).
  checkpoints  --checkpoint-dir/--resume (--zero 1 dp=2, --zero 2 dp=4 and dp=2,pp=2, Adam):
               stopped at step 2 and resumed to 6, parameters and checkpoint arrays
               bit-identical to 6 steps in one run; each program's shard holds every replica's
               optimizer state ("<buffer>@dp<d>").
  errors       --zero without dp (tp=2, pp=2), --zero 3;
               --dump-gradients under --zero 2 is refused with a clear error; --export writes
               whole tensors.

Usage: zero_train.py --build BUILD_DIR [--only equivalence,plans,checkpoints,errors]
       [--cases REGEX] [--keep]
"""
import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dp_train import GOLDEN, MODELS, STEPS, CheckFailed, Runner, assert_law, law  # noqa: E402
from pp_train import same_losses  # noqa: E402

GROUPS = ["equivalence", "plans", "checkpoints", "errors"]
TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "tools", "bench")


def cases():
    digits = os.path.join(MODELS, "data", "digits_train.npz")
    gpt_data = os.path.join(GOLDEN, "gpt_data.npz")
    mlp = os.path.join(MODELS, "mlp_digits.onnx")
    gpt = os.path.join(MODELS, "gpt_train.onnx")
    tied = os.path.join(MODELS, "gpt_tied_train.onnx")
    cnn = os.path.join(MODELS, "cnn_train.onnx")
    cnn_data = os.path.join(GOLDEN, "cnn_data.npz")
    sgd = ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]
    adam = ["--batch-size", "16", "--optimizer", "adam", "--lr", "0.01"]
    gpt_adam = ["--batch-size", "8", "--class-axis", "-1", "--optimizer", "adam", "--lr", "1e-3"]
    gpt_sgd = ["--batch-size", "8", "--class-axis", "-1", "--optimizer", "sgd", "--lr", "0.1",
               "--momentum", "0.9"]
    clip = ["--clip-grad-norm", "0.5"]
    accum = ["--grad-accum-steps", "2"]
    tiny = ["--bucket-mb", "0.001"]
    # name, model, data, common flags, zero-only flags, dp, zero, adam
    out = []
    for z in (1, 2):
        for dp in (2, 4):
            out.append((f"mlp-sgd/dp={dp}/zero={z}", mlp, digits, sgd, [], dp, z, False))
            out.append((f"mlp-adam/dp={dp}/zero={z}", mlp, digits, adam, [], dp, z, True))
        out.append((f"mlp-sgd/dp=4/zero={z}/bucket-per-tensor", mlp, digits, sgd, tiny, 4, z,
                    False))
        out.append((f"mlp-adam/dp=2/zero={z}/clip-grad-norm", mlp, digits, adam + clip, [], 2, z,
                    True))
        out.append((f"mlp-sgd/dp=2/zero={z}/grad-accum", mlp, digits, sgd + accum, [], 2, z,
                    False))
        out.append((f"gpt-adam/dp=2/zero={z}", gpt, gpt_data, gpt_adam, [], 2, z, True))
    out.append(("gpt-sgd/dp=4/zero=2", gpt, gpt_data, gpt_sgd, [], 4, 2, False))
    out.append(("gpt_tied-sgd/dp=2/zero=2", tied, gpt_data, gpt_sgd, [], 2, 2, False))
    out.append(("cnn-syncbn-sgd/dp=2/zero=2", cnn, cnn_data, sgd, ["--sync-batchnorm"], 2, 2,
                False))
    out.append(("gpt-adam/dp=4/zero=1", gpt, gpt_data, gpt_adam, [], 4, 1, True))
    # Tensor parallelism: each tp rank's dp group shards its local (split or replicated) weights.
    for z in (1, 2):
        out.append((f"mlp-sgd/dp=2,tp=2/zero={z}", mlp, digits, sgd, [], "dp=2,tp=2", z, False))
        out.append((f"gpt-sgd/dp=2,tp=2/zero={z}", gpt, gpt_data, gpt_sgd, [], "dp=2,tp=2", z,
                    False))
    out.append(("gpt_tied-sgd/dp=2,pp=2,tp=2/zero=2", tied, gpt_data, gpt_sgd, [],
                "dp=2,pp=2,tp=2,microbatches=2", 2, False))
    # Pipelines: one dp group per stage, each shards its stage's buckets.
    for z in (1, 2):
        out.append((f"mlp-adam/dp=2,pp=2/zero={z}", mlp, digits, adam, [], "dp=2,pp=2", z, True))
        out.append((f"gpt-sgd/dp=2,pp=2,microbatches=2/zero={z}", gpt, gpt_data, gpt_sgd, [],
                    "dp=2,pp=2,microbatches=2", z, False))
    # Clipping on meshes: the global norm counts every gradient element once over the stages,
    # the tp shards (replicated weights once) and the dp blocks. SGD, where a clip that binds
    # changes every step (Adam's step is almost invariant to the gradient's scale).
    gpt_clip = ["--clip-grad-norm", "0.1"]
    out.append(("mlp-sgd/dp=2,pp=2/zero=1/clip-grad-norm", mlp, digits, sgd + clip, [],
                "dp=2,pp=2", 1, False))
    out.append(("mlp-sgd/dp=2,tp=2/zero=2/clip-grad-norm", mlp, digits, sgd + clip, [],
                "dp=2,tp=2", 2, False))
    out.append(("gpt-sgd/dp=2,pp=2,microbatches=2/zero=2/clip-grad-norm", gpt, gpt_data,
                gpt_sgd + gpt_clip, [], "dp=2,pp=2,microbatches=2", 2, False))
    out.append(("gpt-sgd/dp=2,tp=2/zero=1/clip-grad-norm", gpt, gpt_data, gpt_sgd + gpt_clip, [],
                "dp=2,tp=2", 1, False))
    out.append(("gpt_tied-sgd/dp=2,pp=2,tp=2/zero=1/clip-grad-norm", tied, gpt_data,
                gpt_sgd + gpt_clip, [], "dp=2,pp=2,tp=2,microbatches=2", 1, False))
    return out


def run_equivalence(r, only=None):
    run_args = ["--steps", str(STEPS), "--no-shuffle"]
    baselines = {}
    for name, model, data, flags, extra, dp, zero, adam in cases():
        if only and not re.search(only, name):
            continue

        def check(model=model, data=data, flags=flags, extra=extra, dp=dp, zero=zero,
                  adam=adam):
            key = (model, tuple(flags))
            if key not in baselines:
                plan = r.compile(model, ["--strategy", "single"] + flags)
                params, rows = r.train(plan, data, 0, run_args)
                grad1 = r.gradients(plan, data) if adam else None
                baselines[key] = (params, rows, grad1)
            single, single_rows, grad1 = baselines[key]
            if "--clip-grad-norm" in flags:
                # The threshold must bind, or the case would not test the norm.
                at = flags.index("--clip-grad-norm")
                unclipped = flags[:at] + flags[at + 2:]
                free, _ = r.train(r.compile(model, ["--strategy", "single"] + unclipped), data,
                                  0, run_args)
                err, tensor, _ = law(single, free)
                if err < 1e-3:
                    raise CheckFailed(f"the clip does not bind: single device with and without "
                                      f"it differ by {err:.2e} at most ({tensor})")
            strategy = dp if isinstance(dp, str) else f"dp={dp}"
            nproc = dp if isinstance(dp, int) else (8 if "tp=2" in dp and "pp=2" in dp else 4)
            plan = r.compile(model, ["--strategy", strategy, "--zero", str(zero)] + flags + extra)
            params, rows = r.train(plan, data, nproc, run_args)
            same_losses(single_rows, rows)
            return assert_law(single, params, grad1)

        r.check(f"equivalence/{name}", check)


def collectives(text):
    """(kind, group, name) of every collective of a plan text."""
    return re.findall(r'= (all-reduce-\w+|reduce-scatter-\w+|all-gather)\(.*?\) group="(\w+)" '
                      r'name="([^"]*)"', text)


def run_plans(r):
    model = os.path.join(MODELS, "mlp_digits.onnx")
    flags = ["--batch-size", "16", "--optimizer", "adam", "--lr", "0.01", "--bucket-mb", "0.001"]

    def stage2():
        text = r.plan_text(model, ["--strategy", "dp=2", "--zero", "2"] + flags)
        cs = collectives(text)
        rs = [c for c in cs if c[0].startswith("reduce-scatter")]
        ag = [c for c in cs if c[0] == "all-gather"]
        ar = [c for c in cs if c[0].startswith("all-reduce")]
        if len(rs) != 4 or len(ag) != 4 or ar or any(c[1] != "dp" for c in cs):
            raise CheckFailed(f"collectives {cs}")
        return f"{len(rs)} reduce-scatters, {len(ag)} all-gathers on dp, no all-reduce"

    def stage1():
        text = r.plan_text(model, ["--strategy", "dp=2", "--zero", "1"] + flags)
        cs = collectives(text)
        kinds = sorted({c[0] for c in cs})
        if kinds != ["all-gather", "all-reduce-mean"] or any(c[1] != "dp" for c in cs):
            raise CheckFailed(f"collectives {cs}")
        return f"{len(cs)} collectives: all-reduce-mean and all-gather on dp"

    def memory():
        sys.path.insert(0, TOOLS)
        import zero_memory  # noqa: E402
        rows = zero_memory.measure(r.compile_tool, model, ["--batch-size", "16", "--optimizer",
                                                            "adam", "--lr", "0.01"], [2, 4])
        single = rows[("single", 0)]
        msgs = []
        for n in (2, 4):
            for z in (1, 2):
                m = rows[(f"dp={n}", z)]
                ratio = m["optimizer_state"] / single["optimizer_state"]
                # 1/N, plus at most N-1 padding elements per bucket (one bucket here).
                if not 1.0 / n <= ratio <= 1.0 / n + 0.01:
                    raise CheckFailed(f"dp={n} zero={z}: optimizer state ratio {ratio:.4f}")
                msgs.append(f"dp={n},zero={z} state x{ratio:.3f}")
            if rows[(f"dp={n}", 2)]["gradient_held"] >= rows[(f"dp={n}", 1)]["gradient_held"]:
                raise CheckFailed(f"dp={n}: zero 2 holds {rows[(f'dp={n}', 2)]} gradient bytes")
        return ", ".join(msgs)

    r.check("plans/zero2-reduce-scatter-all-gather", stage2)
    r.check("plans/zero1-all-reduce-all-gather", stage1)
    r.check("plans/memory", memory)


def run_checkpoints(r):
    """Stopped at step 2 and resumed to step 6, bit-identical to 6 steps at once: parameters and
    every rank's optimizer-state shard (the checkpoint holds all of them, "<buffer>@dp<r>")."""
    import numpy as np
    digits = os.path.join(MODELS, "data", "digits_train.npz")
    model = os.path.join(MODELS, "mlp_digits.onnx")
    for zero, strategy, nproc, programs in ((1, "dp=2", 2, 1), (2, "dp=4", 4, 1),
                                             (2, "dp=2,pp=2", 4, 2)):
        def case(zero=zero, strategy=strategy, nproc=nproc, programs=programs):
            flags = ["--batch-size", "16", "--optimizer", "adam", "--lr", "0.01", "--strategy",
                     strategy, "--zero", str(zero)]
            plan = r.compile(model, flags)
            ck_full, ck = r.unique("ck-full", ""), r.unique("ck", "")
            full, _ = r.train(plan, digits, nproc, ["--steps", "6", "--checkpoint-dir", ck_full,
                                                    "--checkpoint-every", "6"])
            r.train(plan, digits, nproc, ["--steps", "2", "--checkpoint-dir", ck,
                                          "--checkpoint-every", "2"])
            resumed, _ = r.train(plan, digits, nproc, ["--steps", "6", "--checkpoint-dir", ck,
                                                       "--checkpoint-every", "2", "--resume"])
            for k in full:
                if not np.array_equal(full[k], resumed[k]):
                    raise CheckFailed(f"{k}: resumed differs by "
                                      f"{np.abs(full[k] - resumed[k]).max()}")
            replicas = nproc // programs
            count = 0
            for p in range(programs):
                f = f"ckpt-00000006.shard-{p}.npz"
                with np.load(os.path.join(ck_full, f)) as a, np.load(os.path.join(ck, f)) as b:
                    shards = [k for k in a.files if "@dp" in k]
                    # Adam's two moments of at least one bucket, for every replica.
                    if len(shards) < 2 * replicas or len(shards) % replicas or \
                            sorted(a.files) != sorted(b.files):
                        raise CheckFailed(f"arrays {sorted(a.files)} / {sorted(b.files)}")
                    for k in a.files:
                        if k != "__meta__" and not np.array_equal(a[k], b[k]):
                            raise CheckFailed(f"checkpoint array {k} differs after resume")
                    # Different blocks of the parameters: replica 0's and 1's state differ.
                    s0 = sorted(k for k in shards if k.endswith("@dp0"))[0]
                    s1 = s0[:-1] + "1"
                    if np.array_equal(a[s0], a[s1]):
                        raise CheckFailed(f"{s0} and {s1} are equal")
                    count += len(shards)
            return (f"{len(full)} parameters and {count} optimizer-state shards in {programs} "
                    f"program shard(s) bit-identical after resume")

        r.check(f"checkpoints/zero={zero}/{strategy}", case)


def run_errors(r):
    model = os.path.join(MODELS, "mlp_digits.onnx")
    digits = os.path.join(MODELS, "data", "digits_train.npz")
    flags = ["--batch-size", "16", "--optimizer", "adam", "--lr", "0.01"]

    def expect_compile_error(extra, pattern):
        return r.expect_compile_error(model, flags + extra, pattern)

    r.check("errors/zero-single", lambda: expect_compile_error(
        ["--zero", "1"], r"error: --zero: shards over data-parallel ranks"))
    r.check("errors/zero-tp-without-dp", lambda: expect_compile_error(
        ["--strategy", "tp=2", "--zero", "1"], r"error: --zero: shards over data-parallel ranks"))
    r.check("errors/zero-pp-without-dp", lambda: expect_compile_error(
        ["--strategy", "pp=2", "--zero", "2"], r"error: --zero: shards over data-parallel ranks"))
    r.check("errors/zero-3", lambda: expect_compile_error(
        ["--strategy", "dp=2", "--zero", "3"], r"error: --zero: must be 0"))

    def refused(zero, flag, pattern):
        plan = r.compile(model, ["--strategy", "dp=2", "--zero", str(zero)] + flags)
        res = r.exec([r.run_tool, plan, "--data", digits, "--steps", "1", flag,
                      r.unique("out", "" if flag == "--checkpoint-dir" else ".npz"),
                      "--nproc", "2", "--timeout", "60"])
        if res.returncode == 0 or not re.search(pattern, res.stderr + res.stdout):
            raise CheckFailed(f"exit {res.returncode}: {(res.stderr + res.stdout).strip()[-500:]}")
        return "refused"

    r.check("errors/dump-gradients-zero2-refused", lambda: refused(
        2, "--dump-gradients", r"error: (rank \d+: )?--dump-gradients: no rank holds"))

    def export():
        import numpy as np
        import onnx
        from onnx import numpy_helper
        plan = r.compile(model, ["--strategy", "dp=2", "--zero", "2"] + flags)
        e = r.unique("export", ".onnx")
        params, _ = r.train(plan, digits, 2, ["--steps", "2", "--no-shuffle", "--export", e])
        m = onnx.load(e)
        onnx.checker.check_model(m)
        w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
        for k, v in params.items():
            if w[k].shape != v.shape or not np.array_equal(w[k], v):
                raise CheckFailed(f"exported {k} {w[k].shape} differs from --save-params")
        return f"{len(params)} whole tensors, checker ok"

    r.check("state/export-whole", export)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--only", default=",".join(GROUPS))
    ap.add_argument("--cases", default="", help="regex: equivalence cases to run")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    groups = [g for g in args.only.split(",") if g]
    for g in groups:
        if g not in GROUPS:
            sys.exit(f"unknown group '{g}' (known: {', '.join(GROUPS)})")
    tmp = tempfile.mkdtemp(prefix="dtc-zero-")
    r = Runner(os.path.abspath(args.build), tmp)
    runs = {"equivalence": lambda r: run_equivalence(r, args.cases), "plans": run_plans,
            "checkpoints": run_checkpoints, "errors": run_errors}
    r.run_groups([runs[g] for g in groups], args.keep)


if __name__ == "__main__":
    main()
