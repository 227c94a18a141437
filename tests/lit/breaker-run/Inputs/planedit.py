#!/usr/bin/env python3
# Hand-edits a dtc plan (compiler/plan/plan.proto) at the protobuf wire level, so the lit tests
# in tests/lit/breaker-run need neither protoc nor generated code:
#   planedit.py IN OUT attr-float INSTR NAME VALUE   add float attribute NAME to instruction INSTR
#   planedit.py IN OUT clear-checksum                empty ModelRef.checksum and its algorithm
#   planedit.py IN OUT device RANK TYPE              set rank RANK's device type (1 cpu, 2 cuda)
#   planedit.py IN OUT swap-programs I J             swap the file's program records I and J
#   planedit.py IN OUT copy-program I J              overwrite program record J with record I
#   planedit.py IN OUT drop-program I                remove program record I
import struct
import sys


def varint(buf, pos):
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def enc_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def decode(buf):
    """[field, wiretype, raw value] for every field of one message."""
    fields, pos = [], 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        field, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = varint(buf, pos)
        elif wt == 1:
            val, pos = buf[pos:pos + 8], pos + 8
        elif wt == 2:
            n, pos = varint(buf, pos)
            val, pos = buf[pos:pos + n], pos + n
        elif wt == 5:
            val, pos = buf[pos:pos + 4], pos + 4
        else:
            raise SystemExit("unsupported wire type %d" % wt)
        fields.append([field, wt, val])
    return fields


def encode(fields):
    out = bytearray()
    for field, wt, val in fields:
        out += enc_varint(field << 3 | wt)
        if wt == 0:
            out += enc_varint(val)
        elif wt == 2:
            out += enc_varint(len(val)) + val
        else:
            out += val
    return bytes(out)


def edit_sub(fields, number, index, fn):
    """Applies fn to the decoded index-th submessage with field `number`."""
    seen = 0
    for f in fields:
        if f[0] == number:
            if seen == index:
                sub = decode(f[2])
                fn(sub)
                f[2] = encode(sub)
                return
            seen += 1
    raise SystemExit("no field %d #%d" % (number, index))


def main():
    src, dst, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    plan = decode(open(src, "rb").read())
    if cmd == "attr-float":
        instr, name, value = int(args[0]), args[1].encode(), float(args[2])
        attr = encode([[1, 2, name], [3, 5, struct.pack("<f", value)]])
        # Plan.programs(13)[0] -> RankProgram.instructions(7)[instr] -> Instruction.kernel(1)
        edit_sub(plan, 13, 0, lambda rank: edit_sub(
            rank, 7, instr, lambda ins: edit_sub(
                ins, 1, 0, lambda call: call.append([6, 2, attr]))))
    elif cmd == "clear-checksum":
        # Plan.model(4) -> ModelRef.checksum(5), ModelRef.checksum_algorithm(6)
        edit_sub(plan, 4, 0, lambda model: model.__setitem__(
            slice(None), [f for f in model if f[0] not in (5, 6)]))
    elif cmd == "device":
        rank, dtype = int(args[0]), int(args[1])

        def set_type(device):
            device[:] = [f for f in device if f[0] != 1] + [[1, 0, dtype]]

        def set_device(info):
            if not any(f[0] == 2 for f in info):
                info.append([2, 2, b""])
            edit_sub(info, 2, 0, set_type)

        # Plan.ranks(14)[rank] -> RankInfo.device(2) -> Device.type(1)
        edit_sub(plan, 14, rank, set_device)
    elif cmd in ("swap-programs", "copy-program", "drop-program"):
        # Plan.programs(13), in file order; the rank table (Plan.ranks) is left as it is.
        at = [k for k, f in enumerate(plan) if f[0] == 13]
        i = at[int(args[0])]
        if cmd == "drop-program":
            del plan[i]
        else:
            j = at[int(args[1])]
            if cmd == "swap-programs":
                plan[i], plan[j] = plan[j], plan[i]
            else:
                plan[j] = list(plan[i])
    else:
        raise SystemExit("unknown command " + cmd)
    open(dst, "wb").write(encode(plan))


if __name__ == "__main__":
    main()
