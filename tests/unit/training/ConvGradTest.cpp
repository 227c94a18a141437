// Gradient rules of Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool and Resize
// checked by finite differences over several window configurations, plus the conventions
// (MaxPool ties and pads, auto_pad resolution, only the needed backward ops emitted) and direct
// runs of the ai.dtc ConvGrad family kernels.
#include "tests/unit/training/GradCheck.h"

#include "ops/OpDef.h"
#include "ops/cpu/Kernel.h"
#include "passes/Autodiff.h"
#include "tests/unit/cpu/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace dtc {
namespace {

using test::GradInput;
using Attrs = std::map<std::string, ir::Attribute>;
using Ints = std::vector<int64_t>;

/// A kernel spec of an ai.dtc op.
ops::cpu::KernelSpec dtcSpec(std::string op, std::vector<ops::cpu::TensorDesc> ins,
                             std::vector<ops::cpu::TensorDesc> outs, Attrs attrs) {
  ops::cpu::KernelSpec s =
      ops::cpu::test::makeSpec(std::move(op), std::move(ins), std::move(outs), std::move(attrs));
  s.domain = "ai.dtc";
  return s;
}

/// Distinct values spaced by 0.05 (more than twice the finite-difference step), shuffled, so
/// that no MaxPool window has a tie and a step never changes its argmax.
std::vector<float> distinct(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = 0.05f * (static_cast<float>(i) - static_cast<float>(n) / 2);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return v;
}

// ---------------------------------------------------------------------------------------------
// Conv

TEST(ConvGrad, Conv2DStride2PadsBias) {
  EXPECT_EQ(test::gradCheck("Conv",
                            {GradInput::f32("x", {2, 3, 5, 5}), GradInput::f32("w", {4, 3, 3, 3}),
                             GradInput::f32("b", {4})},
                            {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
            "");
}

TEST(ConvGrad, Conv2DAsymmetricPadsAndUnevenStride) {
  // 6 + 0 + 1 - 3 = 4 is not a multiple of stride 3: the last input column is read by no
  // window and gets zero gradient.
  EXPECT_EQ(test::gradCheck("Conv",
                            {GradInput::f32("x", {1, 2, 6, 5}), GradInput::f32("w", {3, 2, 3, 2}),
                             GradInput::f32("b", {3})},
                            {{"strides", Ints{3, 2}}, {"pads", Ints{0, 1, 1, 0}}}),
            "");
}

TEST(ConvGrad, Conv2DGroups) {
  EXPECT_EQ(test::gradCheck("Conv",
                            {GradInput::f32("x", {1, 4, 5, 5}), GradInput::f32("w", {6, 2, 3, 3}),
                             GradInput::f32("b", {6})},
                            {{"group", int64_t{2}}, {"pads", Ints{1, 1, 1, 1}}}),
            "");
  // Depthwise.
  EXPECT_EQ(test::gradCheck("Conv",
                            {GradInput::f32("x", {1, 3, 4, 4}), GradInput::f32("w", {3, 1, 3, 3})},
                            {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}}),
            "");
}

TEST(ConvGrad, Conv2DDilation) {
  EXPECT_EQ(test::gradCheck("Conv",
                            {GradInput::f32("x", {1, 2, 7, 7}), GradInput::f32("w", {3, 2, 3, 3})},
                            {{"dilations", Ints{2, 2}}, {"pads", Ints{1, 2, 2, 1}}}),
            "");
}

TEST(ConvGrad, Conv1D) {
  EXPECT_EQ(test::gradCheck("Conv",
                            {GradInput::f32("x", {2, 3, 9}), GradInput::f32("w", {4, 3, 3}),
                             GradInput::f32("b", {4})},
                            {{"strides", Ints{2}}, {"pads", Ints{1, 0}}}),
            "");
}

TEST(ConvGrad, Conv3D) {
  EXPECT_EQ(test::gradCheck("Conv",
                            {GradInput::f32("x", {1, 2, 4, 4, 3}),
                             GradInput::f32("w", {3, 2, 2, 2, 2}), GradInput::f32("b", {3})},
                            {{"pads", Ints{1, 0, 1, 0, 1, 0}}, {"strides", Ints{1, 2, 1}}}),
            "");
}

TEST(ConvGrad, Conv1x1AndBatchOne) {
  EXPECT_EQ(test::gradCheck("Conv",
                            {GradInput::f32("x", {2, 4, 3, 3}), GradInput::f32("w", {5, 4, 1, 1}),
                             GradInput::f32("b", {5})},
                            {}),
            "");
  // A single output pixel (kernel covers the whole input).
  EXPECT_EQ(test::gradCheck(
                "Conv", {GradInput::f32("x", {1, 2, 3, 3}), GradInput::f32("w", {2, 2, 3, 3})}, {}),
            "");
}

TEST(ConvGrad, ConvPartialNeeds) {
  // Only dW (X fixed), only dX (W fixed), only dB (X and W fixed): each path on its own.
  std::vector<GradInput> in = {GradInput::f32("x", {1, 2, 4, 4}), GradInput::f32("w", {3, 2, 3, 3}),
                               GradInput::f32("b", {3})};
  Attrs a = {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 1}}};
  auto with = [&](bool x, bool w, bool b) {
    std::vector<GradInput> v = in;
    if (!x)
      v[0].fixed();
    if (!w)
      v[1].fixed();
    if (!b)
      v[2].fixed();
    return v;
  };
  EXPECT_EQ(test::gradCheck("Conv", with(false, true, false), a), "");
  EXPECT_EQ(test::gradCheck("Conv", with(false, true, true), a), "");
  EXPECT_EQ(test::gradCheck("Conv", with(true, false, false), a), "");
  EXPECT_EQ(test::gradCheck("Conv", with(false, false, true), a), "");
}

/// Builds y = op(inputs) with `attrs`, L = ReduceSum(y), differentiates with respect to the
/// inputs marked in `wrt`, and returns the backward nodes' op types (or the error).
struct Built {
  ir::Graph g;
  std::vector<ir::Node *> backward;
  std::string error;
};

std::unique_ptr<Built> buildBackward(const std::string &op,
                                     const std::vector<std::vector<int64_t>> &shapes,
                                     const std::vector<bool> &wrt, const Attrs &attrs,
                                     size_t numOutputs = 1) {
  auto b = std::make_unique<Built>();
  ir::Graph &g = b->g;
  g.setOpset("", 21);
  Diagnostics diags;
  std::vector<ir::Value *> ins, params;
  for (size_t i = 0; i < shapes.size(); ++i) {
    ir::Value *v = g.createValue("in" + std::to_string(i),
                                 {ir::DType::kFloat32, ir::Shape::ofStatic(shapes[i])});
    g.addInput(v);
    ins.push_back(v);
    if (wrt[i])
      params.push_back(v);
  }
  std::vector<std::string> outs;
  for (size_t o = 0; o < numOutputs; ++o)
    outs.push_back("y" + std::to_string(o));
  ir::Node *n = g.addNode(op, ins, outs, "", "fwd");
  for (const auto &[k, a] : attrs)
    n->setAttr(k, a);
  if (Status s = ops::inferNode(*n, diags); !s.isOk()) {
    b->error = s.message();
    return b;
  }
  ir::Node *s = g.addNode("ReduceSum", {n->output(0)}, {"l"});
  s->setAttr("keepdims", ir::Attribute(int64_t{0}));
  if (Status st = ops::inferNode(*s, diags); !st.isOk()) {
    b->error = st.message();
    return b;
  }
  auto grads = passes::buildGradients(g, s->output(0), params, diags);
  if (!grads) {
    b->error = grads.status().message();
    return b;
  }
  for (ir::Node *node : g.nodes())
    if (node->phase() == ir::Phase::kBackward)
      b->backward.push_back(node);
  return b;
}

std::vector<std::string> opTypes(const Built &b) {
  std::vector<std::string> v;
  for (ir::Node *n : b.backward)
    v.push_back(n->opType());
  return v;
}

bool has(const Built &b, const std::string &op) {
  std::vector<std::string> v = opTypes(b);
  return std::find(v.begin(), v.end(), op) != v.end();
}

TEST(ConvGrad, ConvEmitsOnlyWhatIsNeeded) {
  auto onlyW = buildBackward("Conv", {{1, 2, 4, 4}, {3, 2, 3, 3}, {3}}, {false, true, false}, {});
  ASSERT_EQ(onlyW->error, "");
  EXPECT_TRUE(has(*onlyW, "ConvGradWeight"));
  EXPECT_FALSE(has(*onlyW, "ConvGradData"));
  for (ir::Node *n : onlyW->backward) {
    if (n->opType() == "ConvGradWeight") {
      EXPECT_EQ(n->numOutputs(), 1u);
    }
  }

  auto wAndB = buildBackward("Conv", {{1, 2, 4, 4}, {3, 2, 3, 3}, {3}}, {false, true, true}, {});
  ASSERT_EQ(wAndB->error, "");
  EXPECT_FALSE(has(*wAndB, "ReduceSum")) << "dB comes from ConvGradWeight's second output";
  for (ir::Node *n : wAndB->backward) {
    if (n->opType() == "ConvGradWeight") {
      EXPECT_EQ(n->numOutputs(), 2u);
    }
  }

  auto onlyX = buildBackward("Conv", {{1, 2, 4, 4}, {3, 2, 3, 3}}, {true, false}, {});
  ASSERT_EQ(onlyX->error, "");
  EXPECT_TRUE(has(*onlyX, "ConvGradData"));
  EXPECT_FALSE(has(*onlyX, "ConvGradWeight"));
}

TEST(ConvGrad, ConvAutoPadResolvedToExplicitPads) {
  // SAME_UPPER, in 5, stride 2, kernel 4: out 3, total pad (3-1)*2 + 4 - 5 = 3 -> [1, 2].
  // SAME_LOWER puts the odd element first -> [2, 1]. VALID -> 0.
  struct Case {
    std::string autoPad;
    Ints pads;
  };
  for (const Case &c : {Case{"SAME_UPPER", {1, 0, 2, 0}}, Case{"SAME_LOWER", {2, 0, 1, 0}},
                        Case{"VALID", {0, 0, 0, 0}}}) {
    auto b = buildBackward("Conv", {{1, 1, 5, 4}, {1, 1, 4, 1}}, {true, true},
                           {{"auto_pad", c.autoPad}, {"strides", Ints{2, 1}}});
    ASSERT_EQ(b->error, "") << c.autoPad;
    int seen = 0;
    for (ir::Node *n : b->backward)
      if (n->opType() == "ConvGradData" || n->opType() == "ConvGradWeight") {
        EXPECT_EQ(n->attrInts("pads"), c.pads) << c.autoPad << " " << n->opType();
        ++seen;
      }
    EXPECT_EQ(seen, 2) << c.autoPad;
  }
}

// ---------------------------------------------------------------------------------------------
// ConvTranspose

TEST(ConvGrad, ConvTransposeStride2Kernel2) {
  // The UNet upsampling: non-overlapping 2x2 windows.
  EXPECT_EQ(test::gradCheck("ConvTranspose",
                            {GradInput::f32("x", {1, 4, 3, 3}), GradInput::f32("w", {4, 2, 2, 2}),
                             GradInput::f32("b", {2})},
                            {{"strides", Ints{2, 2}}}),
            "");
}

TEST(ConvGrad, ConvTransposePadsOutputPadding) {
  EXPECT_EQ(
      test::gradCheck(
          "ConvTranspose",
          {GradInput::f32("x", {1, 2, 3, 3}), GradInput::f32("w", {2, 3, 3, 3}),
           GradInput::f32("b", {3})},
          {{"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 1, 1}}, {"output_padding", Ints{1, 0}}}),
      "");
}

TEST(ConvGrad, ConvTransposeGroupsDilation1D) {
  EXPECT_EQ(test::gradCheck("ConvTranspose",
                            {GradInput::f32("x", {1, 4, 3, 3}), GradInput::f32("w", {4, 1, 2, 2})},
                            {{"group", int64_t{2}}, {"dilations", Ints{2, 1}}}),
            "");
  EXPECT_EQ(test::gradCheck("ConvTranspose",
                            {GradInput::f32("x", {2, 3, 4}), GradInput::f32("w", {3, 2, 3}),
                             GradInput::f32("b", {2})},
                            {{"strides", Ints{3}}, {"pads", Ints{1, 1}}}),
            "");
}

TEST(ConvGrad, ConvTransposeOutputShape) {
  // output_shape 6 from in 3, stride 2, kernel 3: total padding 2*2 + 3 - 6 = 1 is odd ->
  // unsupported by the forward kernel; 5 -> total 2 -> pads [1, 1].
  EXPECT_EQ(test::gradCheck("ConvTranspose",
                            {GradInput::f32("x", {1, 2, 3, 3}), GradInput::f32("w", {2, 2, 3, 3})},
                            {{"strides", Ints{2, 2}}, {"output_shape", Ints{5, 5}}}),
            "");
}

// ---------------------------------------------------------------------------------------------
// MaxPool

TEST(ConvGrad, MaxPool2x2Stride2) {
  EXPECT_EQ(test::gradCheck("MaxPool", {GradInput::f32("x", {1, 2, 4, 4}, distinct(32, 1))},
                            {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}),
            "");
  // Odd size: the last row and column are read by no window.
  EXPECT_EQ(test::gradCheck("MaxPool", {GradInput::f32("x", {2, 1, 5, 5}, distinct(50, 2))},
                            {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}),
            "");
}

TEST(ConvGrad, MaxPool3x3Stride1Pad1) {
  EXPECT_EQ(test::gradCheck("MaxPool", {GradInput::f32("x", {1, 2, 5, 5}, distinct(50, 3))},
                            {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}),
            "");
  // The ResNet stem: 3x3, stride 2, pad 1.
  EXPECT_EQ(
      test::gradCheck(
          "MaxPool", {GradInput::f32("x", {1, 1, 6, 6}, distinct(36, 4))},
          {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
      "");
}

TEST(ConvGrad, MaxPoolCeilModeDilation1D3D) {
  EXPECT_EQ(test::gradCheck(
                "MaxPool", {GradInput::f32("x", {1, 1, 6, 6}, distinct(36, 5))},
                {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}),
            "");
  EXPECT_EQ(test::gradCheck("MaxPool", {GradInput::f32("x", {1, 1, 6, 5}, distinct(30, 6))},
                            {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}}),
            "");
  EXPECT_EQ(
      test::gradCheck("MaxPool", {GradInput::f32("x", {2, 2, 7}, distinct(28, 7))},
                      {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}}),
      "");
  EXPECT_EQ(test::gradCheck("MaxPool", {GradInput::f32("x", {1, 1, 4, 4, 4}, distinct(64, 8))},
                            {{"kernel_shape", Ints{2, 2, 2}}, {"strides", Ints{2, 2, 2}}}),
            "");
}

TEST(ConvGrad, MaxPoolTiesGoToTheFirstElementAndPadsNeverWin) {
  using namespace ops::cpu;
  using namespace ops::cpu::test;
  // 1x1x2x3 of equal values (-1, below the zero a pad would hold), 3x3 windows, pad 1, stride
  // 1: every window of the 2x3 output holds only -1s; each picks the first element inside X in
  // row-major window order.
  Attrs a = {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}};
  std::vector<float> x(6, -1.f), dy = {1, 2, 4, 8, 16, 32};
  Buf<float> out(6);
  runKernel(dtcSpec("MaxPoolGrad", {f32({1, 1, 2, 3}), f32({1, 1, 2, 3})}, {f32({1, 1, 2, 3})}, a),
            {dy.data(), x.data()}, {out.data()});
  // Output (r, c) covers rows r-1..r+1, cols c-1..c+1: its first element inside X is
  // (0, max(c-1, 0)).
  //   c=0 -> (0,0): dy 1 + 8; c=1 -> (0,0): 2 + 16; c=2 -> (0,1): 4 + 32.
  expectNear(out.data(), {1 + 8 + 2 + 16, 4 + 32, 0, 0, 0, 0});

  // A later equal value does not replace the first; a larger one does.
  std::vector<float> x2 = {3, 5, 5, 1}, dy2 = {1};
  Buf<float> out2(4);
  runKernel(dtcSpec("MaxPoolGrad", {f32({1, 1, 1, 1}), f32({1, 1, 2, 2})}, {f32({1, 1, 2, 2})},
                    {{"kernel_shape", Ints{2, 2}}}),
            {dy2.data(), x2.data()}, {out2.data()});
  expectNear(out2.data(), {0, 1, 0, 0});
}

TEST(ConvGrad, MaxPoolIndicesOutputCarriesNoGradient) {
  auto b = buildBackward("MaxPool", {{1, 1, 4, 4}}, {true}, {{"kernel_shape", Ints{2, 2}}}, 2);
  ASSERT_EQ(b->error, "");
  EXPECT_TRUE(has(*b, "MaxPoolGrad"));
}

// ---------------------------------------------------------------------------------------------
// AveragePool

TEST(ConvGrad, AveragePoolCountIncludePad) {
  for (int64_t include : {0, 1}) {
    EXPECT_EQ(test::gradCheck("AveragePool", {GradInput::f32("x", {1, 2, 4, 4})},
                              {{"kernel_shape", Ints{3, 3}},
                               {"pads", Ints{1, 1, 1, 1}},
                               {"count_include_pad", include}}),
              "")
        << include;
    // Asymmetric pads, stride 2.
    EXPECT_EQ(test::gradCheck("AveragePool", {GradInput::f32("x", {2, 1, 5, 4})},
                              {{"kernel_shape", Ints{2, 3}},
                               {"strides", Ints{2, 2}},
                               {"pads", Ints{1, 0, 0, 2}},
                               {"count_include_pad", include}}),
              "")
        << include;
  }
}

TEST(ConvGrad, AveragePoolCeilModeDilation1D) {
  for (int64_t include : {0, 1}) {
    // The last window passes the input (ceil): the forward's loop path when include = 1.
    EXPECT_EQ(test::gradCheck("AveragePool", {GradInput::f32("x", {1, 1, 5, 5})},
                              {{"kernel_shape", Ints{2, 2}},
                               {"strides", Ints{2, 2}},
                               {"ceil_mode", int64_t{1}},
                               {"count_include_pad", include}}),
              "")
        << include;
    EXPECT_EQ(test::gradCheck("AveragePool", {GradInput::f32("x", {1, 2, 6, 6})},
                              {{"kernel_shape", Ints{2, 2}},
                               {"dilations", Ints{2, 2}},
                               {"pads", Ints{1, 1, 0, 0}},
                               {"count_include_pad", include}}),
              "")
        << include;
    EXPECT_EQ(test::gradCheck("AveragePool", {GradInput::f32("x", {2, 3, 7})},
                              {{"kernel_shape", Ints{3}},
                               {"strides", Ints{2}},
                               {"pads", Ints{1, 1}},
                               {"count_include_pad", include}}),
              "")
        << include;
  }
}

TEST(ConvGrad, AveragePoolGradKernelDivisors) {
  using namespace ops::cpu;
  using namespace ops::cpu::test;
  // 1-D, in 3, kernel 2, pads [1, 1], stride 2: windows {-1, 0} and {1, 2}.
  // Excluding pads: dy0 / 1 to x0, dy1 / 2 to x1 and x2. Including: dy0 / 2.
  std::vector<float> dy = {4, 6};
  Buf<float> out(3);
  Attrs a = {{"kernel_shape", Ints{2}},
             {"strides", Ints{2}},
             {"pads", Ints{1, 1}},
             {"input_shape", Ints{1, 1, 3}}};
  runKernel(dtcSpec("AveragePoolGrad", {f32({1, 1, 2})}, {f32({1, 1, 3})}, a), {dy.data()},
            {out.data()});
  expectNear(out.data(), {4, 3, 3});
  a["count_include_pad"] = int64_t{1};
  runKernel(dtcSpec("AveragePoolGrad", {f32({1, 1, 2})}, {f32({1, 1, 3})}, a), {dy.data()},
            {out.data()});
  expectNear(out.data(), {2, 3, 3});
}

// ---------------------------------------------------------------------------------------------
// GlobalAveragePool

TEST(ConvGrad, GlobalAveragePool) {
  EXPECT_EQ(test::gradCheck("GlobalAveragePool", {GradInput::f32("x", {2, 3, 4, 4})}, {}), "");
  EXPECT_EQ(test::gradCheck("GlobalAveragePool", {GradInput::f32("x", {1, 2, 5})}, {}), "");
  EXPECT_EQ(test::gradCheck("GlobalAveragePool", {GradInput::f32("x", {3, 2, 1, 1})}, {}), "");
  EXPECT_EQ(test::gradCheck("GlobalAveragePool", {GradInput::f32("x", {1, 1, 2, 3, 2})}, {}), "");
}

// ---------------------------------------------------------------------------------------------
// Resize

GradInput scales(std::vector<float> s) {
  int64_t n = static_cast<int64_t>(s.size());
  return GradInput::f32("scales", {n}, std::move(s)).asConstant();
}

TEST(ConvGrad, ResizeBilinearHalfPixelX2) {
  // The UNet upsampling.
  EXPECT_EQ(test::gradCheck(
                "Resize",
                {GradInput::f32("x", {1, 2, 3, 3}), GradInput::omitted(), scales({1, 1, 2, 2})},
                {{"mode", "linear"}, {"coordinate_transformation_mode", "half_pixel"}}),
            "");
  EXPECT_EQ(
      test::gradCheck(
          "Resize",
          {GradInput::f32("x", {1, 1, 4, 3}), GradInput::omitted(), scales({1, 1, 0.5f, 2.5f})},
          {{"mode", "linear"}, {"coordinate_transformation_mode", "pytorch_half_pixel"}}),
      "");
}

TEST(ConvGrad, ResizeLinearAlignCornersAsymmetricSizes) {
  for (const char *ct : {"align_corners", "asymmetric", "half_pixel"}) {
    EXPECT_EQ(test::gradCheck("Resize",
                              {GradInput::f32("x", {1, 2, 3, 4}), GradInput::omitted(),
                               GradInput::omitted(), GradInput::i64("sizes", {4}, {1, 2, 5, 7})},
                              {{"mode", "linear"}, {"coordinate_transformation_mode", ct}}),
              "")
        << ct;
  }
  // Trilinear, with axes.
  EXPECT_EQ(test::gradCheck(
                "Resize",
                {GradInput::f32("x", {1, 1, 2, 3, 2}), GradInput::omitted(), scales({2, 1.5f, 2})},
                {{"mode", "linear"},
                 {"axes", Ints{2, 3, 4}},
                 {"coordinate_transformation_mode", "align_corners"}}),
            "");
}

TEST(ConvGrad, ResizeNearest) {
  EXPECT_EQ(test::gradCheck(
                "Resize",
                {GradInput::f32("x", {1, 2, 3, 3}), GradInput::omitted(), scales({1, 1, 2, 2})},
                {{"mode", "nearest"}}),
            "");
  EXPECT_EQ(test::gradCheck(
                "Resize",
                {GradInput::f32("x", {1, 1, 3, 4}), GradInput::omitted(), scales({1, 1, 2, 2})},
                {{"mode", "nearest"},
                 {"coordinate_transformation_mode", "asymmetric"},
                 {"nearest_mode", "floor"}}),
            "");
  for (const char *nm : {"round_prefer_ceil", "ceil", "round_prefer_floor"}) {
    EXPECT_EQ(test::gradCheck("Resize",
                              {GradInput::f32("x", {1, 1, 5, 4}), GradInput::omitted(),
                               GradInput::omitted(), GradInput::i64("sizes", {4}, {1, 1, 3, 7})},
                              {{"mode", "nearest"},
                               {"coordinate_transformation_mode", "align_corners"},
                               {"nearest_mode", nm}}),
              "")
        << nm;
  }
}

TEST(ConvGrad, ResizeGradKernelNearestX2SumsEachBlock) {
  using namespace ops::cpu;
  using namespace ops::cpu::test;
  // Nearest x2 (asymmetric, floor) on 1x1x1x2: dX[j] = dY[0, 2j] + dY[0, 2j+1] + (row 1).
  std::vector<float> dy = {1, 2, 3, 4, 10, 20, 30, 40};
  Buf<float> out(2);
  runKernel(dtcSpec("ResizeGrad", {f32({1, 1, 2, 4})}, {f32({1, 1, 1, 2})},
                    {{"mode", "nearest"},
                     {"coordinate_transformation_mode", "asymmetric"},
                     {"nearest_mode", "floor"},
                     {"scales", std::vector<float>{1, 1, 2, 2}},
                     {"input_shape", Ints{1, 1, 1, 2}}}),
            {dy.data()}, {out.data()});
  expectNear(out.data(), {1 + 2 + 10 + 20, 3 + 4 + 30 + 40});
}

TEST(ConvGrad, ResizeCubicHasNoRule) {
  ir::Graph g;
  g.setOpset("", 21);
  Diagnostics diags;
  ir::Value *x = g.createValue("x", {ir::DType::kFloat32, ir::Shape::ofStatic({1, 1, 2, 2})});
  g.addInput(x);
  ir::Value *sc = g.addConstant("sc", ir::TensorData::fromFloats("sc", {4}, {1, 1, 2, 2}));
  ir::Node *n = g.addNode("Resize", {x, nullptr, sc}, {"y"}, "", "up");
  n->setAttr("mode", ir::Attribute("cubic"));
  ASSERT_TRUE(ops::inferNode(*n, diags).isOk());
  ir::Node *s = g.addNode("ReduceSum", {n->output(0)}, {"l"});
  s->setAttr("keepdims", ir::Attribute(int64_t{0}));
  ASSERT_TRUE(ops::inferNode(*s, diags).isOk());
  auto grads = passes::buildGradients(g, s->output(0), {x}, diags);
  ASSERT_FALSE(grads);
  EXPECT_NE(grads.status().message().find("node 'up' (Resize): gradient: mode=cubic"),
            std::string::npos)
      << grads.status().message();
}

} // namespace
} // namespace dtc
