// The executor's communication instructions on ranks that run different programs (run under
// mpirun -n 2): a pipeline-like pair where rank 0 computes Relu(x) and sends it to rank 1, which
// receives it and computes its negation, and an all-gather of each rank's id over their pp group;
// values checked on both ranks, over repeated runs.
#include "compiler/plan/Plan.h"
#include "runtime/Executor.h"
#include "runtime/comm/Communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace dtc::rt {
namespace {

Communicator *gComm = nullptr;

plan::Buffer *addBuffer(plan::RankProgram *r, const std::string &name, plan::BufferKind kind,
                        std::vector<int64_t> shape, uint64_t offset) {
  plan::Buffer *b = r->add_buffers();
  b->set_name(name);
  b->set_kind(kind);
  b->set_dtype(1); // f32
  uint64_t n = 1;
  for (int64_t d : shape) {
    b->add_shape(d);
    n *= static_cast<uint64_t>(d);
  }
  b->set_offset(offset);
  b->set_size_bytes(4 * n);
  return b;
}

plan::Collective *addCollective(plan::RankProgram *r, plan::CollectiveKind kind, int peer,
                                int64_t tag, const std::string &name) {
  plan::Collective *c = r->add_instructions()->mutable_collective();
  c->set_kind(kind);
  c->set_group("pp");
  c->set_peer(peer);
  c->set_tag(tag);
  c->set_name(name);
  return c;
}

void addWait(plan::RankProgram *r) {
  const int at = r->instructions_size() - 1;
  r->add_instructions()->mutable_wait()->set_collective(at);
}

/// Two ranks, one pp group {0, 1}; program 0: h = Relu(x), send h (tag 5); program 1: recv h
/// (tag 5), y = Neg(h). Both: all-gather of their f32[1] constant id into ids f32[2].
plan::Plan makePlan() {
  const int64_t recvElements = 4;
  plan::Plan p;
  p.set_format_version(plan::kPlanFormatVersion);
  p.set_mode(plan::MODE_INFERENCE);
  p.set_world_size(2);
  p.mutable_mesh()->set_strategy("pp=2");
  p.mutable_mesh()->set_dp(1);
  p.mutable_mesh()->set_pp(2);
  p.mutable_mesh()->set_tp(1);
  plan::CommGroup *g = p.add_groups();
  g->set_axis("pp");
  g->add_ranks(0);
  g->add_ranks(1);
  for (int r = 0; r < 2; ++r) {
    plan::RankInfo *ri = p.add_ranks();
    ri->set_rank(r);
    ri->mutable_device()->set_type(plan::DEVICE_CPU);
    ri->set_program(r);
    ri->set_pp(r);
    ri->add_groups(0);
    plan::RankProgram *prog = p.add_programs();
    prog->add_ranks(r);
    prog->set_alignment(64);
    const float id = static_cast<float>(r + 1);
    addBuffer(prog, "id", plan::BUFFER_CONSTANT, {1}, 0)
        ->set_data(std::string(reinterpret_cast<const char *>(&id), 4));
    addBuffer(prog, "ids", plan::BUFFER_OUTPUT, {2}, 64);
    if (r == 0) {
      addBuffer(prog, "x", plan::BUFFER_INPUT, {4}, 128);
      addBuffer(prog, "h", plan::BUFFER_ACTIVATION, {4}, 192);
      plan::KernelCall *k = prog->add_instructions()->mutable_kernel();
      k->set_op("Relu");
      k->add_inputs(2);
      k->add_outputs(3);
      addCollective(prog, plan::COLLECTIVE_SEND, 1, 5, "h to stage 1")->add_inputs(3);
      addWait(prog);
      plan::Binding *in = prog->add_inputs();
      in->set_name("x");
      in->set_buffer(2);
    } else {
      addBuffer(prog, "h", plan::BUFFER_ACTIVATION, {recvElements}, 128);
      addBuffer(prog, "y", plan::BUFFER_OUTPUT, {recvElements}, 320);
      addCollective(prog, plan::COLLECTIVE_RECV, 0, 5, "h from stage 0")->add_outputs(2);
      addWait(prog);
      plan::KernelCall *k = prog->add_instructions()->mutable_kernel();
      k->set_op("Neg");
      k->add_inputs(2);
      k->add_outputs(3);
      plan::Binding *out = prog->add_outputs();
      out->set_name("y");
      out->set_buffer(3);
    }
    plan::Collective *ag = addCollective(prog, plan::COLLECTIVE_ALL_GATHER, 0, 0, "ids");
    ag->add_inputs(0);
    ag->add_outputs(1);
    addWait(prog);
    plan::Binding *ids = prog->add_outputs();
    ids->set_name("ids");
    ids->set_buffer(1);
    uint64_t end = 0;
    for (const plan::Buffer &b : prog->buffers())
      end = std::max(end, b.offset() + b.size_bytes());
    prog->set_arena_bytes((end + 63) / 64 * 64);
  }
  return p;
}

std::vector<float> floats(const HostArray &a) {
  std::vector<float> v(a.bytes.size() / 4);
  std::memcpy(v.data(), a.bytes.data(), a.bytes.size());
  return v;
}

TEST(ExecutorComm, SendRecvAndAllGatherAcrossDifferentPrograms) {
  ASSERT_EQ(gComm->size(), 2) << "run under mpirun -n 2";
  const int rank = gComm->rank();
  plan::Plan p = makePlan();
  ASSERT_TRUE(plan::validatePlan(p, "t").isOk()) << plan::validatePlan(p, "t").message();
  ExecutorOptions eo;
  eo.rank = rank;
  eo.comm = gComm;
  auto ex = Executor::create(p, eo);
  ASSERT_TRUE(ex) << ex.status().message();
  if (rank == 0) {
    HostArray x;
    x.name = "x";
    x.dtype = ir::DType::kFloat32;
    x.shape = {4};
    const float xs[4] = {-1.5f, 2.0f, -3.0f, 4.5f};
    x.bytes.assign(reinterpret_cast<const char *>(xs), sizeof(xs));
    ASSERT_TRUE((*ex)->setInput(x).isOk());
  }
  for (int repeat = 0; repeat < 3; ++repeat) {
    Status s = (*ex)->run();
    ASSERT_TRUE(s.isOk()) << s.message();
    auto ids = (*ex)->output("ids");
    ASSERT_TRUE(ids);
    EXPECT_EQ(floats(*ids), (std::vector<float>{1.0f, 2.0f}));
    if (rank == 1) {
      auto y = (*ex)->output("y");
      ASSERT_TRUE(y);
      EXPECT_EQ(floats(*y), (std::vector<float>{-0.0f, -2.0f, -0.0f, -4.5f}));
    }
  }
}

} // namespace
} // namespace dtc::rt

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dtc::rt::CommOptions opts;
  opts.timeoutSeconds = 20;
  auto comm = dtc::rt::Communicator::createMpi(opts);
  if (!comm) {
    std::fprintf(stderr, "error: %s\n", comm.status().message().c_str());
    return 1;
  }
  dtc::rt::gComm = comm->get();
  const int rc = RUN_ALL_TESTS();
  comm->reset();
  return rc;
}
