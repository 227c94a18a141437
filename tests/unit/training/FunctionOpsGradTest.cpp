// Gradients through the opset-23 function ops, which the importer expands into primitive ops
// (compiler/onnx/FunctionOps.h): each model is imported from ONNX text, canonicalized and
// shape-inferred, and its gradients with respect to every float input (masks and caches
// included) are checked by finite differences through the real kernels (GradCheck.h).
#include "tests/unit/ops/TestUtil.h"
#include "tests/unit/training/GradCheck.h"

#include <gtest/gtest.h>

namespace dtc {
namespace {

using test::GradCheckOptions;
using test::GradInput;

std::string check(const std::string &text, const std::vector<std::string> &outputs,
                  const std::vector<GradInput> &inputs) {
  auto g = test::compileText(text, {"canonicalize", "shape-inference"});
  if (!g)
    return "compile: " + g.status().message();
  return test::gradCheckGraph(**g, outputs, inputs);
}

TEST(FunctionOpsGrad, RMSNormalization) {
  EXPECT_EQ(check(R"(<ir_version: 11, opset_import: ["" : 23]>
g (float[2,3,6] x, float[6] s) => (float[2,3,6] y) {
  y = RMSNormalization<epsilon = 0.01>(x, s)
})",
                  {"y"}, {GradInput::f32("x", {2, 3, 6}), GradInput::f32("s", {6})}),
            "");
  EXPECT_EQ(check(R"(<ir_version: 11, opset_import: ["" : 23]>
g (float[2,3,4] x, float[3,1] s) => (float[2,3,4] y) {
  y = RMSNormalization<axis = 1>(x, s)
})",
                  {"y"}, {GradInput::f32("x", {2, 3, 4}), GradInput::f32("s", {3, 1})}),
            "");
}

TEST(FunctionOpsGrad, RotaryEmbedding) {
  // 3-D input, position ids, partial and interleaved rotation; the caches get gradients too.
  EXPECT_EQ(check(R"(<ir_version: 11, opset_import: ["" : 23]>
g (float[2,3,8] x, float[4,2] c, float[4,2] s) => (float[2,3,8] y) {
  pos = Constant<value = int64[2,3] {0, 1, 2, 3, 1, 0}>()
  y = RotaryEmbedding<num_heads = 2, rotary_embedding_dim = 4, interleaved = 1>(x, c, s, pos)
})",
                  {"y"},
                  {GradInput::f32("x", {2, 3, 8}), GradInput::f32("c", {4, 2}),
                   GradInput::f32("s", {4, 2})}),
            "");
  EXPECT_EQ(check(R"(<ir_version: 11, opset_import: ["" : 23]>
g (float[1,2,3,4] x, float[1,3,2] c, float[1,3,2] s) => (float[1,2,3,4] y) {
  y = RotaryEmbedding(x, c, s)
})",
                  {"y"},
                  {GradInput::f32("x", {1, 2, 3, 4}), GradInput::f32("c", {1, 3, 2}),
                   GradInput::f32("s", {1, 3, 2})}),
            "");
}

TEST(FunctionOpsGrad, AttentionCausalSoftcapFloatMask) {
  EXPECT_EQ(check(R"(<ir_version: 11, opset_import: ["" : 23]>
g (float[2,2,3,4] q, float[2,2,5,4] k, float[2,2,5,3] v, float[3,5] m) => (float[2,2,3,3] y) {
  y = Attention<is_causal = 1, softcap = 2.0>(q, k, v, m)
})",
                  {"y"},
                  {GradInput::f32("q", {2, 2, 3, 4}), GradInput::f32("k", {2, 2, 5, 4}),
                   GradInput::f32("v", {2, 2, 5, 3}), GradInput::f32("m", {3, 5})}),
            "");
}

TEST(FunctionOpsGrad, AttentionGroupedQueryWithPast) {
  // 3-D Q/K/V, 4 query heads sharing 2 key/value heads, a KV cache; the present outputs enter
  // the loss too.
  EXPECT_EQ(check(R"(<ir_version: 11, opset_import: ["" : 23]>
g (float[1,2,12] q, float[1,2,6] k, float[1,2,4] v, float[1,2,3,3] pk, float[1,2,3,2] pv)
  => (float[1,2,8] y, float[1,2,5,3] ok, float[1,2,5,2] ov) {
  y, ok, ov = Attention<q_num_heads = 4, kv_num_heads = 2, is_causal = 1, scale = 0.5>(q, k, v, , pk, pv)
})",
                  {"y", "ok", "ov"},
                  {GradInput::f32("q", {1, 2, 12}), GradInput::f32("k", {1, 2, 6}),
                   GradInput::f32("v", {1, 2, 4}), GradInput::f32("pk", {1, 2, 3, 3}),
                   GradInput::f32("pv", {1, 2, 3, 2})}),
            "");
}

TEST(FunctionOpsGrad, AttentionUndeclaredTypes) {
  // Q, K, V without declared types: head counts, the K/V repeat and the default scale are
  // computed from Shape(Q) and Shape(K), which carry no gradient.
  EXPECT_EQ(check(R"(<ir_version: 11, opset_import: ["" : 23]>
g (float[1,4,3,4] q, float[1,2,5,4] k, float[1,2,5,3] v) => (float[1,4,3,3] y) {
  qi = Identity(q)
  ki = Identity(k)
  vi = Identity(v)
  y = Attention<is_causal = 1>(qi, ki, vi)
})",
                  {"y"},
                  {GradInput::f32("q", {1, 4, 3, 4}), GradInput::f32("k", {1, 2, 5, 4}),
                   GradInput::f32("v", {1, 2, 5, 3})}),
            "");
}

} // namespace
} // namespace dtc
