#!/usr/bin/env python3
"""Parity of the issue-12 operators' CPU kernels with onnxruntime on seeded random inputs.

InstanceNormalization, GroupNormalization (opset 18 per-group and 21 per-channel forms), Einsum
(matmul forms, transposes, diagonals, traces, outer products, reductions, three operands,
ellipsis broadcasting, empty contractions, f64) and TopK (ties by lower index, k = 0, k = the
axis length, smallest, int64, opset 10): each case is a one-node model compiled with
dtc-compile --inference and run with dtc-run --infer, compared with onnxruntime (numpy.einsum
where onnxruntime refuses numpy's ellipsis broadcasting across ranks). Prints one line per case;
exits 1 if any differs.

Usage: ops_parity.py BUILD_DIR
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ONNX_TYPES = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
              np.int64: TensorProto.INT64}


def one_node_model(node, opset, inputs, outputs, consts):
    """A model of `node` with graph inputs `inputs` (name -> array), initializers `consts` and
    outputs `outputs` (name -> ONNX element type)."""
    ins = [helper.make_tensor_value_info(k, ONNX_TYPES[v.dtype.type], list(v.shape))
           for k, v in inputs.items()]
    outs = [helper.make_tensor_value_info(k, t, None) for k, t in outputs.items()]
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    graph = helper.make_graph([node], node.op_type.lower(), ins, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def reference(model, node, inputs):
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, inputs), "onnxruntime"
    except Exception:  # ONNX refuses numpy's ellipsis broadcasting across ranks; numpy does not
        if node.op_type != "Einsum":
            raise
        equation = helper.get_attribute_value(node.attribute[0]).decode()
        return [np.einsum(equation, *inputs.values())], "numpy.einsum"


def dtc(build, model, inputs, tmp):
    """Outputs of the model under dtc-compile --inference and dtc-run --infer, or an error."""
    path = os.path.join(tmp, "m.onnx")
    onnx.save(model, path)
    plan = os.path.join(tmp, "p.dtc")
    p = subprocess.run([os.path.join(build, "tools", "dtc-compile"), path, "--inference", "-o",
                        plan], capture_output=True, text=True)
    if p.returncode:
        return None, "dtc-compile: " + p.stderr.strip()
    np.savez(os.path.join(tmp, "in.npz"), **inputs)
    p = subprocess.run([os.path.join(build, "tools", "dtc-run"), plan, "--infer", "--inputs",
                        os.path.join(tmp, "in.npz"), "--outputs", os.path.join(tmp, "out.npz")],
                       capture_output=True, text=True)
    if p.returncode:
        return None, "dtc-run: " + p.stderr.strip()
    with np.load(os.path.join(tmp, "out.npz")) as got:
        return {k: got[k] for k in got.files}, None


class Runner:
    def __init__(self, build):
        self.build = build
        self.failed = 0
        self.total = 0

    def case(self, name, opset, node, inputs, consts=None, tol=1e-4):
        """Runs one case; output "i" is int64 (TopK's indices), the others of input 0's type."""
        self.total += 1
        xtype = ONNX_TYPES[next(iter(inputs.values())).dtype.type]
        outputs = {o: TensorProto.INT64 if o == "i" else xtype for o in node.output}
        model = one_node_model(node, opset, inputs, outputs, consts or {})
        wants, source = reference(model, node, inputs)
        with tempfile.TemporaryDirectory(prefix="dtc-ops-") as tmp:
            got, err = dtc(self.build, model, inputs, tmp)
        if err is None:
            for o, want in zip(node.output, wants):
                g = got[o]
                if g.dtype != want.dtype or g.shape != want.shape:
                    err = f"output {o}: {g.dtype}{g.shape}, expected {want.dtype}{want.shape}"
                elif not np.allclose(g, want, rtol=tol, atol=tol):
                    err = f"output {o}: max error {np.max(np.abs(g.astype(np.float64) - want))}"
                if err:
                    break
        if err:
            self.failed += 1
            print(f"FAIL {name}: {err}")
        else:
            print(f"ok   {name} (against {source})")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    run = Runner(sys.argv[1])
    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    for shape, eps in [((2, 3, 4, 5), 1e-5), ((1, 1, 1), 1e-5), ((3, 2, 7), 0.5),
                       ((2, 4, 1, 1), 1e-3), ((2, 3, 2, 3, 2), 1e-5)]:
        c = shape[1]
        run.case(f"InstanceNormalization {shape} epsilon={eps}", 17,
                 helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=eps),
                 {"x": f32(*shape) * 3 + 1, "s": f32(c), "b": f32(c)})
    for shape, groups, eps in [((2, 6, 3, 4), 3, 1e-5), ((1, 4, 5), 1, 1e-5), ((3, 4, 2), 4, 0.1),
                               ((2, 6, 1, 1), 2, 1e-5), ((2, 8), 2, 1e-5)]:
        for opset, params in [(21, shape[1]), (18, groups)]:
            run.case(f"GroupNormalization-{opset} {shape} num_groups={groups}", opset,
                     helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"],
                                      num_groups=groups, epsilon=eps),
                     {"x": f32(*shape) * 2 - 1, "s": f32(params), "b": f32(params)})
    for eq, shapes in [
            ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]), ("bij,bjk->bik", [(3, 4, 5), (3, 5, 2)]),
            ("ij->ji", [(3, 4)]), ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("bii->bi", [(3, 4, 4)]),
            ("...ij,...jk->...ik", [(2, 1, 3, 4), (2, 5, 4, 2)]),
            ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]), ("...ii->...i", [(2, 3, 3)]),
            ("b...,b...->b...", [(2, 3, 4), (2, 3, 4)]), ("ij,jk", [(3, 4), (4, 5)]),
            ("i,j->ij", [(3,), (4,)]), ("bij->j", [(2, 3, 4)]), ("i,i", [(6,), (6,)]),
            ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]), ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
            ("ij,kl->ikjl", [(2, 3), (1, 2)]), ("ij,jk->ik", [(3, 0), (0, 2)]),
            ("ij,ij->ij", [(1, 4), (1, 4)])]:
        ins = {f"x{i}": f32(*s) for i, s in enumerate(shapes)}
        run.case(f"Einsum '{eq}' {shapes}", 13,
                 helper.make_node("Einsum", list(ins), ["y"], equation=eq), ins)
    ins = {"x0": rng.standard_normal((3, 4, 5)), "x1": rng.standard_normal((3, 5, 2))}
    run.case("Einsum f64 'bij,bjk->bik'", 13,
             helper.make_node("Einsum", list(ins), ["y"], equation="bij,bjk->bik"), ins, tol=1e-10)
    for shape, k, axis, largest, dtype in [
            ((3, 4), 2, -1, 1, np.float32), ((3, 4), 3, 0, 0, np.float32),
            ((5, 8, 3), 8, 1, 1, np.float32), ((6,), 0, 0, 1, np.float32),
            ((2, 9), 4, 1, 1, np.int64), ((2, 9), 4, 1, 0, np.int64), ((1, 1), 1, 0, 1, np.float64)]:
        x = rng.integers(0, 4, shape).astype(dtype)  # many ties: the lower index comes first
        run.case(f"TopK {shape} k={k} axis={axis} largest={largest} {dtype.__name__}", 11,
                 helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest),
                 {"x": x}, {"k": np.array([k], np.int64)}, tol=0)
    run.case("TopK-10 (4, 10) k=3", 10, helper.make_node("TopK", ["x", "k"], ["v", "i"]),
             {"x": f32(4, 10)}, {"k": np.array([3], np.int64)}, tol=0)
    print(f"{run.total - run.failed}/{run.total} cases match")
    sys.exit(1 if run.failed else 0)


if __name__ == "__main__":
    main()
