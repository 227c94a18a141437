"""Writes corrupted copies of a training plan (issue 13, finding 1): an instruction output index
past the buffers, an input binding index of 99, no rank programs.
Usage: corrupt_plan.py PLAN_PB2_DIR PLAN OUT_DIR"""
import os
import sys

sys.path.insert(0, sys.argv[1])
import plan_pb2 as P  # noqa: E402

src, out = sys.argv[2], sys.argv[3]
base = P.Plan()
base.ParseFromString(open(src, "rb").read())


def write(name, edit):
    p = P.Plan()
    p.CopyFrom(base)
    edit(p)
    with open(os.path.join(out, name), "wb") as f:
        f.write(p.SerializeToString())


def bad_output(p):
    for ins in p.programs[0].instructions:
        if ins.HasField("kernel"):
            ins.kernel.outputs[0] = len(p.programs[0].buffers) + 5
            return


write("bad_output.dtc", bad_output)
write("bad_binding.dtc", lambda p: setattr(p.programs[0].inputs[0], "buffer", 99))
write("no_programs.dtc", lambda p: p.ClearField("programs"))
