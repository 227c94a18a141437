// The pure part of the NCCL device communicator (runtime/cuda/NcclPlan.h): element types, the
// merging of all-reduce operands into spans, world -> group ranks and the NCCL calls of each
// request kind. Runs without a GPU (no CUDA call; the buffers are addresses only).
#include "runtime/cuda/NcclPlan.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <string>

namespace dtc::rt::nccl {
namespace {

/// A host block whose addresses stand for device buffers (never dereferenced).
struct Arena {
  alignas(256) std::byte bytes[1 << 16];
  std::byte *at(size_t offset) { return bytes + offset; }
};

CommRequest allReduce(ir::DType dtype, std::vector<const void *> in, std::vector<void *> out,
                      std::vector<size_t> bytes, ReduceOp op = ReduceOp::kSum) {
  CommRequest r;
  r.kind = CommKind::kAllReduce;
  r.name = "bucket 0";
  r.dtype = dtype;
  r.op = op;
  r.inputs = std::move(in);
  r.outputs = std::move(out);
  r.bytes = std::move(bytes);
  return r;
}

std::string errorOf(const Expected<std::vector<NcclCall>> &e) {
  return e ? std::string("(no error)") : e.status().message();
}

TEST(NcclPlan, ElementTypes) {
  struct Case {
    ir::DType dtype;
    ncclDataType_t type;
    bool floating;
  };
  const Case cases[] = {
      {ir::DType::kFloat32, ncclFloat32, true}, {ir::DType::kFloat64, ncclFloat64, true},
      {ir::DType::kFloat16, ncclFloat16, true}, {ir::DType::kBFloat16, ncclBfloat16, true},
      {ir::DType::kInt32, ncclInt32, false},    {ir::DType::kInt64, ncclInt64, false},
      {ir::DType::kUInt8, ncclUint8, false},    {ir::DType::kInt8, ncclInt8, false}};
  for (const Case &c : cases) {
    std::optional<NcclType> t = ncclTypeOf(c.dtype);
    ASSERT_TRUE(t.has_value()) << ir::dtypeName(c.dtype);
    EXPECT_EQ(t->type, c.type) << ir::dtypeName(c.dtype);
    EXPECT_EQ(static_cast<int64_t>(t->size), ir::dtypeSize(c.dtype)) << ir::dtypeName(c.dtype);
    EXPECT_EQ(t->floating, c.floating) << ir::dtypeName(c.dtype);
    EXPECT_STREQ(t->name, ir::dtypeName(c.dtype));
  }
  for (ir::DType t : {ir::DType::kBool, ir::DType::kInt16, ir::DType::kUInt16, ir::DType::kUInt32,
                      ir::DType::kUInt64, ir::DType::kString, ir::DType::kUndefined})
    EXPECT_FALSE(ncclTypeOf(t).has_value()) << ir::dtypeName(t);
}

TEST(NcclPlan, GroupRanks) {
  const std::vector<int> g = {2, 4, 6};
  EXPECT_EQ(groupRankOf(g, 2), 0);
  EXPECT_EQ(groupRankOf(g, 6), 2);
  EXPECT_EQ(groupRankOf(g, 3), -1);
  EXPECT_EQ(groupRankOf({}, 0), -1);
  EXPECT_EQ(rankList(g), "{2, 4, 6}");
  EXPECT_EQ(groupLabel(0, {"dp"}), "the world");
  EXPECT_EQ(groupLabel(1, {"dp", "", "pp"}), "group dp");
  EXPECT_EQ(groupLabel(2, {"dp", "", "pp"}), "group 2");
  EXPECT_EQ(groupLabel(3, {"dp", "", "pp"}), "group pp");
  EXPECT_EQ(groupLabel(4, {"dp"}), "group 4");
}

TEST(NcclPlan, InPlaceOperandsWithPaddingMergeIntoOneSpan) {
  Arena a;
  // Three f32 operands of 40, 100 and 8 bytes at 64-byte aligned offsets (gaps 24 and 28),
  // listed out of address order.
  CommRequest r = allReduce(ir::DType::kFloat32, {a.at(192), a.at(0), a.at(64)},
                            {a.at(192), a.at(0), a.at(64)}, {8, 40, 100});
  auto spans = allReduceSpans(r, 4);
  ASSERT_TRUE(spans) << spans.status().message();
  ASSERT_EQ(spans->size(), 1u);
  EXPECT_EQ((*spans)[0].out, a.at(0));
  EXPECT_EQ((*spans)[0].in, a.at(0));
  EXPECT_EQ((*spans)[0].count, 200u / 4); // through the end of the operand at 192
}

TEST(NcclPlan, GapsOf64BytesOrPartialElementsSplit) {
  Arena a;
  // f32: gap of exactly 64 bytes splits; f64: a 4-byte gap (not whole elements) splits.
  CommRequest r =
      allReduce(ir::DType::kFloat32, {a.at(0), a.at(128)}, {a.at(0), a.at(128)}, {64, 64});
  auto spans = allReduceSpans(r, 4);
  ASSERT_TRUE(spans);
  ASSERT_EQ(spans->size(), 2u);
  EXPECT_EQ((*spans)[0].count, 16u);
  EXPECT_EQ((*spans)[1].out, a.at(128));
  CommRequest d =
      allReduce(ir::DType::kFloat64, {a.at(0), a.at(20)}, {a.at(0), a.at(20)}, {16, 16});
  auto ds = allReduceSpans(d, 8);
  ASSERT_TRUE(ds);
  EXPECT_EQ(ds->size(), 2u);
  // A 63-byte gap of f32 is not whole elements either; a 60-byte one is.
  CommRequest g60 =
      allReduce(ir::DType::kFloat32, {a.at(0), a.at(64)}, {a.at(0), a.at(64)}, {4, 4});
  auto s60 = allReduceSpans(g60, 4);
  ASSERT_TRUE(s60);
  ASSERT_EQ(s60->size(), 1u);
  EXPECT_EQ((*s60)[0].count, 17u);
}

TEST(NcclPlan, OutOfPlaceOperandsMergeOnlyWithTheSameLayout) {
  Arena a;
  // Inputs at +4096 from their outputs: one span reading from the input block.
  CommRequest same =
      allReduce(ir::DType::kFloat32, {a.at(4096), a.at(4096 + 64)}, {a.at(0), a.at(64)}, {64, 32});
  auto s = allReduceSpans(same, 4);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].in, a.at(4096));
  EXPECT_EQ((*s)[0].out, a.at(0));
  EXPECT_EQ((*s)[0].count, 24u);
  // Inputs not at the same offsets, or one in place and one not: separate spans.
  CommRequest other =
      allReduce(ir::DType::kFloat32, {a.at(4096), a.at(8192)}, {a.at(0), a.at(64)}, {64, 32});
  auto o = allReduceSpans(other, 4);
  ASSERT_TRUE(o);
  ASSERT_EQ(o->size(), 2u);
  EXPECT_EQ((*o)[1].in, a.at(8192));
  EXPECT_EQ((*o)[1].count, 8u);
  CommRequest mixed =
      allReduce(ir::DType::kFloat32, {a.at(0), a.at(4096 + 64)}, {a.at(0), a.at(64)}, {64, 32});
  auto m = allReduceSpans(mixed, 4);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->size(), 2u);
  // Same offsets but the merged input span would overlap the merged output span: split.
  CommRequest close =
      allReduce(ir::DType::kFloat32, {a.at(64), a.at(128)}, {a.at(0), a.at(64)}, {64, 64});
  auto c = allReduceSpans(close, 4);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->size(), 2u);
  EXPECT_EQ((*c)[1].in, a.at(128));
  EXPECT_EQ((*c)[1].out, a.at(64));
}

TEST(NcclPlan, AllReduceOperandErrors) {
  Arena a;
  auto msg = [](const CommRequest &r, size_t elem) {
    auto s = allReduceSpans(r, elem);
    return s ? std::string("(no error)") : s.status().message();
  };
  EXPECT_NE(msg(allReduce(ir::DType::kFloat32, {a.at(0)}, {a.at(0), a.at(64)}, {4, 4}), 4)
                .find("differ in length"),
            std::string::npos);
  EXPECT_NE(msg(allReduce(ir::DType::kFloat32, {a.at(0)}, {a.at(0)}, {6}), 4)
                .find("operand 0 has 6 bytes, not a multiple of 4"),
            std::string::npos);
  EXPECT_NE(msg(allReduce(ir::DType::kFloat32, {nullptr}, {a.at(0)}, {8}), 4).find("null buffer"),
            std::string::npos);
  EXPECT_NE(
      msg(allReduce(ir::DType::kFloat32, {a.at(4)}, {a.at(0)}, {16}), 4).find("partly overlaps"),
      std::string::npos);
  EXPECT_NE(msg(allReduce(ir::DType::kFloat32, {a.at(0), a.at(8)}, {a.at(0), a.at(8)}, {16, 16}), 4)
                .find("outputs of two operands overlap"),
            std::string::npos);
  // Zero-byte operands (even null) are dropped; nothing left: no span.
  auto none = allReduceSpans(
      allReduce(ir::DType::kFloat32, {nullptr, a.at(0)}, {nullptr, a.at(0)}, {0, 0}), 4);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST(NcclPlan, AllReduceCalls) {
  Arena a;
  const std::vector<int> world = {0, 1};
  CommRequest r = allReduce(ir::DType::kBFloat16, {a.at(0), a.at(512)}, {a.at(0), a.at(512)},
                            {64, 2}, ReduceOp::kMean);
  auto calls = planRequest(r, &world, 1);
  ASSERT_TRUE(calls) << errorOf(calls);
  ASSERT_EQ(calls->size(), 2u);
  for (const NcclCall &c : *calls) {
    EXPECT_EQ(c.kind, NcclCall::Kind::kAllReduce);
    EXPECT_EQ(c.type, ncclBfloat16);
    EXPECT_EQ(c.op, ncclAvg);
  }
  EXPECT_EQ((*calls)[0].count, 32u);
  EXPECT_EQ((*calls)[1].count, 1u);
  r.dtype = ir::DType::kInt64;
  EXPECT_NE(errorOf(planRequest(r, &world, 1)).find("mean of i64 is not supported"),
            std::string::npos);
  r.op = ReduceOp::kSum;
  r.bytes = {64, 8};
  calls = planRequest(r, &world, 1);
  ASSERT_TRUE(calls) << errorOf(calls);
  EXPECT_EQ((*calls)[0].op, ncclSum);
  EXPECT_EQ((*calls)[0].type, ncclInt64);
  r.op = ReduceOp::kMax; // vocabulary-parallel cross-entropy's global max; integers too
  calls = planRequest(r, &world, 1);
  ASSERT_TRUE(calls) << errorOf(calls);
  EXPECT_EQ((*calls)[0].op, ncclMax);
  EXPECT_EQ((*calls)[0].type, ncclInt64);
  r.dtype = ir::DType::kBool;
  EXPECT_NE(errorOf(planRequest(r, &world, 1)).find("unsupported element type bool"),
            std::string::npos);
}

TEST(NcclPlan, GroupMembership) {
  Arena a;
  const std::vector<int> g = {1, 3};
  CommRequest r = allReduce(ir::DType::kFloat32, {a.at(0)}, {a.at(0)}, {4});
  r.group = 2;
  EXPECT_NE(errorOf(planRequest(r, nullptr, 0)).find("unknown group 2"), std::string::npos);
  EXPECT_NE(errorOf(planRequest(r, &g, 0)).find("this rank is not a member of group 2 {1, 3}"),
            std::string::npos);
  EXPECT_TRUE(planRequest(r, &g, 3));
}

TEST(NcclPlan, AllGatherAndReduceScatter) {
  Arena a;
  const std::vector<int> g = {5, 2, 7}; // world rank 2 is group rank 1
  CommRequest r;
  r.kind = CommKind::kAllGather;
  r.dtype = ir::DType::kBool; // bytes move whatever the type
  r.inputs = {a.at(1000)};
  r.outputs = {a.at(0)};
  r.bytes = {100};
  auto c = planRequest(r, &g, 2);
  ASSERT_TRUE(c) << errorOf(c);
  ASSERT_EQ(c->size(), 1u);
  EXPECT_EQ((*c)[0].kind, NcclCall::Kind::kAllGather);
  EXPECT_EQ((*c)[0].count, 100u);
  EXPECT_EQ((*c)[0].type, ncclUint8);
  r.inputs = {a.at(100)}; // in place: this rank's block
  EXPECT_TRUE(planRequest(r, &g, 2)) << errorOf(planRequest(r, &g, 2));
  r.inputs = {a.at(150)}; // inside the output, not at this rank's block
  EXPECT_NE(errorOf(planRequest(r, &g, 2)).find("overlaps the output"), std::string::npos);
  r.inputs = {};
  EXPECT_NE(errorOf(planRequest(r, &g, 2)).find("takes 1 input(s), 1 output(s) and 1 size"),
            std::string::npos);

  CommRequest s;
  s.kind = CommKind::kReduceScatter;
  s.dtype = ir::DType::kFloat16;
  s.op = ReduceOp::kMean;
  s.inputs = {a.at(0)};
  s.outputs = {a.at(4096)};
  s.bytes = {64};
  c = planRequest(s, &g, 7);
  ASSERT_TRUE(c) << errorOf(c);
  EXPECT_EQ((*c)[0].kind, NcclCall::Kind::kReduceScatter);
  EXPECT_EQ((*c)[0].count, 32u);
  EXPECT_EQ((*c)[0].type, ncclFloat16);
  EXPECT_EQ((*c)[0].op, ncclAvg);
  s.bytes = {63};
  EXPECT_NE(errorOf(planRequest(s, &g, 7)).find("63 bytes per rank, not a multiple of 2 (f16)"),
            std::string::npos);
}

TEST(NcclPlan, BroadcastRootIsAGroupRank) {
  Arena a;
  const std::vector<int> g = {2, 4, 6};
  CommRequest r;
  r.kind = CommKind::kBroadcast;
  r.peer = 4;
  r.inputs = {a.at(512)};
  r.outputs = {a.at(0)};
  r.bytes = {40};
  auto root = planRequest(r, &g, 4);
  ASSERT_TRUE(root) << errorOf(root);
  EXPECT_EQ((*root)[0].peer, 1);
  EXPECT_EQ((*root)[0].send, a.at(512)); // the root reads its input
  EXPECT_EQ((*root)[0].recv, a.at(0));
  EXPECT_EQ((*root)[0].count, 40u);
  auto other = planRequest(r, &g, 6);
  ASSERT_TRUE(other);
  EXPECT_EQ((*other)[0].send, a.at(0)); // ignored by NCCL off the root
  r.inputs = {};                        // in place
  root = planRequest(r, &g, 4);
  ASSERT_TRUE(root) << errorOf(root);
  EXPECT_EQ((*root)[0].send, a.at(0));
  r.peer = 3;
  EXPECT_NE(errorOf(planRequest(r, &g, 4)).find("root rank 3 is not a member of group 0"),
            std::string::npos);
}

TEST(NcclPlan, SendRecvPeersAreGroupRanks) {
  Arena a;
  const std::vector<int> g = {3, 1}; // a pipeline group listed out of world order
  CommRequest s;
  s.kind = CommKind::kSend;
  s.peer = 1;
  s.tag = 7;
  s.inputs = {a.at(0)};
  s.bytes = {12};
  auto c = planRequest(s, &g, 3);
  ASSERT_TRUE(c) << errorOf(c);
  EXPECT_EQ((*c)[0].kind, NcclCall::Kind::kSend);
  EXPECT_EQ((*c)[0].peer, 1);
  EXPECT_EQ((*c)[0].count, 12u);
  CommRequest r;
  r.kind = CommKind::kRecv;
  r.peer = 3;
  r.outputs = {a.at(64)};
  r.bytes = {12};
  c = planRequest(r, &g, 1);
  ASSERT_TRUE(c) << errorOf(c);
  EXPECT_EQ((*c)[0].kind, NcclCall::Kind::kRecv);
  EXPECT_EQ((*c)[0].peer, 0);
  EXPECT_EQ((*c)[0].recv, a.at(64));
  r.peer = 1;
  EXPECT_NE(errorOf(planRequest(r, &g, 1)).find("peer rank 1 is this rank"), std::string::npos);
  r.peer = 2;
  EXPECT_NE(errorOf(planRequest(r, &g, 1)).find("peer rank 2 is not a member"), std::string::npos);
  s.tag = 40000;
  EXPECT_NE(errorOf(planRequest(s, &g, 3)).find("tag 40000 is outside [0, 32767]"),
            std::string::npos);
  s.tag = 0;
  s.outputs = {a.at(0)};
  EXPECT_NE(errorOf(planRequest(s, &g, 3)).find("takes 1 input(s), 0 output(s)"),
            std::string::npos);
}

TEST(NcclPlan, PointToPointDirection) {
  NcclCall send, recv, all;
  send.kind = NcclCall::Kind::kSend;
  recv.kind = NcclCall::Kind::kRecv;
  send.peer = recv.peer = all.peer = 2;
  // Group rank 1: to / from group rank 2 is "up" (the group's communicator), ...
  EXPECT_FALSE(onReverse(send, 1));
  EXPECT_TRUE(onReverse(recv, 1));
  // ... group rank 3: sending down, receiving from below.
  EXPECT_TRUE(onReverse(send, 3));
  EXPECT_FALSE(onReverse(recv, 3));
  // Both ends of one message agree: rank 1 -> 2 is up on both, 3 -> 2 down on both.
  NcclCall recvFrom1 = recv, recvFrom3 = recv;
  recvFrom1.peer = 1;
  recvFrom3.peer = 3;
  EXPECT_EQ(onReverse(send, 1), onReverse(recvFrom1, 2));
  EXPECT_EQ(onReverse(send, 3), onReverse(recvFrom3, 2));
  all.kind = NcclCall::Kind::kBroadcast; // collectives stay on the group's communicator
  EXPECT_FALSE(onReverse(all, 3));
}

} // namespace
} // namespace dtc::rt::nccl
