// Tests of the CPU index and shape kernels (ops/cpu/Index.cpp): Gather, Slice, Split, Expand,
// Tile, Pad, Range, Shape and ConstantOfShape against hand-computed arrays (numpy semantics),
// plus their check errors and run-time errors for bad index data; DepthToSpace (DCR, CRD) and
// SpaceToDepth (ops/cpu/Shape.cpp) against the ONNX operator text's reshape-transpose formulas.
#include "tests/unit/cpu/KernelTestUtil.h"

#include "compiler/ir/TensorData.h"

#include <climits>
#include <numeric>

namespace dtc::ops::cpu::test {
namespace {

TensorDesc i32(std::vector<int64_t> shape) { return {ir::DType::kInt32, shape}; }
TensorDesc boolean(std::vector<int64_t> shape) { return {ir::DType::kBool, shape}; }
TensorDesc absent() { return {}; }

template <typename T> Buf<T> iotaBuf(size_t n, T start = 0) {
  Buf<T> b(n);
  std::iota(b.data(), b.data() + n, start);
  return b;
}

/// Creates the kernel (which must succeed) and returns the status of one run.
Status runStatus(const KernelSpec &spec, std::vector<const void *> ins, std::vector<void *> outs) {
  CpuContext ctx;
  auto k = createKernel(spec, ctx);
  if (!k.hasValue())
    return Status::error("createKernel failed: " + k.status().message());
  return (*k)->run({ins.data(), ins.size(), outs.data(), outs.size()});
}

std::string checkMsg(const KernelSpec &spec) { return checkKernel(spec).message(); }

// ---- Gather --------------------------------------------------------------------------------

TEST(CpuIndexGather, Axis0NegativeIndices) {
  Buf<float> x = iotaBuf<float>(12), y(8);
  Buf<int64_t> idx(std::vector<int64_t>{2, -3});
  runKernel(makeSpec("Gather", {f32({3, 4}), i64({2})}, {f32({2, 4})}, {{"axis", int64_t{0}}}),
            {x.data(), idx.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3}));
}

TEST(CpuIndexGather, Axis1Int32Indices2D) {
  Buf<float> x = iotaBuf<float>(12), y(12);
  Buf<int32_t> idx(std::vector<int32_t>{3, 0, -1, 1});
  runKernel(
      makeSpec("Gather", {f32({3, 4}), i32({2, 2})}, {f32({3, 2, 2})}, {{"axis", int64_t{1}}}),
      {x.data(), idx.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<float>{3, 0, 3, 1, 7, 4, 7, 5, 11, 8, 11, 9}));
}

TEST(CpuIndexGather, LastAxisScalarIndexInt64Data) {
  Buf<int64_t> x(std::vector<int64_t>{10, 11, 12, 20, 21, 22}), y(2);
  Buf<int64_t> idx(std::vector<int64_t>{-1});
  runKernel(makeSpec("Gather", {i64({2, 3}), i64({})}, {i64({2})}, {{"axis", int64_t{-1}}}),
            {x.data(), idx.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{12, 22}));
}

TEST(CpuIndexGather, BoolDataAndMiddleAxisAgainstNaiveLoop) {
  Buf<uint8_t> b(std::vector<uint8_t>{1, 0, 0, 1}), by(3);
  Buf<int64_t> bi(std::vector<int64_t>{1, 3, -1});
  runKernel(makeSpec("Gather", {boolean({4}), i64({3})}, {boolean({3})}), {b.data(), bi.data()},
            {by.data()});
  EXPECT_EQ(by.vec(), (std::vector<uint8_t>{0, 1, 1}));
  // [2,3,4] gathered on axis 1 with [2,2] indices -> [2,2,2,4].
  Buf<float> x = randomBuf(24, 3), y(32);
  std::vector<int64_t> raw = {2, 0, -2, 2};
  Buf<int64_t> idx(raw);
  runKernel(makeSpec("Gather", {f32({2, 3, 4}), i64({2, 2})}, {f32({2, 2, 2, 4})},
                     {{"axis", int64_t{1}}}),
            {x.data(), idx.data()}, {y.data()});
  std::vector<float> want;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t q = 0; q < 4; ++q)
      for (int64_t k = 0; k < 4; ++k) {
        int64_t j = raw[static_cast<size_t>(q)] < 0 ? raw[static_cast<size_t>(q)] + 3
                                                    : raw[static_cast<size_t>(q)];
        want.push_back(x[static_cast<size_t>((i * 3 + j) * 4 + k)]);
      }
  EXPECT_EQ(y.vec(), want);
}

TEST(CpuIndexGather, OutOfRangeIndexIsARunError) {
  Buf<float> x = iotaBuf<float>(12), y(8);
  KernelSpec spec = makeSpec("Gather", {f32({3, 4}), i64({2})}, {f32({2, 4})});
  Buf<int64_t> high(std::vector<int64_t>{1, 3}), low(std::vector<int64_t>{-4, 0});
  EXPECT_EQ(runStatus(spec, {x.data(), high.data()}, {y.data()}).message(),
            "node 'n0' (Gather): index 3 is out of range for axis 0 of size 3");
  EXPECT_EQ(runStatus(spec, {x.data(), low.data()}, {y.data()}).message(),
            "node 'n0' (Gather): index -4 is out of range for axis 0 of size 3");
}

TEST(CpuIndexGather, CheckErrors) {
  EXPECT_EQ(checkMsg(makeSpec("Gather", {{ir::DType::kFloat64, {3}}, i64({1})},
                              {{ir::DType::kFloat64, {1}}})),
            "node 'n0' (Gather): input 0 has dtype f64; the CPU kernel supports f32, i32, i64 "
            "or bool");
  EXPECT_EQ(checkMsg(makeSpec("Gather", {f32({3, 4}), f32({2})}, {f32({2, 4})})),
            "node 'n0' (Gather): input 1 has dtype f32; the CPU kernel supports i32 or i64");
  EXPECT_EQ(checkMsg(makeSpec("Gather", {f32({3, 4}), i64({2})}, {f32({2, 2})})),
            "node 'n0' (Gather): output 0 has shape [2,2], expected [2,4]");
  EXPECT_EQ(
      checkMsg(makeSpec("Gather", {f32({3, 4}), i64({2})}, {f32({3, 2})}, {{"axis", int64_t{2}}})),
      "node 'n0' (Gather): axis 2 is out of range for rank 2");
  EXPECT_EQ(inPlaceInput(makeSpec("Gather", {f32({3}), i64({3})}, {f32({3})})), -1);
}

// ---- Slice ---------------------------------------------------------------------------------

TEST(CpuIndexSlice, NegativeStepToTheBeginning) {
  Buf<float> x = iotaBuf<float>(12), y(9);
  Buf<int64_t> starts(std::vector<int64_t>{2}), ends(std::vector<int64_t>{INT64_MIN}),
      axes(std::vector<int64_t>{1}), steps(std::vector<int64_t>{-1});
  runKernel(makeSpec("Slice", {f32({3, 4}), i64({1}), i64({1}), i64({1}), i64({1})}, {f32({3, 3})}),
            {x.data(), starts.data(), ends.data(), axes.data(), steps.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<float>{2, 1, 0, 6, 5, 4, 10, 9, 8}));
}

TEST(CpuIndexSlice, ClampedEndsAndStepsWithoutAxes) {
  Buf<float> x = iotaBuf<float>(12), y(4);
  Buf<int64_t> starts(std::vector<int64_t>{1, 0}), ends(std::vector<int64_t>{INT64_MAX, 100}),
      steps(std::vector<int64_t>{1, 3});
  runKernel(makeSpec("Slice", {f32({3, 4}), i64({2}), i64({2}), absent(), i64({2})}, {f32({2, 2})}),
            {x.data(), starts.data(), ends.data(), nullptr, steps.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<float>{4, 7, 8, 11}));
}

TEST(CpuIndexSlice, NegativeAxisSubsetInt32Params) {
  Buf<float> x = iotaBuf<float>(24), y(12);
  Buf<int32_t> starts(std::vector<int32_t>{-2}), ends(std::vector<int32_t>{INT32_MAX}),
      axes(std::vector<int32_t>{-1});
  runKernel(makeSpec("Slice", {f32({2, 3, 4}), i32({1}), i32({1}), i32({1})}, {f32({2, 3, 2})}),
            {x.data(), starts.data(), ends.data(), axes.data()}, {y.data()});
  std::vector<float> want;
  for (int r = 0; r < 6; ++r)
    for (int k = 2; k < 4; ++k)
      want.push_back(static_cast<float>(r * 4 + k));
  EXPECT_EQ(y.vec(), want);
}

TEST(CpuIndexSlice, StepTwoBackwardsInt64AndTwoAxesNaive) {
  Buf<int64_t> x(std::vector<int64_t>{10, 11, 12, 13, 14}), y(3);
  Buf<int64_t> starts(std::vector<int64_t>{-1}), ends(std::vector<int64_t>{-6}),
      steps(std::vector<int64_t>{-2});
  runKernel(makeSpec("Slice", {i64({5}), i64({1}), i64({1}), absent(), i64({1})}, {i64({3})}),
            {x.data(), starts.data(), ends.data(), nullptr, steps.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{14, 12, 10}));
  // [4,5,6]: axis 2 from 5 down by 2 (5,3,1), axis 0 from 1 by 2 (1,3).
  Buf<float> a = randomBuf(120, 9), b(2 * 5 * 3);
  Buf<int64_t> s2(std::vector<int64_t>{5, 1}), e2(std::vector<int64_t>{0, 4}),
      ax2(std::vector<int64_t>{2, 0}), st2(std::vector<int64_t>{-2, 2});
  runKernel(
      makeSpec("Slice", {f32({4, 5, 6}), i64({2}), i64({2}), i64({2}), i64({2})}, {f32({2, 5, 3})}),
      {a.data(), s2.data(), e2.data(), ax2.data(), st2.data()}, {b.data()});
  std::vector<float> want;
  for (int i : {1, 3})
    for (int j = 0; j < 5; ++j)
      for (int k : {5, 3, 1})
        want.push_back(a[static_cast<size_t>((i * 5 + j) * 6 + k)]);
  EXPECT_EQ(b.vec(), want);
}

TEST(CpuIndexSlice, RunAndCheckErrors) {
  Buf<float> x = iotaBuf<float>(12), y(9);
  Buf<int64_t> starts(std::vector<int64_t>{0}), ends(std::vector<int64_t>{2}),
      axes(std::vector<int64_t>{1}), zero(std::vector<int64_t>{0}), bad(std::vector<int64_t>{2});
  KernelSpec spec =
      makeSpec("Slice", {f32({3, 4}), i64({1}), i64({1}), i64({1}), i64({1})}, {f32({3, 3})});
  Buf<int64_t> one(std::vector<int64_t>{1});
  EXPECT_EQ(
      runStatus(spec, {x.data(), starts.data(), ends.data(), axes.data(), one.data()}, {y.data()})
          .message(),
      "node 'n0' (Slice): starts [0], ends [2], axes [1], steps [1] give output shape "
      "[3,2], but the kernel was made for [3,3]");
  EXPECT_EQ(
      runStatus(spec, {x.data(), starts.data(), ends.data(), axes.data(), zero.data()}, {y.data()})
          .message(),
      "node 'n0' (Slice): slice step must not be 0");
  EXPECT_EQ(
      runStatus(spec, {x.data(), starts.data(), ends.data(), bad.data(), one.data()}, {y.data()})
          .message(),
      "node 'n0' (Slice): axis 2 is out of range for rank 2");
  EXPECT_EQ(checkMsg(makeSpec("Slice", {f32({3, 4}), i64({1}), i64({2})}, {f32({3, 3})})),
            "node 'n0' (Slice): input 2 has 2 entries but starts has 1");
  EXPECT_EQ(checkMsg(makeSpec("Slice", {f32({3, 4}), f32({1}), i64({1})}, {f32({3, 3})})),
            "node 'n0' (Slice): input 1 has dtype f32; the CPU kernel supports i32 or i64");
  EXPECT_EQ(checkMsg(makeSpec("Slice", {f32({3, 4}), i64({1}), i64({1})}, {f32({3, 5})})),
            "node 'n0' (Slice): output f32[3,5] cannot be a slice of input f32[3,4] along 1 "
            "axes");
}

// ---- Split ---------------------------------------------------------------------------------

TEST(CpuIndexSplit, UnevenSizesFromInput) {
  Buf<float> x = iotaBuf<float>(8), a(2), b(6);
  Buf<int64_t> split(std::vector<int64_t>{1, 3});
  runKernel(makeSpec("Split", {f32({2, 4}), i64({2})}, {f32({2, 1}), f32({2, 3})},
                     {{"axis", int64_t{-1}}}),
            {x.data(), split.data()}, {a.data(), b.data()});
  EXPECT_EQ(a.vec(), (std::vector<float>{0, 4}));
  EXPECT_EQ(b.vec(), (std::vector<float>{1, 2, 3, 5, 6, 7}));
}

TEST(CpuIndexSplit, NumOutputsLastChunkSmaller) {
  Buf<int64_t> x = iotaBuf<int64_t>(5), a(2), b(2), c(1);
  runKernel(makeSpec("Split", {i64({5})}, {i64({2}), i64({2}), i64({1})},
                     {{"axis", int64_t{0}}, {"num_outputs", int64_t{3}}}),
            {x.data()}, {a.data(), b.data(), c.data()});
  EXPECT_EQ(a.vec(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(b.vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c.vec(), (std::vector<int64_t>{4}));
}

TEST(CpuIndexSplit, Errors) {
  Buf<float> x = iotaBuf<float>(4), a(1), b(3);
  Buf<int64_t> split(std::vector<int64_t>{2, 2});
  EXPECT_EQ(runStatus(makeSpec("Split", {f32({4}), i64({2})}, {f32({1}), f32({3})}),
                      {x.data(), split.data()}, {a.data(), b.data()})
                .message(),
            "node 'n0' (Split): split [2,2] disagrees with the output sizes [1,3] the kernel was "
            "made for");
  EXPECT_EQ(
      checkMsg(makeSpec("Split", {f32({5})}, {f32({1}), f32({4})}, {{"num_outputs", int64_t{2}}})),
      "node 'n0' (Split): output sizes [1,4] differ from the num_outputs split [3,2]");
  EXPECT_EQ(checkMsg(makeSpec("Split", {f32({5})}, {f32({1}), f32({3})})),
            "node 'n0' (Split): output sizes [1,3] along axis 0 sum to 4, but the input has 5");
  EXPECT_EQ(checkMsg(makeSpec("Split", {f32({2, 5})}, {f32({1, 5}), i64({1, 5})})),
            "node 'n0' (Split): output 1 has dtype i64; the CPU kernel supports f32");
}

// ---- Expand and Tile -----------------------------------------------------------------------

TEST(CpuIndexExpand, LeadingNewDimsAndBroadcast) {
  Buf<float> x(std::vector<float>{1, 2, 3}), y(24);
  Buf<int64_t> shape(std::vector<int64_t>{2, 1, 4});
  runKernel(makeSpec("Expand", {f32({3, 1}), i64({3})}, {f32({2, 3, 4})}), {x.data(), shape.data()},
            {y.data()});
  std::vector<float> want;
  for (int b = 0; b < 2; ++b)
    for (float v : {1.f, 2.f, 3.f})
      for (int j = 0; j < 4; ++j)
        want.push_back(v);
  EXPECT_EQ(y.vec(), want);
  // The shape may be shorter than the input's rank (bidirectional broadcast).
  Buf<int64_t> xi(std::vector<int64_t>{7, 8}), yi(4), s1(std::vector<int64_t>{2, 1});
  runKernel(makeSpec("Expand", {i64({2}), i64({2})}, {i64({2, 2})}), {xi.data(), s1.data()},
            {yi.data()});
  EXPECT_EQ(yi.vec(), (std::vector<int64_t>{7, 8, 7, 8}));
}

TEST(CpuIndexExpand, Errors) {
  Buf<float> x(std::vector<float>{1, 2, 3}), y(24);
  Buf<int64_t> shape(std::vector<int64_t>{2, 3, 3});
  EXPECT_EQ(runStatus(makeSpec("Expand", {f32({3, 1}), i64({3})}, {f32({2, 3, 4})}),
                      {x.data(), shape.data()}, {y.data()})
                .message(),
            "node 'n0' (Expand): shape [2,3,3] expands input [3,1] to [2,3,3], but the kernel "
            "was made for [2,3,4]");
  EXPECT_EQ(checkMsg(makeSpec("Expand", {f32({3, 2}), i64({3})}, {f32({2, 3, 4})})),
            "node 'n0' (Expand): output f32[2,3,4] is not an expansion of input f32[3,2] by a "
            "shape of 3 entries");
}

TEST(CpuIndexTile, RepeatsBothAxes) {
  Buf<float> x(std::vector<float>{1, 2, 3, 4, 5, 6}), y(24);
  Buf<int64_t> reps(std::vector<int64_t>{2, 2});
  runKernel(makeSpec("Tile", {f32({2, 3}), i64({2})}, {f32({4, 6})}), {x.data(), reps.data()},
            {y.data()});
  std::vector<float> r0 = {1, 2, 3, 1, 2, 3}, r1 = {4, 5, 6, 4, 5, 6}, want;
  for (int t = 0; t < 2; ++t) {
    want.insert(want.end(), r0.begin(), r0.end());
    want.insert(want.end(), r1.begin(), r1.end());
  }
  EXPECT_EQ(y.vec(), want);
  Buf<int64_t> bad(std::vector<int64_t>{2, 3});
  EXPECT_EQ(runStatus(makeSpec("Tile", {f32({2, 3}), i64({2})}, {f32({4, 6})}),
                      {x.data(), bad.data()}, {y.data()})
                .message(),
            "node 'n0' (Tile): repeats [2,3] do not tile input [2,3] to the output [4,6] the "
            "kernel was made for");
  EXPECT_EQ(checkMsg(makeSpec("Tile", {f32({2, 3}), i64({2})}, {f32({4, 7})})),
            "node 'n0' (Tile): output f32[4,7] is not a tiling of input f32[2,3]");
  EXPECT_EQ(checkMsg(makeSpec("Tile", {f32({2, 3}), i64({3})}, {f32({4, 6})})),
            "node 'n0' (Tile): repeats has 3 entries but input 0 has rank 2");
}

// ---- Pad -----------------------------------------------------------------------------------

TEST(CpuIndexPad, ConstantWithValue) {
  Buf<float> x(std::vector<float>{1, 2, 3, 4}), y(9), v(std::vector<float>{9});
  Buf<int64_t> pads(std::vector<int64_t>{1, 0, 0, 1});
  runKernel(
      makeSpec("Pad", {f32({2, 2}), i64({4}), f32({})}, {f32({3, 3})}, {{"mode", "constant"}}),
      {x.data(), pads.data(), v.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<float>{9, 9, 9, 1, 2, 9, 3, 4, 9}));
}

TEST(CpuIndexPad, ReflectAndEdge) {
  Buf<float> x(std::vector<float>{1, 2, 3}), y(7);
  Buf<int64_t> pads(std::vector<int64_t>{2, 2});
  runKernel(makeSpec("Pad", {f32({3}), i64({2})}, {f32({7})}, {{"mode", "reflect"}}),
            {x.data(), pads.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<float>{3, 2, 1, 2, 3, 2, 1}));
  Buf<int64_t> xi(std::vector<int64_t>{1, 2, 3, 4}), yi(12);
  Buf<int64_t> edgePads(std::vector<int64_t>{0, 1, 1, 1});
  runKernel(makeSpec("Pad", {i64({2, 2}), i64({4})}, {i64({3, 4})}, {{"mode", "edge"}}),
            {xi.data(), edgePads.data()}, {yi.data()});
  EXPECT_EQ(yi.vec(), (std::vector<int64_t>{1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(CpuIndexPad, NegativePadsCropAndAxesWrap) {
  Buf<float> x = iotaBuf<float>(8), y(8);
  Buf<int64_t> pads(std::vector<int64_t>{0, -1, 0, 1});
  runKernel(makeSpec("Pad", {f32({2, 4}), i64({4})}, {f32({2, 4})}), {x.data(), pads.data()},
            {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<float>{1, 2, 3, 0, 5, 6, 7, 0}));
  // Opset 18 axes input: only the last axis, wrap mode (opset 19).
  Buf<uint8_t> b(std::vector<uint8_t>{1, 0, 0, 0, 1, 1}), by(10);
  Buf<int64_t> p2(std::vector<int64_t>{1, 1}), axes(std::vector<int64_t>{-1});
  runKernel(makeSpec("Pad", {boolean({2, 3}), i64({2}), absent(), i64({1})}, {boolean({2, 5})},
                     {{"mode", "wrap"}}),
            {b.data(), p2.data(), nullptr, axes.data()}, {by.data()});
  EXPECT_EQ(by.vec(), (std::vector<uint8_t>{0, 1, 0, 0, 1, 1, 0, 1, 1, 0}));
}

TEST(CpuIndexPad, EmptyInputConstantFillsEverything) {
  Buf<int64_t> pads(std::vector<int64_t>{1, 0, 1, 0}), y(std::vector<int64_t>(4, 5));
  Buf<int64_t> v(std::vector<int64_t>{-3});
  // The empty data tensor has no buffer.
  runKernel(makeSpec("Pad", {i64({0, 2}), i64({4}), i64({1})}, {i64({2, 2})}),
            {nullptr, pads.data(), v.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{-3, -3, -3, -3}));
  Buf<float> z(4);
  EXPECT_EQ(runStatus(makeSpec("Pad", {f32({0, 2}), i64({4})}, {f32({2, 2})}, {{"mode", "edge"}}),
                      {nullptr, pads.data()}, {z.data()})
                .message(),
            "node 'n0' (Pad): cannot pad an empty axis in edge mode");
}

TEST(CpuIndexPad, Errors) {
  Buf<float> x(std::vector<float>{1, 2, 3}), y(9);
  Buf<int64_t> pads(std::vector<int64_t>{3, 3});
  EXPECT_EQ(runStatus(makeSpec("Pad", {f32({3}), i64({2})}, {f32({9})}, {{"mode", "reflect"}}),
                      {x.data(), pads.data()}, {y.data()})
                .message(),
            "node 'n0' (Pad): reflect pads [3,3] must be smaller than the size 3 of axis 0");
  Buf<int64_t> p1(std::vector<int64_t>{1, 1});
  EXPECT_EQ(runStatus(makeSpec("Pad", {f32({3}), i64({2})}, {f32({9})}), {x.data(), p1.data()},
                      {y.data()})
                .message(),
            "node 'n0' (Pad): pads [1,1] give output shape [5], but the kernel was made for [9]");
  Buf<int64_t> crop(std::vector<int64_t>{-2, -2});
  EXPECT_EQ(runStatus(makeSpec("Pad", {f32({3}), i64({2})}, {f32({9})}), {x.data(), crop.data()},
                      {y.data()})
                .message(),
            "node 'n0' (Pad): pads [-2,-2] give axis 0 of size 3 a negative or overflowing size");
  EXPECT_EQ(checkMsg(makeSpec("Pad", {f32({3}), i64({2})}, {f32({5})}, {{"mode", "mirror"}})),
            "node 'n0' (Pad): unknown pad mode 'mirror'");
  EXPECT_EQ(checkMsg(makeSpec("Pad", {f32({3, 3}), i64({2})}, {f32({5, 3})})),
            "node 'n0' (Pad): pads has 2 entries; expected 2 per padded axis (4)");
  EXPECT_EQ(checkMsg(makeSpec("Pad", {f32({3}), i64({2}), i64({})}, {f32({5})})),
            "node 'n0' (Pad): input 2 has dtype i64; the CPU kernel supports f32");
}

// ---- Range, Shape, ConstantOfShape ---------------------------------------------------------

TEST(CpuIndexRange, F32AndIntegersWithNegativeDelta) {
  Buf<float> s(std::vector<float>{1}), l(std::vector<float>{-1}), d(std::vector<float>{-0.5f}),
      y(4);
  runKernel(makeSpec("Range", {f32({}), f32({}), f32({})}, {f32({4})}),
            {s.data(), l.data(), d.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<float>{1, 0.5f, 0, -0.5f}));
  Buf<int64_t> si(std::vector<int64_t>{10}), li(std::vector<int64_t>{3}),
      di(std::vector<int64_t>{-3}), yi(3);
  runKernel(makeSpec("Range", {i64({}), i64({}), i64({})}, {i64({3})}),
            {si.data(), li.data(), di.data()}, {yi.data()});
  EXPECT_EQ(yi.vec(), (std::vector<int64_t>{10, 7, 4}));
  Buf<int32_t> s3(std::vector<int32_t>{-2}), l3(std::vector<int32_t>{2}),
      d3(std::vector<int32_t>{2}), y3(2);
  runKernel(makeSpec("Range", {i32({}), i32({}), i32({})}, {i32({2})}),
            {s3.data(), l3.data(), d3.data()}, {y3.data()});
  EXPECT_EQ(y3.vec(), (std::vector<int32_t>{-2, 0}));
}

TEST(CpuIndexRange, Errors) {
  Buf<float> s(std::vector<float>{1}), l(std::vector<float>{-1}), d(std::vector<float>{-0.5f}),
      y(5), z(std::vector<float>{0});
  KernelSpec spec = makeSpec("Range", {f32({}), f32({}), f32({})}, {f32({5})});
  EXPECT_EQ(runStatus(spec, {s.data(), l.data(), d.data()}, {y.data()}).message(),
            "node 'n0' (Range): start 1, limit -1, delta -0.5 give 4 elements, but the kernel "
            "was made for 5");
  EXPECT_EQ(runStatus(spec, {s.data(), l.data(), z.data()}, {y.data()}).message(),
            "node 'n0' (Range): delta must not be 0");
  EXPECT_EQ(checkMsg(makeSpec("Range", {f32({2}), f32({}), f32({})}, {f32({5})})),
            "node 'n0' (Range): input 0 must be a scalar, got shape [2]");
  EXPECT_EQ(checkMsg(makeSpec("Range", {f32({}), i64({}), f32({})}, {f32({5})})),
            "node 'n0' (Range): input 1 has dtype i64; the CPU kernel supports f32");
}

TEST(CpuIndexShape, StartEndAndChannelsLastInput) {
  Buf<float> x(120);
  Buf<int64_t> y(4);
  runKernel(makeSpec("Shape", {f32({2, 3, 4, 5})}, {i64({2})},
                     {{"start", int64_t{1}}, {"end", int64_t{-1}}}),
            {x.data()}, {y.data()});
  EXPECT_EQ(std::vector<int64_t>(y.data(), y.data() + 2), (std::vector<int64_t>{3, 4}));
  KernelSpec all = makeSpec("Shape", {f32({2, 3, 4, 5})}, {i64({4})},
                            {{"start", int64_t{-10}}, {"end", int64_t{10}}});
  all.inputs[0].layout = Layout::kChannelsLast;
  runKernel(all, {x.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(checkMsg(makeSpec("Shape", {f32({2, 3, 4, 5})}, {i64({3})}, {{"start", int64_t{2}}})),
            "node 'n0' (Shape): output 0 has shape [3], expected [2]");
  EXPECT_EQ(checkMsg(makeSpec("Shape", {f32({2})}, {f32({1})})),
            "node 'n0' (Shape): output 0 has dtype f32; the CPU kernel supports i64");
}

TEST(CpuIndexConstantOfShape, Values) {
  Buf<int64_t> shape(std::vector<int64_t>{2, 3});
  Buf<float> y(std::vector<float>(6, 5.f));
  runKernel(makeSpec("ConstantOfShape", {i64({2})}, {f32({2, 3})}), {shape.data()}, {y.data()});
  EXPECT_EQ(y.vec(), std::vector<float>(6, 0.f));
  Buf<int64_t> s1(std::vector<int64_t>{3}), yi(3);
  ir::Attribute seven(ir::TensorData::fromInt64s("v", {1}, {7}));
  runKernel(makeSpec("ConstantOfShape", {i64({1})}, {i64({3})}, {{"value", seven}}), {s1.data()},
            {yi.data()});
  EXPECT_EQ(yi.vec(), (std::vector<int64_t>{7, 7, 7}));
  Buf<uint8_t> yb(4);
  ir::Attribute yes(ir::TensorData::fromBytes("v", ir::DType::kBool, {1}, std::string(1, '\1')));
  Buf<int64_t> s22(std::vector<int64_t>{2, 2});
  runKernel(makeSpec("ConstantOfShape", {i64({2})}, {boolean({2, 2})}, {{"value", yes}}),
            {s22.data()}, {yb.data()});
  EXPECT_EQ(yb.vec(), (std::vector<uint8_t>{1, 1, 1, 1}));
  ir::Attribute half(ir::TensorData::fromFloats("v", {1}, {0.5f}));
  Buf<float> ys(1);
  runKernel(makeSpec("ConstantOfShape", {i64({0})}, {f32({})}, {{"value", half}}), {nullptr},
            {ys.data()});
  EXPECT_EQ(ys[0], 0.5f);
}

TEST(CpuIndexConstantOfShape, Errors) {
  Buf<int64_t> shape(std::vector<int64_t>{2, 4});
  Buf<float> y(6);
  EXPECT_EQ(
      runStatus(makeSpec("ConstantOfShape", {i64({2})}, {f32({2, 3})}), {shape.data()}, {y.data()})
          .message(),
      "node 'n0' (ConstantOfShape): shape [2,4] disagrees with the output shape [2,3] the "
      "kernel was made for");
  ir::Attribute f64(ir::TensorData::fromBytes("v", ir::DType::kFloat64, {1}, std::string(8, '\0')));
  EXPECT_EQ(checkMsg(makeSpec("ConstantOfShape", {i64({1})}, {{ir::DType::kFloat64, {3}}},
                              {{"value", f64}})),
            "node 'n0' (ConstantOfShape): attribute 'value' has dtype f64; the CPU kernel "
            "supports f32, i32, i64 or bool");
  ir::Attribute seven(ir::TensorData::fromInt64s("v", {1}, {7}));
  EXPECT_EQ(checkMsg(makeSpec("ConstantOfShape", {i64({1})}, {f32({3})}, {{"value", seven}})),
            "node 'n0' (ConstantOfShape): output 0 has dtype f32; the CPU kernel supports i64");
  ir::Attribute two(ir::TensorData::fromInt64s("v", {2}, {7, 8}));
  EXPECT_EQ(checkMsg(makeSpec("ConstantOfShape", {i64({1})}, {i64({3})}, {{"value", two}})),
            "node 'n0' (ConstantOfShape): attribute 'value' must hold exactly one element, got 2");
  EXPECT_EQ(checkMsg(makeSpec("ConstantOfShape", {i64({2})}, {f32({3})})),
            "node 'n0' (ConstantOfShape): output f32[3] has rank 1 but the shape input has 2 "
            "entries");
}

TEST(CpuSpaceDepth, DepthToSpaceModesAndSpaceToDepthInverse) {
  // x: (1, 8, 2, 3) holding 0..47; b = 2. Reference: the operator text's reshape + transpose.
  const std::vector<int64_t> xs = {1, 8, 2, 3};
  Buf<float> x(48);
  for (size_t i = 0; i < 48; ++i)
    x[i] = static_cast<float>(i);
  auto ref = [&](bool crd) {
    // DCR: (n, b, b, c', h, w) -> (n, c', h, b, w, b); CRD: (n, c', b, b, h, w) -> same.
    std::vector<float> out(48);
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t w = 0; w < 3; ++w)
            for (int64_t j = 0; j < 2; ++j) {
              int64_t ch = crd ? c * 4 + i * 2 + j : (i * 2 + j) * 2 + c;
              int64_t o = ((c * 4 + h * 2 + i) * 6) + w * 2 + j;
              out[static_cast<size_t>(o)] = x[static_cast<size_t>((ch * 2 + h) * 3 + w)];
            }
    return out;
  };
  for (bool crd : {false, true}) {
    SCOPED_TRACE(crd ? "CRD" : "DCR");
    Buf<float> y(48);
    runKernel(makeSpec("DepthToSpace", {f32(xs)}, {f32({1, 2, 4, 6})},
                       {{"blocksize", ir::Attribute(int64_t{2})},
                        {"mode", ir::Attribute(crd ? "CRD" : "DCR")}}),
              {x.data()}, {y.data()});
    EXPECT_EQ(y.vec(), ref(crd));
    if (crd)
      continue;
    // SpaceToDepth undoes DCR.
    Buf<float> back(48);
    runKernel(makeSpec("SpaceToDepth", {f32({1, 2, 4, 6})}, {f32(xs)},
                       {{"blocksize", ir::Attribute(int64_t{2})}}),
              {y.data()}, {back.data()});
    EXPECT_EQ(back.vec(), x.vec());
  }
  EXPECT_NE(checkKernel(makeSpec("SpaceToDepth", {f32({1, 2, 3, 4})}, {f32({1, 8, 1, 2})},
                                 {{"blocksize", ir::Attribute(int64_t{2})}}))
                .message()
                .find("does not divide into blocks of 2"),
            std::string::npos);
}

} // namespace
} // namespace dtc::ops::cpu::test
