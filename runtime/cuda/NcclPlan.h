// The pure part of the NCCL device communicator (NcclCommunicator.h): how one CommRequest
// becomes NCCL calls — the element type map, the merging of all-reduce operands into
// contiguous spans, world rank -> group rank — with no CUDA runtime call, so that the CPU-side
// unit test (tests/gpu/NcclPlanTest.cpp) checks it on a machine without a GPU.
#pragma once

#include "compiler/support/Status.h"
#include "runtime/comm/Communicator.h"

#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace dtc::rt::nccl {

/// An element type as NCCL sees it.
struct NcclType {
  ncclDataType_t type;
  size_t size;      ///< bytes per element
  bool floating;    ///< ncclAvg (ReduceOp::kMean) is allowed
  const char *name; ///< "f32", ...: messages
};

/// The NCCL type of a dtc element type: f32, f64, f16, bf16, i32, i64, u8, i8 (ONNX numbering,
/// compiler/ir/Types.h); nullopt for any other (bool, i16, u16, u32, u64, string: NCCL has no
/// such reduction type).
inline std::optional<NcclType> ncclTypeOf(ir::DType t) {
  switch (t) {
  case ir::DType::kFloat32:
    return NcclType{ncclFloat32, 4, true, "f32"};
  case ir::DType::kFloat64:
    return NcclType{ncclFloat64, 8, true, "f64"};
  case ir::DType::kFloat16:
    return NcclType{ncclFloat16, 2, true, "f16"};
  case ir::DType::kBFloat16:
    return NcclType{ncclBfloat16, 2, true, "bf16"};
  case ir::DType::kInt32:
    return NcclType{ncclInt32, 4, false, "i32"};
  case ir::DType::kInt64:
    return NcclType{ncclInt64, 8, false, "i64"};
  case ir::DType::kUInt8:
    return NcclType{ncclUint8, 1, false, "u8"};
  case ir::DType::kInt8:
    return NcclType{ncclInt8, 1, false, "i8"};
  default:
    return std::nullopt;
  }
}

/// The position of `worldRank` in `ranks` (a group's world-rank list in group-rank order), -1
/// when it is not a member.
inline int groupRankOf(const std::vector<int> &ranks, int worldRank) {
  auto it = std::find(ranks.begin(), ranks.end(), worldRank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

/// "{0, 2, 4}".
inline std::string rankList(const std::vector<int> &ranks) {
  std::string s = "{";
  for (size_t i = 0; i < ranks.size(); ++i)
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "}";
}

/// The group of a request in messages: "the world" (group 0), "group dp" (groups 1..n named
/// by `names[g - 1]`, the plan's axis of the group), else "group 3".
inline std::string groupLabel(int group, const std::vector<std::string> &names) {
  if (group == 0)
    return "the world";
  if (group > 0 && static_cast<size_t>(group) <= names.size() &&
      !names[static_cast<size_t>(group - 1)].empty())
    return "group " + names[static_cast<size_t>(group - 1)];
  return "group " + std::to_string(group);
}

/// One all-reduce over a contiguous span: `count` elements read at `in` (== `out` in place) and
/// written at `out`.
struct ReduceSpan {
  const std::byte *in;
  std::byte *out;
  size_t count;
};

/// The all-reduce operands (inputs[i] -> outputs[i], bytes[i] bytes of `elemSize`-byte elements)
/// as spans, one ncclAllReduce each, ordered by output address. Zero-byte operands are dropped.
/// Operands whose outputs, sorted by address, follow each other with gaps below 64 bytes (whole
/// elements: the arena's alignment padding, reduced too) and whose inputs keep the same offsets
/// from the outputs (all in place, or all out of place with the input span apart from the
/// output span) share one span, as MpiCommunicator does (runtime/comm/MpiRequests.cpp). The
/// spans depend on the buffers' relative layout, so every member must pass the same layout (the
/// executor's arena: same plan, same alignment). Errors (a message without the request's name):
/// operand lists of different lengths, a size that is not whole elements, a null buffer, an
/// input that partly overlaps its output, outputs that overlap each other.
inline Expected<std::vector<ReduceSpan>> allReduceSpans(const CommRequest &r, size_t elemSize) {
  if (r.outputs.size() != r.bytes.size() || r.inputs.size() != r.bytes.size())
    return Status::error("inputs (" + std::to_string(r.inputs.size()) + "), outputs (" +
                         std::to_string(r.outputs.size()) + ") and bytes (" +
                         std::to_string(r.bytes.size()) + ") differ in length");
  struct Piece {
    const std::byte *in;
    std::byte *out;
    size_t bytes;
  };
  std::vector<Piece> pieces;
  for (size_t i = 0; i < r.bytes.size(); ++i) {
    if (r.bytes[i] % elemSize != 0)
      return Status::error("operand " + std::to_string(i) + " has " + std::to_string(r.bytes[i]) +
                           " bytes, not a multiple of " + std::to_string(elemSize));
    if (r.bytes[i] == 0)
      continue;
    if (!r.inputs[i] || !r.outputs[i])
      return Status::error("operand " + std::to_string(i) + " has a null buffer");
    const auto *in = static_cast<const std::byte *>(r.inputs[i]);
    auto *out = static_cast<std::byte *>(r.outputs[i]);
    if (in != out && in < out + r.bytes[i] && out < in + r.bytes[i])
      return Status::error("operand " + std::to_string(i) +
                           ": the input partly overlaps the output (in place or apart only)");
    pieces.push_back({in, out, r.bytes[i]});
  }
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const Piece &a, const Piece &b) { return a.out < b.out; });
  std::vector<ReduceSpan> spans;
  size_t first = 0; // the first piece of the span being built
  auto close = [&](size_t end) {
    const Piece &a = pieces[first], &b = pieces[end - 1];
    spans.push_back({a.in, a.out, static_cast<size_t>(b.out + b.bytes - a.out) / elemSize});
  };
  for (size_t i = 1; i <= pieces.size(); ++i) {
    if (i < pieces.size()) {
      const Piece &prev = pieces[i - 1], &cur = pieces[i];
      const std::byte *prevEnd = prev.out + prev.bytes;
      if (cur.out < prevEnd)
        return Status::error("the outputs of two operands overlap");
      const size_t gap = static_cast<size_t>(cur.out - prevEnd);
      // Same offset between input and output as the span's first operand.
      const bool sameLayout = cur.in - pieces[first].in == cur.out - pieces[first].out;
      bool join = gap < 64 && gap % elemSize == 0 && sameLayout;
      if (join && pieces[first].in != pieces[first].out) {
        // Out of place: the merged input span must stay apart from the merged output span.
        const std::byte *inLo = pieces[first].in, *outLo = pieces[first].out;
        const size_t span = static_cast<size_t>(cur.out + cur.bytes - outLo);
        join = inLo + span <= outLo || outLo + span <= inLo;
      }
      if (join)
        continue;
    }
    if (!pieces.empty())
      close(i);
    first = i;
  }
  return spans;
}

/// One NCCL call of a request.
struct NcclCall {
  enum class Kind { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSend, kRecv };
  Kind kind = Kind::kAllReduce;
  const void *send = nullptr; ///< sendbuff (null for a recv)
  void *recv = nullptr;       ///< recvbuff (null for a send)
  size_t count = 0;           ///< NCCL's count (per rank for all-gather and reduce-scatter)
  ncclDataType_t type = ncclUint8;
  ncclRedOp_t op = ncclSum;
  int peer = -1; ///< broadcast root, send destination, recv source: a group rank
};

/// Point-to-point messages of a group travel on one of two NCCL communicators by direction:
/// from a lower to a higher group rank on the group's communicator (the stream of the
/// collectives), from a higher to a lower one on the group's reverse communicator (a stream of
/// its own). An NCCL send blocks its stream until the peer's recv runs, so with one stream a
/// pipeline stage that sends activations forward and then receives gradients back, while its
/// successor sends gradients back and then receives activations, would wait on each other
/// forever; by direction, each side's messages run in submission order per direction and the
/// two directions proceed independently. True when `c`, a send or recv of group rank `me`, goes
/// on the reverse communicator.
inline bool onReverse(const NcclCall &c, int me) {
  if (c.kind == NcclCall::Kind::kSend)
    return c.peer < me; // this rank -> a lower group rank
  if (c.kind == NcclCall::Kind::kRecv)
    return c.peer > me; // a higher group rank -> this rank
  return false;
}

/// The NCCL calls of `r` (CommRequest's meaning per kind, runtime/comm/Communicator.h) on its
/// group, whose world-rank list is `ranks` (null: no such group), from world rank `worldRank`.
/// Run them between ncclGroupStart and ncclGroupEnd. Reductions (all-reduce, reduce-scatter)
/// use `r.dtype` (ncclTypeOf) and ncclSum, ncclMax for kMax, or ncclAvg for kMean on floating
/// types; the other kinds move bytes (ncclUint8). Send and recv ignore `r.tag` past its range
/// check: NCCL has no tags, so the messages between two ranks match in submission order. An
/// empty all-reduce gives no call. Errors (a message without the request's name): an unknown group,
/// this rank or the peer/root not a member, wrong operand counts, null buffers, a dtype NCCL cannot
/// reduce, mean of integers, sizes that are not whole elements, a send/recv to itself or a tag
/// outside [0, 32767].
inline Expected<std::vector<NcclCall>> planRequest(const CommRequest &r,
                                                   const std::vector<int> *ranks, int worldRank) {
  using Kind = NcclCall::Kind;
  if (!ranks)
    return Status::error("unknown group " + std::to_string(r.group) +
                         " (0 is the world; the plan's groups are 1..n)");
  const int me = groupRankOf(*ranks, worldRank);
  if (me < 0)
    return Status::error("this rank is not a member of group " + std::to_string(r.group) + " " +
                         rankList(*ranks));
  const size_t n = ranks->size();
  auto operands = [&](size_t nIn, size_t nOut) -> Status {
    if (r.inputs.size() != nIn || r.outputs.size() != nOut || r.bytes.size() != 1)
      return Status::error("takes " + std::to_string(nIn) + " input(s), " + std::to_string(nOut) +
                           " output(s) and 1 size; got " + std::to_string(r.inputs.size()) + ", " +
                           std::to_string(r.outputs.size()) + " and " +
                           std::to_string(r.bytes.size()));
    for (const void *p : r.inputs)
      if (!p && r.bytes[0] > 0)
        return Status::error("null input buffer");
    for (const void *p : r.outputs)
      if (!p && r.bytes[0] > 0)
        return Status::error("null output buffer");
    return Status::ok();
  };
  auto reduction = [&](NcclCall &c) -> Expected<NcclType> {
    std::optional<NcclType> t = ncclTypeOf(r.dtype);
    if (!t)
      return Status::error(std::string("unsupported element type ") + ir::dtypeName(r.dtype) +
                           ": NCCL reductions take f32, f64, f16, bf16, i32, i64, u8, i8");
    if (r.op == ReduceOp::kMean && !t->floating)
      return Status::error(std::string("mean of ") + t->name +
                           " is not supported (integer division): use sum");
    c.type = t->type;
    c.op = r.op == ReduceOp::kMean ? ncclAvg : r.op == ReduceOp::kMax ? ncclMax : ncclSum;
    return *t;
  };
  std::vector<NcclCall> calls;
  NcclCall c;
  switch (r.kind) {
  case CommKind::kAllReduce: {
    c.kind = Kind::kAllReduce;
    DTC_ASSIGN_OR_RETURN(NcclType t, reduction(c));
    DTC_ASSIGN_OR_RETURN(std::vector<ReduceSpan> spans, allReduceSpans(r, t.size));
    for (const ReduceSpan &s : spans) {
      c.send = s.in;
      c.recv = s.out;
      c.count = s.count;
      calls.push_back(c);
    }
    return calls;
  }
  case CommKind::kAllGather: {
    c.kind = Kind::kAllGather;
    DTC_RETURN_IF_ERROR(operands(1, 1));
    const auto *in = static_cast<const std::byte *>(r.inputs[0]);
    auto *out = static_cast<std::byte *>(r.outputs[0]);
    const size_t b = r.bytes[0];
    // In place only in NCCL's form (inputs[0] at this rank's block of outputs[0]); otherwise
    // the input must lie apart from the gathered output.
    if (b > 0 && in != out + static_cast<size_t>(me) * b && in < out + b * n && out < in + b)
      return Status::error("the input overlaps the output other than at this rank's block");
    c.send = in;
    c.recv = out;
    c.count = b;
    calls.push_back(c);
    return calls;
  }
  case CommKind::kReduceScatter: {
    c.kind = Kind::kReduceScatter;
    DTC_ASSIGN_OR_RETURN(NcclType t, reduction(c));
    DTC_RETURN_IF_ERROR(operands(1, 1));
    const size_t b = r.bytes[0];
    if (b % t.size != 0)
      return Status::error(std::to_string(b) + " bytes per rank, not a multiple of " +
                           std::to_string(t.size) + " (" + t.name + ")");
    c.send = r.inputs[0];
    c.recv = r.outputs[0];
    c.count = b / t.size;
    calls.push_back(c);
    return calls;
  }
  case CommKind::kBroadcast: {
    c.kind = Kind::kBroadcast;
    CommRequest copy; // inputs absent: in place
    const CommRequest *q = &r;
    if (r.inputs.empty()) {
      copy.inputs = {r.outputs.empty() ? nullptr : r.outputs[0]};
      copy.outputs = r.outputs;
      copy.bytes = r.bytes;
      q = &copy;
    }
    if (q->inputs.size() != 1 || q->outputs.size() != 1 || q->bytes.size() != 1)
      return Status::error("takes 1 input (or none: in place), 1 output and 1 size; got " +
                           std::to_string(r.inputs.size()) + ", " +
                           std::to_string(r.outputs.size()) + " and " +
                           std::to_string(r.bytes.size()));
    if (!q->outputs[0] && q->bytes[0] > 0)
      return Status::error("null output buffer");
    const int root = groupRankOf(*ranks, r.peer);
    if (root < 0)
      return Status::error("root rank " + std::to_string(r.peer) + " is not a member of group " +
                           std::to_string(r.group) + " " + rankList(*ranks));
    // Only the root reads its input; elsewhere NCCL ignores sendbuff.
    c.send = root == me && q->inputs[0] ? q->inputs[0] : q->outputs[0];
    c.recv = q->outputs[0];
    c.count = q->bytes[0];
    c.peer = root;
    calls.push_back(c);
    return calls;
  }
  case CommKind::kSend:
  case CommKind::kRecv: {
    const bool isSend = r.kind == CommKind::kSend;
    c.kind = isSend ? Kind::kSend : Kind::kRecv;
    DTC_RETURN_IF_ERROR(isSend ? operands(1, 0) : operands(0, 1));
    const int peer = groupRankOf(*ranks, r.peer);
    if (peer < 0)
      return Status::error("peer rank " + std::to_string(r.peer) + " is not a member of group " +
                           std::to_string(r.group) + " " + rankList(*ranks));
    if (peer == me)
      return Status::error("peer rank " + std::to_string(r.peer) + " is this rank");
    if (r.tag < 0 || r.tag > 32767)
      return Status::error("tag " + std::to_string(r.tag) + " is outside [0, 32767]");
    if (isSend)
      c.send = r.inputs[0];
    else
      c.recv = r.outputs[0];
    c.count = r.bytes[0];
    c.peer = peer;
    calls.push_back(c);
    return calls;
  }
  }
  return Status::error("unknown request kind");
}

} // namespace dtc::rt::nccl
