// Every validation error of the plan library (compiler/plan/Plan.h: validatePlan) on the small
// hand-built plan of PlanTestUtil.h, each field broken in turn.
#include "compiler/plan/Plan.h"
#include "runtime/Executor.h"
#include "tests/unit/plan/PlanTestUtil.h"
#include "tests/unit/plan/TempDirTest.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace dtc::plan {
namespace {

using test::addBuffer;
using test::addSecondDpRank;
using test::floatBytes;
using test::kAbcSha;
using test::kAbcXxh;
using test::makePlan;
namespace fs = std::filesystem;

std::string validate(const Plan &plan, const KernelCheck &check = {}) {
  return validatePlan(plan, "t.dtc", check).message();
}

// --- validation ---

TEST(ValidateTest, GoodPlanPasses) {
  EXPECT_TRUE(validatePlan(makePlan(), "t.dtc").isOk()) << validate(makePlan());
  int calls = 0;
  KernelCheck count = [&](const RankProgram &r, const KernelCall &k) {
    EXPECT_EQ(r.ranks(0), 0);
    EXPECT_EQ(k.op(), "Gemm");
    ++calls;
    return Status::ok();
  };
  EXPECT_TRUE(validatePlan(makePlan(), "t.dtc", count).isOk());
  EXPECT_EQ(calls, 1);
}

TEST(ValidateTest, KernelCheckErrorIsPropagated) {
  KernelCheck reject = [](const RankProgram &, const KernelCall &k) {
    return Status::error("node '" + k.node() + "' (Gemm)", "needs 2 or 3 inputs, got 7");
  };
  EXPECT_EQ(
      validate(makePlan(), reject),
      "plan t.dtc: program 0: instruction 0: node '/fc/Gemm' (Gemm): needs 2 or 3 inputs, got 7");
}

TEST(ValidateTest, PlanLevelErrors) {
  Plan p = makePlan();
  p.set_format_version(1);
  EXPECT_EQ(validate(p), "plan t.dtc: plan format version 1, this dtc reads version 3");
  p = makePlan();
  p.set_mode(MODE_UNSPECIFIED);
  EXPECT_EQ(validate(p), "plan t.dtc: mode 0 is not inference (1) or training (2)");
  p = makePlan();
  p.mutable_model()->set_checksum("ABC");
  EXPECT_EQ(validate(p), "plan t.dtc: model checksum 'ABC' is not 32 lowercase hex digits");
  p.mutable_model()->set_checksum(kAbcSha); // a SHA-256 is not an XXH3-128
  EXPECT_EQ(validate(p), "plan t.dtc: model checksum '" + std::string(kAbcSha) +
                             "' is not 32 lowercase hex digits");
  p = makePlan();
  p.mutable_model()->set_checksum_algorithm(static_cast<ChecksumAlgorithm>(7));
  EXPECT_EQ(validate(p), "plan t.dtc: model checksum: algorithm algorithm(7) is not one this "
                         "dtc knows (xxh3-128, xxh3-128-chunked); recompile the plan");
  p.mutable_model()->set_checksum_algorithm(CHECKSUM_UNSPECIFIED);
  EXPECT_EQ(validate(p), "plan t.dtc: model checksum: algorithm none is not one this dtc knows "
                         "(xxh3-128, xxh3-128-chunked); recompile the plan");
  p.mutable_model()->clear_checksum(); // no checksum at all: a plan that reads no parameters
  EXPECT_TRUE(validatePlan(p, "t.dtc").isOk()) << validate(p);
  p = makePlan();
  (*p.mutable_bound_dims())["N"] = -1;
  EXPECT_EQ(validate(p), "plan t.dtc: bound dim 'N' is -1, below 0");
}

TEST(ValidateTest, WorldSize) {
  for (int32_t w : {0, -3, 65537}) {
    Plan p = makePlan();
    p.set_world_size(w);
    EXPECT_EQ(validate(p), "plan t.dtc: world size " + std::to_string(w) + " is not in [1, 65536]");
  }
  Plan p = makePlan();
  p.set_world_size(2);
  EXPECT_EQ(validate(p), "plan t.dtc: world size is 2, but the plan has 1 ranks");
  p = makePlan();
  p.mutable_ranks(0)->set_rank(1);
  EXPECT_EQ(validate(p), "plan t.dtc: rank 0: entry is for rank 1");
  p = makePlan();
  p.mutable_ranks(0)->set_program(1);
  EXPECT_EQ(validate(p), "plan t.dtc: rank 0: program 1 is not in [0, 1)");
  p = makePlan();
  *p.add_programs() = p.programs(0);
  EXPECT_EQ(validate(p), "plan t.dtc: the plan has 2 programs for 1 ranks");
}

TEST(ValidateTest, Groups) {
  Plan p = makePlan();
  CommGroup *g = p.add_groups();
  g->set_axis("dp");
  g->add_ranks(0);
  g->add_ranks(1);
  EXPECT_EQ(validate(p), "plan t.dtc: group 0 'dp': rank 1 is not in [0, 1)");
  g->set_ranks(1, -1);
  EXPECT_EQ(validate(p), "plan t.dtc: group 0 'dp': rank -1 is not in [0, 1)");
  g->set_ranks(1, 0);
  EXPECT_EQ(validate(p), "plan t.dtc: group 0 'dp': rank 0 appears twice");
  g->clear_ranks();
  EXPECT_EQ(validate(p), "plan t.dtc: group 0 'dp': has no ranks");
}

TEST(ValidateTest, RankSettings) {
  for (uint64_t a : {0ull, 48ull}) {
    Plan p = makePlan();
    p.mutable_programs(0)->set_alignment(a);
    EXPECT_EQ(validate(p),
              "plan t.dtc: program 0: alignment " + std::to_string(a) + " is not a power of two");
  }
  Plan p = makePlan();
  p.mutable_programs(0)->set_arena_bytes((1ull << 40) + 1);
  EXPECT_EQ(validate(p),
            "plan t.dtc: program 0: arena of 1099511627777 bytes is above the limit of "
            "1099511627776 bytes (1 TiB)");
  p = makePlan();
  p.mutable_ranks(0)->mutable_device()->set_type(DEVICE_UNSPECIFIED);
  EXPECT_EQ(validate(p), "plan t.dtc: rank 0: device type 0 is not cpu or cuda");
}

TEST(ValidateTest, MixedDeviceTypes) {
  // Two ranks on one program, rank 1 on a GPU: the runtime would check rank 0's CPU kernels
  // against the CUDA target and bootstrap NCCL on rank 1 only.
  Plan p = makePlan();
  p.set_world_size(2);
  p.mutable_programs(0)->add_ranks(1);
  RankInfo *ri = p.add_ranks();
  ri->set_rank(1);
  ri->mutable_device()->set_type(DEVICE_CUDA);
  EXPECT_EQ(validate(p), "plan t.dtc: rank 1: runs on a cuda device but rank 0 on a cpu one: all "
                         "ranks of a plan use one device type");
  ri->mutable_device()->set_type(DEVICE_CPU);
  p.mutable_ranks(0)->mutable_device()->set_type(DEVICE_CUDA);
  EXPECT_EQ(validate(p), "plan t.dtc: rank 1: runs on a cpu device but rank 0 on a cuda one: all "
                         "ranks of a plan use one device type");
  p.mutable_ranks(0)->mutable_device()->set_type(DEVICE_CPU);
  EXPECT_EQ(validate(p), "");
}

TEST(ValidateTest, BufferPastArena) {
  Plan p = makePlan();
  p.mutable_programs(0)->mutable_buffers(4)->set_offset(320);
  EXPECT_EQ(validate(p),
            "plan t.dtc: program 0: buffer %4 'y': ends at byte 344, past the arena (320 bytes)");
}

TEST(ValidateTest, MisalignedOffset) {
  Plan p = makePlan();
  p.mutable_programs(0)->mutable_buffers(3)->set_offset(200);
  EXPECT_EQ(validate(p),
            "plan t.dtc: program 0: buffer %3 '/fc/Gemm_output_0': offset 200 is not a "
            "multiple of the alignment (64)");
}

TEST(ValidateTest, OffsetPlusSizeOverflow) {
  Plan p = makePlan();
  const uint64_t off = std::numeric_limits<uint64_t>::max() - 63; // a multiple of 64
  Buffer *b = p.mutable_programs(0)->mutable_buffers(3);
  b->set_shape(1, 32);
  b->set_size_bytes(256);
  b->set_offset(off);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: buffer %3 '/fc/Gemm_output_0': offset " +
                             std::to_string(off) + " + size 256 overflows");
}

TEST(ValidateTest, ShapeProductOverflow) {
  Plan p = makePlan();
  Buffer *b = p.mutable_programs(0)->mutable_buffers(3);
  b->set_shape(0, int64_t{1} << 40);
  b->set_shape(1, int64_t{1} << 40);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: buffer %3 '/fc/Gemm_output_0': element count "
                         "overflows (dim 1 is 1099511627776)");
  // Elements fit, bytes do not.
  b->set_shape(0, int64_t{1} << 62);
  b->set_shape(1, 1);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: buffer %3 '/fc/Gemm_output_0': size in bytes "
                         "overflows (4611686018427387904 elements of 4 bytes)");
}

TEST(ValidateTest, SizeMismatchNegativeDimAndDTypes) {
  Plan p = makePlan();
  p.mutable_programs(0)->mutable_buffers(3)->set_size_bytes(28);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: buffer %3 '/fc/Gemm_output_0': size_bytes is 28, "
                         "but 6 elements of 4 bytes take 24");
  p = makePlan();
  p.mutable_programs(0)->mutable_buffers(3)->set_shape(1, -3);
  EXPECT_EQ(validate(p),
            "plan t.dtc: program 0: buffer %3 '/fc/Gemm_output_0': dim 1 is -3, below 0");
  p = makePlan();
  p.mutable_programs(0)->mutable_buffers(0)->set_dtype(14); // complex64: not a dtc dtype
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: buffer %0 'x': unknown dtype 14");
  p.mutable_programs(0)->mutable_buffers(0)->set_dtype(8);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: buffer %0 'x': dtype string has no fixed element "
                         "size");
}

TEST(ValidateTest, BufferKinds) {
  Plan p = makePlan();
  p.mutable_programs(0)->mutable_buffers(2)->set_data(floatBytes({1, 2}));
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: buffer %2 'b': constant carries 8 bytes of data, "
                         "but its size is 12 bytes");
  p = makePlan();
  p.mutable_programs(0)->mutable_buffers(1)->clear_source();
  EXPECT_EQ(validate(p),
            "plan t.dtc: program 0: buffer %1 'w': parameter without a source (initializer name)");
  p = makePlan();
  p.mutable_programs(0)->mutable_buffers(3)->set_data("x");
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: buffer %3 '/fc/Gemm_output_0': data on a buffer "
                         "that is not a constant");
  p = makePlan();
  p.mutable_programs(0)->mutable_buffers(3)->set_kind(static_cast<BufferKind>(99));
  EXPECT_EQ(validate(p),
            "plan t.dtc: program 0: buffer %3 '/fc/Gemm_output_0': unknown buffer kind 99");
}

TEST(ValidateTest, OperandOutOfRange) {
  Plan p = makePlan();
  p.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->set_inputs(2, 99);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: instruction 0 (Gemm, node '/fc/Gemm'): input 2 is "
                         "buffer 99, but the program has 5 buffers");
  p.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->set_inputs(2, -2);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: instruction 0 (Gemm, node '/fc/Gemm'): input 2 is "
                         "buffer -2, but the program has 5 buffers");
  // -1 is an omitted optional input.
  p.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->set_inputs(2, -1);
  EXPECT_TRUE(validatePlan(p, "t.dtc").isOk());
  p.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->set_outputs(0, 5);
  EXPECT_EQ(validate(p),
            "plan t.dtc: program 0: instruction 0 (Gemm, node '/fc/Gemm'): output 0 is "
            "buffer 5, but the program has 5 buffers");
}

TEST(ValidateTest, OmittedOutput) {
  Plan p = makePlan();
  p.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->set_outputs(0, -1);
  EXPECT_EQ(validate(p),
            "plan t.dtc: program 0: instruction 0 (Gemm, node '/fc/Gemm'): output 0 is "
            "-1 (only optional inputs may be omitted)");
}

TEST(ValidateTest, BadInstructions) {
  Plan p = makePlan();
  p.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->clear_op();
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: instruction 0: kernel call without an op");
  p = makePlan();
  p.mutable_programs(0)->add_instructions();
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: instruction 2: empty instruction");
  p = makePlan();
  Attr *a = p.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->add_attributes();
  a->set_name("alpha");
  a->set_f(2);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: instruction 0 (Gemm, node '/fc/Gemm'): attribute "
                         "'alpha' appears twice");
  a->set_name("value");
  a->mutable_t()->set_dtype(1);
  a->mutable_t()->add_shape(2);
  a->mutable_t()->set_data("abc");
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: instruction 0 (Gemm, node '/fc/Gemm'): attribute "
                         "'value': tensor carries 3 bytes of data, but its shape needs 2 "
                         "elements of 4 bytes");
}

TEST(ValidateTest, CopySizes) {
  Plan p = makePlan();
  p.mutable_programs(0)->mutable_instructions(1)->mutable_copy()->set_dst(2);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: instruction 1 (copy): copies buffer %3 (24 bytes) "
                         "into buffer %2 (12 bytes): sizes differ");
  p.mutable_programs(0)->mutable_instructions(1)->mutable_copy()->set_dst(7);
  EXPECT_EQ(validate(p),
            "plan t.dtc: program 0: instruction 1 (copy): destination is buffer 7, but "
            "the program has 5 buffers");
  p.mutable_programs(0)->mutable_instructions(1)->mutable_copy()->set_src(-1);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: instruction 1 (copy): source is buffer -1, but "
                         "the program has 5 buffers");
}

TEST(ValidateTest, Bindings) {
  Plan p = makePlan();
  p.mutable_programs(0)->mutable_inputs(0)->set_buffer(5);
  EXPECT_EQ(validate(p),
            "plan t.dtc: program 0: input binding 'x': is buffer 5, but the program has 5 buffers");
  p.mutable_programs(0)->mutable_inputs(0)->set_buffer(3);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: input binding 'x': is buffer %3 "
                         "'/fc/Gemm_output_0', which is not an input buffer");
  p = makePlan();
  p.mutable_programs(0)->mutable_outputs(0)->set_buffer(-1);
  EXPECT_EQ(
      validate(p),
      "plan t.dtc: program 0: output binding 'y': is buffer -1, but the program has 5 buffers");
  // Outputs may name any buffer, but not twice.
  p.mutable_programs(0)->mutable_outputs(0)->set_buffer(3);
  EXPECT_TRUE(validatePlan(p, "t.dtc").isOk());
  *p.mutable_programs(0)->add_outputs() = p.programs(0).outputs(0);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: output binding 'y': name appears twice");
}

TEST(ValidateTest, DataBindings) {
  Plan p = makePlan();
  p.mutable_programs(0)->mutable_data_bindings(0)->set_input("label");
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: data binding 'x' -> 'label': the program has no "
                         "graph input named 'label'");
  p = makePlan();
  *p.mutable_programs(0)->add_data_bindings() = p.programs(0).data_bindings(0);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: data binding 'x' -> 'x': input 'x' is fed twice");
  p = makePlan();
  p.mutable_programs(0)->mutable_data_bindings(0)->set_shard_axis(-2);
  EXPECT_EQ(validate(p),
            "plan t.dtc: program 0: data binding 'x' -> 'x': shard axis -2 is below -1");
}

TEST(ValidateTest, MessagesStayOnOneLine) {
  Plan p = makePlan();
  p.mutable_programs(0)->mutable_buffers(4)->set_name("y\nz");
  p.mutable_programs(0)->mutable_buffers(4)->set_offset(320);
  EXPECT_EQ(
      validate(p),
      "plan t.dtc: program 0: buffer %4 'y\\x0az': ends at byte 344, past the arena (320 bytes)");
}

TEST(ValidateTest, CollectivesAndRanks) {
  // Two ranks of one dp group; program 0 gets an all-reduce of %3 into itself, waited for.
  auto withCollective = [](CollectiveKind kind) {
    Plan p = makePlan();
    addSecondDpRank(p);
    RankProgram *r = p.mutable_programs(0);
    Collective *c = r->add_instructions()->mutable_collective();
    c->set_kind(kind);
    c->set_op(REDUCE_MEAN);
    c->set_group("dp");
    c->set_name("t");
    if (kind != COLLECTIVE_RECV)
      c->add_inputs(3);
    if (kind != COLLECTIVE_SEND)
      c->add_outputs(3);
    c->set_peer(1);
    const int at = r->instructions_size() - 1;
    r->add_instructions()->mutable_wait()->set_collective(at);
    return p;
  };
  const std::string at = "plan t.dtc: rank 0: instruction 2 (collective 't'): ";
  Plan p = withCollective(COLLECTIVE_ALL_REDUCE);
  EXPECT_TRUE(validatePlan(p, "t.dtc").isOk()) << validate(p);
  p.mutable_programs(0)->mutable_instructions(2)->mutable_collective()->set_group("tp");
  EXPECT_EQ(validate(p), at + "the rank has no tp group");
  p.mutable_programs(0)->mutable_instructions(2)->mutable_collective()->set_group("xy");
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: instruction 2 (collective 't'): group axis 'xy' "
                         "is not dp, pp or tp");
  // Point-to-point: the peer is another rank of the group; rank 1 sending to peer 1 is itself.
  p = withCollective(COLLECTIVE_SEND);
  EXPECT_EQ(validate(p), "plan t.dtc: rank 1: instruction 2 (collective 't'): peer 1 is not "
                         "another rank of its dp group of 2");
  p.mutable_programs(0)->mutable_instructions(2)->mutable_collective()->set_peer(5);
  EXPECT_EQ(validate(p), at + "peer 5 is not another rank of its dp group of 2");
  p.mutable_programs(0)->mutable_instructions(2)->mutable_collective()->set_tag(-1);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: instruction 2 (collective 't'): tag -1 is not in "
                         "[0, 32767]");
  p = withCollective(COLLECTIVE_RECV);
  p.mutable_programs(0)->mutable_instructions(2)->mutable_collective()->add_inputs(3);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: instruction 2 (collective 't'): a receive needs "
                         "one output and no input");
  // An all-gather's output holds the group's inputs: 2 x 24 bytes, not 24.
  p = withCollective(COLLECTIVE_ALL_GATHER);
  EXPECT_EQ(validate(p), at + "operand sizes 24 -> 24 bytes do not fit a group of 2");
  p = withCollective(COLLECTIVE_ALL_REDUCE);
  p.mutable_programs(0)->mutable_instructions(2)->mutable_collective()->set_kind(
      static_cast<CollectiveKind>(9));
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: instruction 2 (collective 't'): unknown "
                         "collective kind 9");
  // The rank table: group membership and mesh coordinates.
  p = withCollective(COLLECTIVE_ALL_REDUCE);
  p.mutable_ranks(1)->set_groups(0, 3);
  EXPECT_EQ(validate(p), "plan t.dtc: rank 1: group id 3 is not in [0, 1)");
  p = withCollective(COLLECTIVE_ALL_REDUCE);
  p.mutable_groups(0)->set_ranks(1, 0);
  EXPECT_EQ(validate(p), "plan t.dtc: group 0 'dp': rank 0 appears twice");
  p = withCollective(COLLECTIVE_ALL_REDUCE);
  p.mutable_mesh()->set_dp(2);
  p.mutable_mesh()->set_pp(1);
  p.mutable_mesh()->set_tp(1);
  EXPECT_EQ(validate(p), "plan t.dtc: rank 1: mesh coordinates (dp 0, pp 0, tp 0) are not this "
                         "rank's");
  p.mutable_ranks(1)->set_dp(1);
  EXPECT_TRUE(validatePlan(p, "t.dtc").isOk()) << validate(p);
  p.mutable_mesh()->set_pp(2);
  EXPECT_EQ(validate(p), "plan t.dtc: mesh dp=2,pp=2,tp=1 does not have the world size 2");
}

TEST(ValidateTest, ExternalDataStaysInTheModelFolder) {
  Plan p = makePlan();
  ExternalFile *x = p.mutable_model()->add_external_data();
  x->set_location("weights.bin");
  x->set_checksum(kAbcXxh);
  x->set_checksum_algorithm(CHECKSUM_XXH3_128);
  EXPECT_TRUE(validatePlan(p, "t.dtc").isOk()) << validate(p);
  for (const char *bad : {"../weights.bin", "/etc/shadow", "", "a/../../b"}) {
    x->set_location(bad);
    EXPECT_EQ(validate(p), std::string("plan t.dtc: external data location '") + bad +
                               "' is not a path inside the model's folder");
  }
  x->set_location("weights.bin");
  x->set_checksum("xyz");
  EXPECT_EQ(validate(p), "plan t.dtc: external data 'weights.bin' checksum 'xyz' is not 32 "
                         "lowercase hex digits");
  x->set_checksum(kAbcXxh);
  x->clear_checksum_algorithm(); // unlike the model's, an external file's checksum is required
  EXPECT_EQ(validate(p), "plan t.dtc: external data 'weights.bin' checksum: algorithm none is not "
                         "one this dtc knows (xxh3-128, xxh3-128-chunked); recompile the plan");
}

TEST(ShareConstantsTest, EqualLargeConstantsAreStoredOnce) {
  Plan plan = makePlan();
  RankProgram *r = plan.mutable_programs(0);
  const std::string big(kMinSharedConstantBytes, '\x07');
  std::string other = big;
  other.back() = '\x08'; // same size, same bytes but the last
  addBuffer(r, "c1", BUFFER_CONSTANT, 2, {1024}, 0, 1024)->set_data(big);
  addBuffer(r, "c2", BUFFER_CONSTANT, 2, {1024}, 0, 1024)->set_data(other);
  addBuffer(r, "c3", BUFFER_CONSTANT, 2, {1024}, 0, 1024)->set_data(big);
  RankProgram *second = plan.add_programs();
  addBuffer(second, "c4", BUFFER_CONSTANT, 2, {1024}, 0, 1024)->set_data(big);
  const std::string before = planText(plan);
  const std::string fingerprintBefore = fingerprint(plan);
  shareConstants(plan);
  ASSERT_EQ(plan.constants_size(), 2);
  EXPECT_EQ(plan.constants(0), big);
  EXPECT_EQ(plan.constants(1), other);
  const RankProgram &p0 = plan.programs(0);
  EXPECT_EQ(p0.buffers(2).shared_data(), 0u); // the 12-byte bias stays inline
  EXPECT_EQ(p0.buffers(2).data().size(), 12u);
  EXPECT_EQ(p0.buffers(5).shared_data(), 1u);
  EXPECT_EQ(p0.buffers(6).shared_data(), 2u);
  EXPECT_EQ(p0.buffers(7).shared_data(), 1u);
  EXPECT_EQ(plan.programs(1).buffers(0).shared_data(), 1u);
  for (const Buffer &b : p0.buffers())
    if (b.shared_data() != 0) {
      EXPECT_TRUE(b.data().empty()) << b.name();
      EXPECT_EQ(bufferData(plan, b).size(), 1024u) << b.name();
    }
  EXPECT_EQ(bufferData(plan, p0.buffers(6)), other);
  // How the bytes are stored does not change what the plan says; the fingerprint, which hashes
  // the programs as the file stores them (without parsing them), tells the two forms apart
  // (dtc-compile always shares).
  EXPECT_EQ(planText(plan), before);
  EXPECT_NE(fingerprint(plan), fingerprintBefore);
  // Sharing again changes nothing.
  Plan again = plan;
  shareConstants(again);
  EXPECT_EQ(again.SerializeAsString(), plan.SerializeAsString());
  EXPECT_EQ(fingerprint(again), fingerprint(plan));
}

TEST(ValidateTest, SharedConstants) {
  Plan p = makePlan();
  Buffer *bias = p.mutable_programs(0)->mutable_buffers(2); // constant f32[3], 12 bytes
  const std::string bytes = bias->data();
  bias->clear_data();
  bias->set_shared_data(1);
  EXPECT_EQ(validate(p),
            "plan t.dtc: program 0: buffer %2 'b': shared constant 1 is not in [1, 0]");
  p.add_constants(bytes);
  EXPECT_TRUE(validatePlan(p, "t.dtc").isOk()) << validate(p);
  EXPECT_NE(planText(p).find("data=[0.5, 1, -2]"), std::string::npos);
  bias->set_data(bytes);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: buffer %2 'b': constant has both its own data "
                         "and shared constant 1");
  bias->clear_data();
  p.set_constants(0, "xyz");
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: buffer %2 'b': constant carries 3 bytes of data, "
                         "but its size is 12 bytes");
  p = makePlan();
  p.add_constants("abc");
  p.mutable_programs(0)->mutable_buffers(3)->set_shared_data(1); // an activation
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: buffer %3 '/fc/Gemm_output_0': data on a buffer "
                         "that is not a constant");
  // An out-of-range reference still prints (the text is total), marked.
  p.mutable_programs(0)->mutable_buffers(3)->set_shared_data(9);
  EXPECT_NE(planText(p).find(" shared_data=9(missing)\n"), std::string::npos) << planText(p);
}

TEST(ValidateTest, ArenaIsWhatTheBuffersNeed) {
  // The buffers end at byte 280: the arena is 320 (aligned to 64), never more (a 3 KB plan must
  // not make the runtime zero-fill gigabytes).
  Plan p = makePlan();
  p.mutable_programs(0)->set_arena_bytes(uint64_t{4} << 30);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: arena of 4294967296 bytes is larger than its "
                         "buffers need (320 bytes)");
  p.mutable_programs(0)->set_arena_bytes(321);
  EXPECT_EQ(validate(p), "plan t.dtc: program 0: arena of 321 bytes is larger than its buffers "
                         "need (320 bytes)");
}

TEST(ExecutorArena, PhysicalMemoryIsCheckedBeforeAllocating) {
  // A valid plan whose one buffer needs 1 TiB: refused before any allocation or zero-fill.
  Plan p = makePlan();
  RankProgram *r = p.mutable_programs(0);
  addBuffer(r, "huge", BUFFER_ACTIVATION, 1, {int64_t{1} << 38}, 320, uint64_t{1} << 40);
  r->set_arena_bytes(320 + (uint64_t{1} << 40));
  p.mutable_model()->clear_checksum(); // fails later: the check must come first
  p.mutable_model()->clear_checksum_algorithm();
  ASSERT_EQ(validate(p), "plan t.dtc: program 0: arena of 1099511628096 bytes is above the "
                         "limit of 1099511627776 bytes (1 TiB)");
  // Within the 1 TiB limit: the buffer ends at 320 + 2^40 - 704, the arena is 2^40 - 384.
  r->mutable_buffers(5)->set_shape(0, (int64_t{1} << 38) - 176);
  r->mutable_buffers(5)->set_size_bytes((uint64_t{1} << 40) - 704);
  r->set_arena_bytes((uint64_t{1} << 40) - 384);
  ASSERT_TRUE(validatePlan(p, "t.dtc").isOk()) << validate(p);
  // No parameters to read (the model is not needed for this check).
  for (Buffer &b : *r->mutable_buffers())
    if (b.kind() == BUFFER_PARAMETER)
      b.set_kind(BUFFER_INPUT);
  rt::ExecutorOptions eo;
  auto ex = rt::Executor::create(p, eo);
  ASSERT_FALSE(ex);
  EXPECT_NE(ex.status().message().find("more than this machine's"), std::string::npos)
      << ex.status().message();
}

/// The fuzz seeds (tests/fuzz/corpus/plan/): two valid plans and one with several faults.
std::vector<std::pair<std::string, Plan>> seedPlans() {
  Plan two = makePlan();
  addSecondDpRank(two);
  two.set_mode(MODE_INFERENCE);
  Plan bad = makePlan();
  bad.mutable_programs(0)->mutable_buffers(4)->set_offset(320);
  bad.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->set_inputs(2, -1);
  Attr *a = bad.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->add_attributes();
  a->set_name("value");
  a->mutable_t()->set_dtype(7);
  a->mutable_t()->add_shape(1);
  a->mutable_t()->set_data(std::string(8, '\x01'));
  Plan shared = makePlan(); // the bias from Plan.constants
  Buffer *bias = shared.mutable_programs(0)->mutable_buffers(2);
  shared.add_constants(bias->data());
  bias->clear_data();
  bias->set_shared_data(1);
  return {{"mlp.dtc", makePlan()},
          {"dp2.dtc", two},
          {"bad_offset.dtc", bad},
          {"shared_constant.dtc", shared}};
}

// Checks the seeds' validity; with DTC_WRITE_PLAN_SEEDS=<folder> also writes them there.
TEST(PlanSeeds, ValidityAndRegeneration) {
  auto seeds = seedPlans();
  EXPECT_TRUE(validatePlan(seeds[0].second, "s").isOk());
  EXPECT_TRUE(validatePlan(seeds[1].second, "s").isOk()) << validate(seeds[1].second);
  EXPECT_EQ(validate(seeds[2].second),
            "plan t.dtc: program 0: buffer %4 'y': ends at byte 344, past the arena (320 bytes)");
  EXPECT_TRUE(validatePlan(seeds[3].second, "s").isOk()) << validate(seeds[3].second);
  if (const char *dir = std::getenv("DTC_WRITE_PLAN_SEEDS")) {
    for (const auto &[name, plan] : seeds)
      EXPECT_TRUE(writePlanFile(plan, std::string(dir) + "/" + name).isOk());
  }
}

} // namespace
} // namespace dtc::plan
