"""Opset-23 RMSNormalization, RotaryEmbedding and Attention models, run through dtc (which
expands them into primitive ops at import) and compared with onnxruntime on random inputs
(cases named *_ref: with ONNX's reference evaluator).

  function_ops.py DIR DTC_COMPILE DTC_RUN [CASE...]

Prints "<case>: ok (max abs diff D)" per case, or "<case>: FAILED ..." and exits 1.

  function_ops.py --exported EXPORTED.onnx ORIGINAL.onnx INPUTS.npz

Checks dtc's export of an expanded model (ONNX checker, opset and IR version) and that
onnxruntime computes the same outputs from it as from the original.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

F = TensorProto.FLOAT
rng = np.random.default_rng(23)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def make(name, op, inputs, outputs, attrs, opset=23):
    """inputs: list of (name, array) (None array: omitted optional input)."""
    node = helper.make_node(op, [n if a is not None else "" for n, a in inputs], outputs,
                            name=name, **attrs)
    g = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs if a is not None],
        [helper.make_tensor_value_info(o, F, None) for o in outputs if o])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=11)
    return model, {n: a for n, a in inputs if a is not None}


def make_hidden(name, op, inputs, outputs, attrs, hide=("q", "k", "v")):
    """As make, but the op reads the inputs named in `hide` through Identity nodes: their types
    are not declared (no value_info), as in an export without shape information."""
    model, feeds = make(name, op, inputs, outputs, attrs)
    g = model.graph
    node = g.node[0]
    for i, n in enumerate(node.input):
        if n in hide:
            g.node.insert(0, helper.make_node("Identity", [n], [n + "_hidden"]))
            node.input[i] = n + "_hidden"
    return model, feeds


def make_nodes(name, nodes, inputs, outputs, opset):
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs],
        [helper.make_tensor_value_info(o, t, None) for o, t in outputs])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=11)
    return model, dict(inputs)


def i64(name, values):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, TensorProto.INT64, [len(values)], values))


def cases():
    # Ops whose opset-22/23 versions only add element types (bfloat16, float8, float4):
    # the same semantics as before for the types dtc computes.
    N = helper.make_node
    img, w = rand(2, 3, 8, 8), rand(4, 3, 3, 3)
    yield "opset22_ops", make_nodes("o22", [
        N("Conv", ["img", "w"], ["c"], pads=[1, 1, 1, 1]),
        N("HardSwish", ["c"], ["h"]), N("MaxPool", ["h"], ["p"], kernel_shape=[2, 2],
                                         strides=[2, 2]),
        N("AveragePool", ["p"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("Sin", ["a"], ["s"]), N("Cos", ["s"], ["co"]), N("Elu", ["co"], ["e"]),
        N("Selu", ["e"], ["se"]), N("Softplus", ["se"], ["sp"]), N("Softsign", ["sp"], ["ss"]),
        N("Mish", ["ss"], ["mi"]), N("HardSigmoid", ["mi"], ["hs"]), N("Round", ["hs"], ["r"]),
        N("Dropout", ["hs"], ["d"]), N("Add", ["d", "r"], ["dr"]),
        N("ConvTranspose", ["dr", "w"], ["ct"]), N("GlobalAveragePool", ["ct"], ["y"])],
        [("img", img), ("w", w)], [("y", F)], 22)
    x = rand(2, 3, 4)
    yield "opset23_ops", make_nodes("o23", [
        i64("shape", [2, 12]), i64("ax", [0]), i64("pads", [0, 1, 0, 1]),
        N("Reshape", ["x", "shape"], ["r"]), N("Transpose", ["r"], ["t"], perm=[1, 0]),
        N("Unsqueeze", ["t", "ax"], ["u"]), N("Squeeze", ["u", "ax"], ["sq"]),
        N("Pad", ["sq", "pads"], ["p"]), N("Flatten", ["p"], ["f"], axis=0),
        N("Identity", ["f"], ["i"]), N("Cast", ["i"], ["c"], to=TensorProto.DOUBLE),
        N("CastLike", ["c", "x"], ["y"]), N("Shape", ["x"], ["shp"], start=1),
        N("Size", ["x"], ["n"]), N("ConstantOfShape", ["shp"], ["z"],
                                   value=helper.make_tensor("v", F, [1], [2.5]))],
        [("x", x)], [("y", F), ("shp", TensorProto.INT64), ("n", TensorProto.INT64),
                     ("z", F)], 23)

    B, S, H = 2, 5, 8
    x3 = rand(B, S, 12)
    yield "rms_default", make("rms", "RMSNormalization", [("x", x3), ("scale", rand(12))],
                              ["y"], {})
    x4 = rand(2, 3, 4, 6)
    yield "rms_axis1_eps", make("rms", "RMSNormalization", [("x", x4), ("scale", rand(4, 6))],
                                ["y"], {"axis": 1, "epsilon": 0.1})
    yield "rms_axis_m2", make("rms", "RMSNormalization", [("x", x4), ("scale", rand(4, 1))],
                              ["y"], {"axis": -2, "stash_type": 1})

    # RotaryEmbedding: 4-D (B, heads, S, H) with (B, S, H/2) caches; 3-D with position_ids.
    heads = 3
    x = rand(B, heads, S, H)
    cos, sin = rand(B, S, H // 2), rand(B, S, H // 2)
    for inter in (0, 1):
        yield f"rope4d_interleaved{inter}", make(
            "rope", "RotaryEmbedding", [("x", x), ("cos", cos), ("sin", sin)], ["y"],
            {"interleaved": inter})
        yield f"rope4d_undeclared_interleaved{inter}", make_hidden(
            "rope", "RotaryEmbedding", [("x", x), ("cos", cos), ("sin", sin)], ["y"],
            {"interleaved": inter}, hide=("x",))
    x = rand(B, S, heads * H)
    pos = rng.integers(0, 10, size=(B, S)).astype(np.int64)
    ang = np.arange(10)[:, None] * (1.0 / 10000 ** (np.arange(0, H // 2) / (H // 2)))
    cc, sc = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    for inter in (0, 1):
        yield f"rope3d_pos_interleaved{inter}", make(
            "rope", "RotaryEmbedding", [("x", x), ("cos", cc), ("sin", sc), ("pos", pos)], ["y"],
            {"interleaved": inter, "num_heads": heads})
    cp, sp = cc[:, :2], sc[:, :2]  # partial rotation: 4 of 8 features
    for inter in (0, 1):
        yield f"rope3d_partial_interleaved{inter}", make(
            "rope", "RotaryEmbedding", [("x", x), ("cos", cp), ("sin", sp), ("pos", pos)], ["y"],
            {"interleaved": inter, "num_heads": heads, "rotary_embedding_dim": 4})

    # Attention.
    q, k, v = rand(B, 4, S, H), rand(B, 4, 6, H), rand(B, 4, 6, 5)
    qkv = [("q", q), ("k", k), ("v", v)]
    yield "attn4d", make("attn", "Attention", qkv, ["y"], {})
    qs = rand(B, 4, 6, H)
    yield "attn4d_causal_scale", make("attn", "Attention", [("q", qs), ("k", k), ("v", v)],
                                      ["y"], {"is_causal": 1, "scale": 0.3})
    yield "attn4d_softcap", make("attn", "Attention", qkv, ["y"], {"softcap": 2.0})
    bmask = rng.random((S, 6)) > 0.3
    bmask[1, :] = False  # a fully masked row gives zeros
    yield "attn4d_boolmask", make("attn", "Attention", qkv + [("m", bmask)], ["y"], {})
    fmask = rand(B, 1, S, 6)
    yield "attn4d_floatmask_causal", make("attn", "Attention", qkv + [("m", fmask)], ["y"],
                                          {"is_causal": 1})
    # Grouped-query attention, 3-D inputs.
    qkv3 = [("q", rand(B, S, 6 * 4)), ("k", rand(B, 7, 2 * 4)), ("v", rand(B, 7, 2 * 3))]
    yield "attn3d_gqa", make("attn", "Attention", qkv3, ["y"],
                             {"q_num_heads": 6, "kv_num_heads": 2})
    yield "attn3d_gqa_causal", make("attn", "Attention", qkv3, ["y"],
                                    {"q_num_heads": 6, "kv_num_heads": 2, "is_causal": 1})
    # Undeclared types: the rank comes from the head-count attributes (3-D) or their absence
    # (4-D); head counts, head sizes and the default scale come from Shape at run time.
    yield "attn4d_gqa_causal_undeclared", make_hidden(
        "attn", "Attention", [("q", rand(B, 4, S, H)), ("k", rand(B, 2, 6, H)),
                              ("v", rand(B, 2, 6, 5)), ("m", fmask)], ["y"], {"is_causal": 1})
    yield "attn3d_gqa_undeclared", make_hidden(
        "attn", "Attention", qkv3, ["y"], {"q_num_heads": 6, "kv_num_heads": 2})
    # A mask shorter than the keys: padded with -inf as in ONNX's reference implementation
    # (onnxruntime refuses it), so the reference evaluator is the oracle (a "_ref" case).
    yield "attn4d_short_mask_ref", make("attn", "Attention", qkv + [("m", rand(S, 4))], ["y"], {})
    # KV cache: past keys/values, present outputs, causal with the past offset, qk output.
    cache = [("q", rand(B, 4, 2, H)), ("k", rand(B, 2, 2, H)), ("v", rand(B, 2, 2, H)),
             ("m", None), ("pk", rand(B, 2, 3, H)), ("pv", rand(B, 2, 3, H))]
    for mode in (0, 1, 2, 3):
        yield f"attn4d_past_causal_mode{mode}", make(
            "attn", "Attention", cache, ["y", "present_k", "present_v", "qk"],
            {"is_causal": 1, "qk_matmul_output_mode": mode, "softcap": 3.0})


def check_export(exported, original, inputs):
    m = onnx.load(exported)
    onnx.checker.check_model(m, full_check=True)
    opset = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")][0]
    feeds = dict(np.load(inputs))
    run = lambda model: ort.InferenceSession(  # noqa: E731
        model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(run(m), run(onnx.load(original))))
    ok = diff < 1e-5
    ops = sorted({n.op_type for n in m.graph.node})
    print(f"exported: opset {opset}, ir {m.ir_version}, ops {ops}: "
          f"{'same outputs' if ok else 'DIFFERENT outputs'} (max abs diff {diff:.1e})")
    sys.exit(0 if ok else 1)


def main():
    if sys.argv[1] == "--exported":
        check_export(*sys.argv[2:5])
    out, compile_, run = sys.argv[1:4]
    only = set(sys.argv[4:])
    os.makedirs(out, exist_ok=True)
    bad = 0
    for name, (model, feeds) in cases():
        if only and name not in only:
            continue
        path = os.path.join(out, name + ".onnx")
        onnx.save(model, path)
        names = [o.name for o in model.graph.output]
        if name.endswith("_ref"):
            from onnx.reference import ReferenceEvaluator
            want = dict(zip(names, ReferenceEvaluator(model).run(None, feeds)))
        else:
            sess = ort.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])
            want = dict(zip(names, sess.run(None, feeds)))
        np.savez(os.path.join(out, name + "_in.npz"), **feeds)
        plan = os.path.join(out, name + ".dtc")
        got_path = os.path.join(out, name + "_out.npz")
        for argv in ([compile_, path, "--inference", "-o", plan],
                     [run, plan, "--infer", "--inputs", os.path.join(out, name + "_in.npz"),
                      "--outputs", got_path]):
            p = subprocess.run(argv, capture_output=True, text=True)
            if p.returncode != 0:
                print(f"{name}: FAILED {os.path.basename(argv[0])}: {p.stderr.strip()}")
                bad += 1
                break
        else:
            got = np.load(got_path)
            diff = 0.0
            for o in names:
                if got[o].shape != want[o].shape:
                    print(f"{name}: FAILED output {o} shape {got[o].shape} vs {want[o].shape}")
                    bad += 1
                    break
                # onnxruntime writes the lowest float, not -inf, for masked scores in
                # qk_matmul_output mode 2; the operator text says -inf (as dtc writes).
                lo = np.finfo(np.float32).min
                g, w = np.maximum(got[o], lo), np.maximum(want[o], lo)
                diff = max(diff, float(np.max(np.abs(g - w))))
                if not np.allclose(g, w, rtol=1e-4, atol=1e-5):
                    print(f"{name}: FAILED output {o} max abs diff {diff:.3g}")
                    bad += 1
                    break
            else:
                print(f"{name}: ok (max abs diff {diff:.1e})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
