// Tests of the CPU Resize kernel: each mode, nearest rounding and coordinate transform against
// values computed with onnx.reference (onnx 1.23, ReferenceEvaluator on Resize-19) and pasted
// here as literals; scales and sizes inputs, axes, keep_aspect_ratio_policy, errors.
#include "tests/unit/cpu/KernelTestUtil.h"

namespace dtc::ops::cpu::test {
namespace {

using ir::Attribute;

const std::vector<float> kX22 = {1, 2, 3, 4};
std::vector<float> x44() {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  return v;
}

struct Case {
  std::vector<float> x;
  std::vector<int64_t> xShape;
  std::vector<float> scales;  // empty: sizes given
  std::vector<int64_t> sizes; // empty: scales given
  std::map<std::string, Attribute> attrs;
  std::vector<int64_t> yShape;
  std::vector<float> want;
};

/// Runs Resize with scales (omitted sizes) or sizes (an empty roi and scales before it).
void check(const Case &c) {
  Buf<float> x(c.x), y(static_cast<size_t>(count(c.yShape)));
  Buf<float> scales(c.scales);
  Buf<int64_t> sizes(c.sizes);
  KernelSpec spec;
  if (!c.scales.empty()) {
    spec = makeSpec("Resize",
                    {f32(c.xShape), TensorDesc{}, f32({static_cast<int64_t>(c.scales.size())})},
                    {f32(c.yShape)}, c.attrs);
    runKernel(spec, {x.data(), nullptr, scales.data()}, {y.data()});
  } else {
    spec = makeSpec(
        "Resize", {f32(c.xShape), f32({0}), f32({0}), i64({static_cast<int64_t>(c.sizes.size())})},
        {f32(c.yShape)}, c.attrs);
    runKernel(spec, {x.data(), nullptr, nullptr, sizes.data()}, {y.data()});
  }
  expectNear(y.data(), c.want, 1e-5);
}

std::map<std::string, Attribute> attrs(const std::string &mode, const std::string &transform,
                                       const std::string &nearest = "round_prefer_floor") {
  return {{"mode", Attribute(mode)},
          {"coordinate_transformation_mode", Attribute(transform)},
          {"nearest_mode", Attribute(nearest)}};
}

TEST(ResizeLinear, Upsample2x2To4x4) {
  check({kX22,
         {1, 1, 2, 2},
         {1, 1, 2, 2},
         {},
         attrs("linear", "half_pixel"),
         {1, 1, 4, 4},
         {1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f,
          4}});
  check({kX22,
         {1, 1, 2, 2},
         {1, 1, 2, 2},
         {},
         attrs("linear", "align_corners"),
         {1, 1, 4, 4},
         {1, 1.33333337f, 1.66666663f, 2, 1.66666663f, 2, 2.33333325f, 2.66666675f, 2.33333325f,
          2.66666675f, 3, 3.33333325f, 3, 3.33333325f, 3.66666675f, 4}});
  check({kX22,
         {1, 1, 2, 2},
         {1, 1, 2, 2},
         {},
         attrs("linear", "asymmetric"),
         {1, 1, 4, 4},
         {1, 1.5f, 2, 2, 2, 2.5f, 3, 3, 3, 3.5f, 4, 4, 3, 3.5f, 4, 4}});
}

TEST(ResizeLinear, Downsample) {
  check({x44(),
         {1, 1, 4, 4},
         {},
         {1, 1, 3, 1},
         attrs("linear", "pytorch_half_pixel"),
         {1, 1, 3, 1},
         {1.66666663f, 7, 12.333333f}});
  check({x44(),
         {1, 1, 4, 4},
         {1, 1, 0.6f, 0.6f},
         {},
         attrs("linear", "half_pixel"),
         {1, 1, 2, 2},
         {2.66666651f, 4.33333302f, 9.33333302f, 10.999999f}});
  check({x44(),
         {1, 1, 4, 4},
         {1, 1, 0.6f, 0.6f},
         {},
         attrs("linear", "half_pixel_symmetric"),
         {1, 1, 2, 2},
         {4.33333349f, 6, 11, 12.666666f}});
  check({x44(),
         {1, 1, 4, 4},
         {},
         {1, 1, 3, 3},
         attrs("linear", "half_pixel"),
         {1, 1, 3, 3},
         {1.83333337f, 3.16666675f, 4.5f, 7.16666651f, 8.5f, 9.83333302f, 12.5f, 13.833333f,
          15.166667f}});
}

TEST(ResizeLinear, LastAxisOfRank3) {
  check({{1, 2, 4, 0, 10, 20},
         {1, 2, 3},
         {1, 1, 2},
         {},
         attrs("linear", "half_pixel"),
         {1, 2, 6},
         {1, 1.25f, 1.75f, 2.5f, 3.5f, 4, 0, 2.5f, 7.5f, 12.5f, 17.5f, 20}});
}

TEST(ResizeNearest, RoundingModes) {
  // asymmetric x / 2 hits .5 exactly on odd x: prefer_floor and prefer_ceil differ.
  check({kX22,
         {1, 1, 2, 2},
         {1, 1, 2, 2},
         {},
         attrs("nearest", "asymmetric", "round_prefer_floor"),
         {1, 1, 4, 4},
         {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}});
  check({kX22,
         {1, 1, 2, 2},
         {1, 1, 2, 2},
         {},
         attrs("nearest", "asymmetric", "round_prefer_ceil"),
         {1, 1, 4, 4},
         {1, 2, 2, 2, 3, 4, 4, 4, 3, 4, 4, 4, 3, 4, 4, 4}});
  check({kX22,
         {1, 1, 2, 2},
         {1, 1, 3, 3},
         {},
         attrs("nearest", "half_pixel", "floor"),
         {1, 1, 6, 6},
         {1, 1, 1, 1, 2, 2, 1, 1, 1, 1, 2, 2, 1, 1, 1, 1, 2, 2,
          1, 1, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 3, 3, 3, 3, 4, 4}});
  check({kX22,
         {1, 1, 2, 2},
         {1, 1, 3, 3},
         {},
         attrs("nearest", "half_pixel", "ceil"),
         {1, 1, 6, 6},
         {1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 2, 2, 3, 3, 4, 4, 4, 4,
          3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 4, 4}});
}

TEST(ResizeNearest, DownscaleAndTransforms) {
  // half_pixel 4 -> 2: x_original = 2x + 0.5, a tie on every output index.
  check({x44(),
         {1, 1, 4, 4},
         {1, 1, 0.5f, 0.5f},
         {},
         attrs("nearest", "half_pixel", "round_prefer_ceil"),
         {1, 1, 2, 2},
         {6, 8, 14, 16}});
  check({x44(),
         {1, 1, 4, 4},
         {1, 1, 0.5f, 0.5f},
         {},
         attrs("nearest", "half_pixel", "round_prefer_floor"),
         {1, 1, 2, 2},
         {1, 3, 9, 11}});
  check({kX22,
         {1, 1, 2, 2},
         {},
         {1, 1, 3, 5},
         attrs("nearest", "align_corners"),
         {1, 1, 3, 5},
         {1, 1, 1, 2, 2, 1, 1, 1, 2, 2, 3, 3, 3, 4, 4}});
  // tf_half_pixel_for_nn (Resize-11): x_original = (x + 0.5) / scale; values from that formula.
  check({{1, 2, 3, 4},
         {4},
         {1.5f},
         {},
         attrs("nearest", "tf_half_pixel_for_nn"),
         {6},
         {1, 2, 3, 3, 4, 4}});
  check({{1, 2, 3, 4}, {4}, {0.5f}, {}, attrs("nearest", "tf_half_pixel_for_nn"), {2}, {2, 4}});
}

TEST(ResizeNearest, ChannelAxisAxesAttributeAndAspectPolicy) {
  check({{1, 2, 3, 4},
         {1, 2, 1, 2},
         {1, 2, 1, 1},
         {},
         attrs("nearest", "half_pixel"),
         {1, 4, 1, 2},
         {1, 2, 1, 2, 3, 4, 3, 4}});
  auto a = attrs("nearest", "half_pixel");
  a["axes"] = Attribute(std::vector<int64_t>{2, 3});
  a["keep_aspect_ratio_policy"] = Attribute(std::string("not_larger"));
  check({kX22,
         {1, 1, 2, 2},
         {},
         {4, 6},
         a,
         {1, 1, 4, 4},
         {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}});
}

TEST(ResizeNearest, Int64Data) {
  Buf<int64_t> x(std::vector<int64_t>{10, 20, 30}), y(6);
  Buf<float> scales(std::vector<float>{2.0f});
  KernelSpec spec = makeSpec("Resize", {i64({3}), TensorDesc{}, f32({1})}, {i64({6})},
                             attrs("nearest", "asymmetric", "floor"));
  runKernel(spec, {x.data(), nullptr, scales.data()}, {y.data()});
  EXPECT_EQ(y.vec(), (std::vector<int64_t>{10, 10, 20, 20, 30, 30}));
}

TEST(ResizeErrors, CheckAndRun) {
  KernelSpec spec = makeSpec("Resize", {f32({1, 1, 2, 2}), TensorDesc{}, f32({4})},
                             {f32({1, 1, 4, 4})}, attrs("cubic", "half_pixel"));
  auto expectCheck = [&](const std::string &part) {
    Status st = checkKernel(spec);
    ASSERT_FALSE(st.isOk()) << part;
    EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
  };
  expectCheck("mode=cubic is not supported by the CPU kernel");
  spec.attrs = attrs("linear", "tf_crop_and_resize");
  expectCheck("tf_crop_and_resize is not supported");
  spec.attrs = attrs("linear", "half_pixel");
  spec.attrs["antialias"] = Attribute(int64_t(1));
  expectCheck("antialias=1 is not supported");
  spec.attrs = attrs("linear", "half_pixel");
  spec.attrs["exclude_outside"] = Attribute(int64_t(1));
  expectCheck("exclude_outside=1 is not supported");
  spec.attrs = attrs("linear", "half_pixel");
  spec.inputs[0].dtype = ir::DType::kInt64;
  spec.outputs[0].dtype = ir::DType::kInt64;
  expectCheck("input 0 has dtype i64; the CPU kernel supports f32");
  spec.inputs[0].dtype = spec.outputs[0].dtype = ir::DType::kFloat32;
  spec.inputs[2] = f32({0});
  expectCheck("exactly one of scales (input 2) and sizes (input 3) must be given");
  spec.inputs[2] = f32({3});
  expectCheck("scales [3] must have one value per resized axis (4)");
  spec.inputs[2] = f32({4});
  ASSERT_TRUE(checkKernel(spec).isOk()) << checkKernel(spec).message();

  // Run time: scales that do not give the plan's shape.
  CpuContext ctx;
  auto k = createKernel(spec, ctx);
  ASSERT_TRUE(k.hasValue()) << k.status().message();
  Buf<float> x(4), y(16), scales(std::vector<float>{1, 1, 3, 2});
  std::vector<const void *> ins = {x.data(), nullptr, scales.data()};
  std::vector<void *> outs = {y.data()};
  Status st = (*k)->run({ins.data(), ins.size(), outs.data(), outs.size()});
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("node 'n0' (Resize): scale 3.000000 on axis 2 gives size 6"),
            std::string::npos)
      << st.message();
  scales[2] = -2;
  st = (*k)->run({ins.data(), ins.size(), outs.data(), outs.size()});
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("scales must be positive"), std::string::npos) << st.message();
}

} // namespace
} // namespace dtc::ops::cpu::test
