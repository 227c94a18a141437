// Lowering and execution: dim binding, kernel checks at compile time, views and in-place reuse
// in the memory plan, and the executor running lowered plans (values checked by hand).
#include "compiler/plan/Lowering.h"
#include "passes/Passes.h"
#include "compiler/onnx/Importer.h"
#include "runtime/Executor.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace dtc::plan {
namespace {

const char *kMlp = R"(
<ir_version: 8, opset_import: ["" : 13]>
mlp (float[N,3] x) => (float[N,2] y)
<float[4,3] w1 = {1,0,0, 0,1,0, 0,0,1, 1,1,1}, float[4] b1 = {0,0,0,-10},
 float[2,4] w2 = {1,1,1,1, 1,-1,0,0}, float[2] b2 = {0.5,0}>
{
  h = Gemm <transB = 1> (x, w1, b1)
  r = Relu (h)
  y = Gemm <transB = 1> (r, w2, b2)
}
)";

/// Writes `text` to a fresh file under the test's temp dir and returns its path.
std::string writeModel(const std::string &name, const std::string &text) {
  std::filesystem::path p = std::filesystem::temp_directory_path() /
                            ("dtc_lowering_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}

/// Imports + canonicalizes `text`, binds dims and lowers it.
Expected<Plan> lower(const std::string &text, LowerOptions opts,
                     const std::string &modelFile = "") {
  DTC_ASSIGN_OR_RETURN(auto g, test::compileText(text, {"canonicalize"}));
  Diagnostics diags;
  DTC_RETURN_IF_ERROR(passes::bindDims(*g, opts.dims, opts.batchSize, diags));
  opts.modelFile = modelFile;
  opts.modelPath = modelFile;
  return lowerInference(*g, opts);
}

const Buffer &bufferNamed(const RankProgram &rp, const std::string &name) {
  for (const Buffer &b : rp.buffers())
    if (b.name() == name)
      return b;
  static Buffer none;
  ADD_FAILURE() << "no buffer " << name;
  return none;
}

TEST(Lowering, MlpPlanBindsBatchAndReusesMemory) {
  LowerOptions opts;
  opts.batchSize = 5;
  auto plan = lower(kMlp, opts);
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(plan->format_version(), kPlanFormatVersion);
  EXPECT_EQ(plan->mode(), MODE_INFERENCE);
  EXPECT_EQ(plan->bound_dims().at("N"), 5);
  const RankProgram &rp = plan->programs(0);
  ASSERT_EQ(rp.instructions_size(), 3);
  EXPECT_EQ(rp.instructions(1).kernel().op(), "Relu");
  EXPECT_EQ(bufferNamed(rp, "x").kind(), BUFFER_INPUT);
  EXPECT_EQ(bufferNamed(rp, "w1").kind(), BUFFER_PARAMETER);
  EXPECT_EQ(bufferNamed(rp, "w1").source(), "w1");
  EXPECT_EQ(bufferNamed(rp, "y").kind(), BUFFER_OUTPUT);
  EXPECT_EQ(bufferNamed(rp, "h").shape(1), 4);
  EXPECT_EQ(bufferNamed(rp, "h").shape(0), 5);
  // Relu runs in place over h, which nothing reads afterwards.
  EXPECT_EQ(bufferNamed(rp, "r").offset(), bufferNamed(rp, "h").offset());
  EXPECT_LT(rp.arena_bytes(), rp.no_reuse_bytes());
  for (const Buffer &b : rp.buffers())
    EXPECT_EQ(b.offset() % 64, 0u) << b.name();
  EXPECT_TRUE(validatePlan(*plan, "test").isOk());
}

TEST(Lowering, NoMemoryReuseGivesEveryBufferItsOwnBytes) {
  LowerOptions opts;
  opts.batchSize = 2;
  opts.reuseMemory = false;
  auto plan = lower(kMlp, opts);
  ASSERT_TRUE(plan) << plan.status().message();
  const RankProgram &rp = plan->programs(0);
  EXPECT_NE(bufferNamed(rp, "r").offset(), bufferNamed(rp, "h").offset());
  EXPECT_EQ(rp.arena_bytes(), rp.no_reuse_bytes());
}

TEST(Lowering, UnboundSymbolIsAnErrorNamingTheInputAndFlags) {
  auto plan = lower(kMlp, LowerOptions{});
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.status().message(),
            "input 'x': shape [N,3] has the symbolic dim 'N'; bind it with --batch-size B or "
            "--dim N=SIZE");
}

TEST(Lowering, DimFlagBindsNamedSymbols) {
  const char *text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[B,T,4] x) => (float[B,T,4] y) { y = Relu (x) }
)";
  LowerOptions opts;
  opts.dims = {{"B", 2}, {"T", 3}};
  auto plan = lower(text, opts);
  ASSERT_TRUE(plan) << plan.status().message();
  const Buffer &y = bufferNamed(plan->programs(0), "y");
  EXPECT_EQ(std::vector<int64_t>(y.shape().begin(), y.shape().end()),
            (std::vector<int64_t>{2, 3, 4}));
  opts.dims = {{"B", 0}, {"T", 3}};
  EXPECT_EQ(test::errorOf(lower(text, opts).status()), "--dim B: size must be at least 1, got 0");
}

TEST(Lowering, UnsupportedKernelIsACompileTimeErrorNamingTheNode) {
  const char *text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (double[2,4] x) => (double[2,4] y) { y = HardSigmoid (x) }
)";
  auto plan = lower(text, LowerOptions{});
  ASSERT_FALSE(plan);
  EXPECT_EQ(
      plan.status().message(),
      "node 'HardSigmoid_0' (HardSigmoid): input 0 has dtype f64; the CPU kernel supports f32");
}

TEST(Lowering, ReshapeIsAViewAndGraphInputsAreNeverOverwritten) {
  const char *text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,6] x) => (float[3,4] y, float[2,6] z)
{
  s = Constant <value = int64[2] {3, 4}> ()
  t = Reshape (x, s)
  y = Relu (t)
  z = Sigmoid (x)
}
)";
  auto plan = lower(text, LowerOptions{});
  ASSERT_TRUE(plan) << plan.status().message();
  const RankProgram &rp = plan->programs(0);
  EXPECT_EQ(bufferNamed(rp, "t").offset(), bufferNamed(rp, "x").offset());
  // Relu's input is a view of a graph input: no in-place, y gets its own bytes.
  EXPECT_NE(bufferNamed(rp, "y").offset(), bufferNamed(rp, "x").offset());
  EXPECT_NE(bufferNamed(rp, "z").offset(), bufferNamed(rp, "x").offset());
  EXPECT_NE(bufferNamed(rp, "z").offset(), bufferNamed(rp, "y").offset());
  EXPECT_EQ(bufferNamed(rp, "s").kind(), BUFFER_CONSTANT);
  EXPECT_EQ(bufferNamed(rp, "s").data().size(), 16u);
}

/// Runs a plan lowered from `text` (written to a file, so parameters load from it).
Expected<std::vector<rt::HostArray>> runText(const std::string &name, const std::string &text,
                                             const std::vector<rt::HostArray> &inputs,
                                             LowerOptions opts) {
  std::string path = writeModel(name + ".onnxtxt", text);
  DTC_ASSIGN_OR_RETURN(Plan plan, lower(text, opts, path));
  rt::ExecutorOptions eo;
  eo.threads = 1;
  auto ex = rt::Executor::create(std::move(plan), eo);
  std::filesystem::remove(path);
  if (!ex)
    return ex.status();
  for (const rt::HostArray &a : inputs)
    DTC_RETURN_IF_ERROR((*ex)->setInput(a));
  DTC_RETURN_IF_ERROR((*ex)->run());
  return (*ex)->outputs();
}

rt::HostArray floats(const std::string &name, std::vector<int64_t> shape, std::vector<float> v) {
  rt::HostArray a;
  a.name = name;
  a.dtype = ir::DType::kFloat32;
  a.shape = std::move(shape);
  a.bytes.assign(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(float));
  return a;
}

std::vector<float> valuesOf(const rt::HostArray &a) {
  std::vector<float> v(a.bytes.size() / sizeof(float));
  std::memcpy(v.data(), a.bytes.data(), a.bytes.size());
  return v;
}

TEST(Executor, RunsTheMlpWithWeightsFromTheModelFile) {
  LowerOptions opts;
  opts.batchSize = 2;
  auto out = runText("mlp", kMlp, {floats("x", {2, 3}, {1, 2, 3, -1, 5, -2})}, opts);
  ASSERT_TRUE(out) << out.status().message();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name, "y");
  // Row 0: h = [1,2,3,-4] -> r = [1,2,3,0]; y = [6.5, -1]. Row 1: h = [-1,5,-2,-8] ->
  // r = [0,5,0,0]; y = [5.5, -5].
  EXPECT_EQ(valuesOf((*out)[0]), (std::vector<float>{6.5f, -1.f, 5.5f, -5.f}));
}

TEST(Executor, InputErrorsNameTheArrayAndWhatIsExpected) {
  LowerOptions opts;
  opts.batchSize = 2;
  auto wrongShape = runText("mlp2", kMlp, {floats("x", {3, 3}, std::vector<float>(9))}, opts);
  EXPECT_EQ(test::errorOf(wrongShape.status()),
            "input 'x': got f32[3,3], the plan expects f32[2,3] (the batch size is fixed when the "
            "plan is compiled: recompile with --batch-size 3)");
  auto wrongName = runText("mlp3", kMlp, {floats("q", {2, 3}, std::vector<float>(6))}, opts);
  EXPECT_EQ(test::errorOf(wrongName.status()),
            "input 'q': the plan has no input of that name (expected: x f32[2,3])");
  auto missing = runText("mlp4", kMlp, {}, opts);
  EXPECT_EQ(test::errorOf(missing.status()), "input 'x': not given (expected f32[2,3])");
}

TEST(Executor, RefusesAModelWhoseChecksumChanged) {
  LowerOptions opts;
  opts.batchSize = 1;
  std::string path = writeModel("mlp_sum.onnxtxt", kMlp);
  auto plan = lower(kMlp, opts, path);
  ASSERT_TRUE(plan) << plan.status().message();
  std::ofstream(path, std::ios::app) << "\n# edited\n";
  rt::ExecutorOptions eo;
  auto ex = rt::Executor::create(*plan, eo);
  std::filesystem::remove(path);
  ASSERT_FALSE(ex);
  EXPECT_NE(ex.status().message().find("is not the model the plan was compiled against"),
            std::string::npos)
      << ex.status().message();
}

// A residual block with a projection shortcut: two Convs feed one Add, then Relu; a GAP and a
// Flatten end it. W1/W2/W3 are small and deterministic.
std::string residualBlock() {
  auto weights = [](int n, float scale) {
    std::string s;
    for (int i = 0; i < n; ++i)
      s += (i ? "," : "") + std::to_string(scale * static_cast<float>((i * 7) % 11 - 5));
    return s;
  };
  return R"(
<ir_version: 8, opset_import: ["" : 13]>
block (float[N,2,5,5] x) => (float[N,4] y)
<float[4,2,3,3] w1 = {)" +
         weights(72, 0.1f) + R"(}, float[4] b1 = {0.1,-0.2,0.3,0},
 float[4,2,1,1] w2 = {)" +
         weights(8, 0.2f) + R"(}>
{
  c1 = Conv <kernel_shape = [3,3], pads = [1,1,1,1]> (x, w1, b1)
  c2 = Conv <kernel_shape = [1,1]> (x, w2)
  s = Add (c1, c2)
  r = Relu (s)
  g = GlobalAveragePool (r)
  y = Flatten (g)
}
)";
}

const KernelCall &instructionNamed(const RankProgram &rp, const std::string &op) {
  for (const Instruction &in : rp.instructions())
    if (in.kernel().op() == op)
      return in.kernel();
  static KernelCall none;
  ADD_FAILURE() << "no instruction " << op;
  return none;
}

TEST(Lowering, FusesConvAddReluAndKeepsActivationsChannelsLast) {
  LowerOptions opts;
  opts.batchSize = 2;
  auto plan = lower(residualBlock(), opts);
  ASSERT_TRUE(plan) << plan.status().message();
  const RankProgram &rp = plan->programs(0);
  // c1 + c2 -> s -> r: the first Conv runs fused with the Add (Z = c2) and the Relu.
  const KernelCall &fused = instructionNamed(rp, "FusedConv");
  EXPECT_EQ(fused.domain(), "ai.dtc");
  ASSERT_EQ(fused.inputs_size(), 4);
  EXPECT_EQ(rp.buffers(fused.inputs(3)).name(), "c2");
  EXPECT_EQ(rp.buffers(fused.outputs(0)).name(), "r");
  bool activationRelu = false;
  for (const Attr &a : fused.attributes())
    activationRelu = activationRelu || (a.name() == "activation" && a.s() == "Relu");
  EXPECT_TRUE(activationRelu);
  EXPECT_EQ(rp.instructions_size(), 4); // Conv(c2), FusedConv, GlobalAveragePool, Flatten
  // Z is dead after the fused instruction: the result is written over it.
  EXPECT_EQ(bufferNamed(rp, "r").offset(), bufferNamed(rp, "c2").offset());
  EXPECT_EQ(bufferNamed(rp, "c2").layout(), LAYOUT_CHANNELS_LAST);
  EXPECT_EQ(bufferNamed(rp, "r").layout(), LAYOUT_CHANNELS_LAST);
  // GAP's [N,4,1,1] output has the same bytes in both layouts: Flatten reads a free alias, no
  // Reorder instruction.
  EXPECT_EQ(bufferNamed(rp, "g").layout(), LAYOUT_CHANNELS_LAST);
  EXPECT_EQ(bufferNamed(rp, "g.row_major").offset(), bufferNamed(rp, "g").offset());
  for (const Instruction &in : rp.instructions())
    EXPECT_NE(in.kernel().op(), "Reorder");
  EXPECT_EQ(bufferNamed(rp, "y").layout(), LAYOUT_ROW_MAJOR);
  EXPECT_TRUE(validatePlan(*plan, "test").isOk());
}

TEST(Lowering, PlainLoweringHasNoFusionAndNoChannelsLast) {
  LowerOptions opts;
  opts.batchSize = 2;
  opts.fuse = false;
  opts.channelsLast = false;
  auto plan = lower(residualBlock(), opts);
  ASSERT_TRUE(plan) << plan.status().message();
  const RankProgram &rp = plan->programs(0);
  EXPECT_EQ(rp.instructions_size(), 6);
  for (const Buffer &b : rp.buffers())
    EXPECT_EQ(b.layout(), LAYOUT_ROW_MAJOR) << b.name();
}

TEST(Executor, FusedChannelsLastPlanComputesWhatThePlainPlanComputes) {
  std::vector<float> x(2 * 2 * 5 * 5);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 37) % 17) / 8.0f - 1.0f;
  LowerOptions fused;
  fused.batchSize = 2;
  LowerOptions plain = fused;
  plain.fuse = false;
  plain.channelsLast = false;
  plain.reuseMemory = false;
  auto a = runText("res_fused", residualBlock(), {floats("x", {2, 2, 5, 5}, x)}, fused);
  auto b = runText("res_plain", residualBlock(), {floats("x", {2, 2, 5, 5}, x)}, plain);
  ASSERT_TRUE(a) << a.status().message();
  ASSERT_TRUE(b) << b.status().message();
  std::vector<float> va = valuesOf((*a)[0]), vb = valuesOf((*b)[0]);
  ASSERT_EQ(va.size(), 8u);
  for (size_t i = 0; i < va.size(); ++i)
    EXPECT_NEAR(va[i], vb[i], 1e-5f * (1 + std::abs(vb[i]))) << i;
  // Not all zero (the Relu did not wipe everything out): the comparison means something.
  EXPECT_GT(*std::max_element(vb.begin(), vb.end()), 0.01f);
}

} // namespace
} // namespace dtc::plan
