// The small hand-built plan the plan library's tests share (PlanTest.cpp, ValidateTest.cpp): one
// rank, y = Gemm(x, w, b) then a copy into the output buffer.
#pragma once

#include "compiler/plan/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtc::plan::test {

/// SHA-256 of "abc".
inline constexpr const char *kAbcSha =
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
/// XXH3-128 of "abc" (seed 0, canonical order: xxHash's sanity test vector, as `xxhsum -H2`).
inline constexpr const char *kAbcXxh = "06b05ab6733a618578af5f94892f3950";

inline Buffer *addBuffer(RankProgram *r, const std::string &name, BufferKind kind, int32_t dtype,
                         std::vector<int64_t> shape, uint64_t offset, uint64_t size) {
  Buffer *b = r->add_buffers();
  b->set_name(name);
  b->set_kind(kind);
  b->set_dtype(dtype);
  for (int64_t d : shape)
    b->add_shape(d);
  b->set_offset(offset);
  b->set_size_bytes(size);
  return b;
}

inline std::string floatBytes(std::vector<float> values) {
  return std::string(reinterpret_cast<const char *>(values.data()), values.size() * sizeof(float));
}

/// One rank, y = Gemm(x, w, b) then a copy into the output buffer.
inline Plan makePlan() {
  Plan plan;
  plan.set_format_version(kPlanFormatVersion);
  plan.set_producer("dtc-compile test");
  plan.set_mode(MODE_INFERENCE);
  plan.set_world_size(1);
  plan.mutable_model()->set_path("models/mlp.onnx");
  plan.mutable_model()->set_checksum(kAbcXxh);
  plan.mutable_model()->set_checksum_algorithm(CHECKSUM_XXH3_128);
  plan.mutable_model()->set_size_bytes(5);
  (*plan.mutable_bound_dims())["N"] = 2;
  plan.mutable_hyperparameters()->set_batch_size(2);

  RankInfo *ri = plan.add_ranks();
  ri->set_rank(0);
  ri->mutable_device()->set_type(DEVICE_CPU);
  RankProgram *r = plan.add_programs();
  r->add_ranks(0);
  DataBinding *data = r->add_data_bindings();
  data->set_array("x");
  data->set_input("x");
  data->set_shard_axis(-1);
  r->set_arena_bytes(320);
  r->set_no_reuse_bytes(384);
  r->set_alignment(kCpuAlignment);
  addBuffer(r, "x", BUFFER_INPUT, 1, {2, 4}, 0, 32);
  addBuffer(r, "w", BUFFER_PARAMETER, 1, {3, 4}, 64, 48)->set_source("fc.weight");
  addBuffer(r, "b", BUFFER_CONSTANT, 1, {3}, 128, 12)->set_data(floatBytes({0.5f, 1.0f, -2.0f}));
  addBuffer(r, "/fc/Gemm_output_0", BUFFER_ACTIVATION, 1, {2, 3}, 192, 24);
  addBuffer(r, "y", BUFFER_OUTPUT, 1, {2, 3}, 256, 24);
  Binding *in = r->add_inputs();
  in->set_name("x");
  in->set_buffer(0);
  Binding *out = r->add_outputs();
  out->set_name("y");
  out->set_buffer(4);

  KernelCall *k = r->add_instructions()->mutable_kernel();
  k->set_op("Gemm");
  k->set_node("/fc/Gemm");
  for (int i : {0, 1, 2})
    k->add_inputs(i);
  k->add_outputs(3);
  Attr *a = k->add_attributes();
  a->set_name("alpha");
  a->set_f(1.0f);
  a = k->add_attributes();
  a->set_name("beta");
  a->set_f(1.0f);
  a = k->add_attributes();
  a->set_name("transB");
  a->set_i(1);
  Copy *c = r->add_instructions()->mutable_copy();
  c->set_src(3);
  c->set_dst(4);
  return plan;
}

/// `plan` with a second rank running the same program, both in one dp group.
inline void addSecondDpRank(Plan &plan) {
  plan.set_world_size(2);
  RankInfo *r1 = plan.add_ranks();
  *r1 = plan.ranks(0);
  r1->set_rank(1);
  plan.mutable_programs(0)->add_ranks(1);
  CommGroup *g = plan.add_groups();
  g->set_axis("dp");
  g->set_id(0);
  g->add_ranks(0);
  g->add_ranks(1);
  plan.mutable_ranks(0)->add_groups(0);
  plan.mutable_ranks(1)->add_groups(0);
}

} // namespace dtc::plan::test
