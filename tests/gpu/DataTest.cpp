// The CUDA data-movement kernels against the CPU ones on random inputs (ops/cuda/Data.cu,
// ops/cuda/Index.cu): the shapes the bundled models use (gpt_train's embeddings, head transposes,
// causal mask; unet_train's skip concatenations and bilinear upsampling) and edge shapes (odd
// sizes, size-1 and empty dims, negative steps and indices), plus the data-dependent error sites
// (an index out of range, Slice arguments that disagree with the plan). Skipped without a GPU.
#include "tests/gpu/GpuTestUtil.h"

#include "ops/cuda/CudaKernel.h"
#include "ops/kernel/Target.h"

#include "compiler/ir/TensorData.h"

#include <cstring>

namespace dtc::gputest {
namespace {

Fill values64(const std::vector<int64_t> &v) { return Fill{0, 0, bytesOf(v)}; }

/// Runs `spec` on the GPU and returns the error the device reported at synchronization (empty
/// when none); the kernel's run itself must succeed (data errors are not known before).
std::string cudaRunError(const ops::KernelSpec &spec, const std::vector<HostTensor> &in) {
  auto ctx = ops::cuda::CudaContext::create(0);
  if (!ctx.hasValue())
    return "context: " + ctx.status().message();
  auto kernel = ops::cuda::createKernel(spec, **ctx);
  if (!kernel.hasValue())
    return "kernel: " + kernel.status().message();
  std::vector<ops::cuda::DeviceBuffer> bufs;
  auto alloc = [&](const std::string &bytes) -> void * {
    void *p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes.size(), 1)) != cudaSuccess)
      return nullptr;
    bufs.emplace_back(p);
    if (!bytes.empty())
      cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
    return p;
  };
  std::vector<const void *> ins;
  for (const HostTensor &t : in)
    ins.push_back(t.desc.present() ? alloc(t.bytes) : nullptr);
  std::vector<void *> outs;
  for (const ops::TensorDesc &d : spec.outputs)
    outs.push_back(alloc(std::string(static_cast<size_t>(d.byteSize()), '\0')));
  // The pageable uploads complete before the kernel's non-blocking stream reads them.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Status s = (*kernel)->run({ins.data(), ins.size(), outs.data(), outs.size()});
  EXPECT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(cudaStreamSynchronize((*ctx)->stream()), cudaSuccess);
  Status errors = (*ctx)->checkErrors();
  return errors.isOk() ? std::string() : errors.message();
}

// ---- Transpose ---------------------------------------------------------------------------------

void transposeCase(const std::vector<int64_t> &in, const std::vector<int64_t> &perm,
                   ir::DType dtype = ir::DType::kFloat32) {
  std::vector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(in[static_cast<size_t>(p)]);
  ops::KernelSpec spec = makeSpec("Transpose", {in}, {out}, dtype);
  spec.attrs["perm"] = perm;
  expectParity(spec, {range(-100, 100)});
}

TEST(CudaData, TransposeModelShapes) {
  transposeCase({96, 32}, {1, 0});             // gpt: qkv weight
  transposeCase({8, 16, 2, 16}, {0, 2, 1, 3}); // gpt: split heads
  transposeCase({8, 2, 16, 16}, {0, 1, 3, 2}); // gpt: K^T, batched tiles
  transposeCase({8, 2, 16, 16}, {0, 2, 1, 3}); // gpt: merge heads
}

TEST(CudaData, TransposeEdgeShapes) {
  transposeCase({33, 17}, {1, 0});                             // partial tiles
  transposeCase({1000, 3}, {1, 0}, ir::DType::kInt64);         // 8-byte tiles
  transposeCase({3, 70, 45}, {0, 2, 1}, ir::DType::kInt32);    // batched, odd
  transposeCase({2, 3, 4, 5}, {3, 1, 0, 2}, ir::DType::kBool); // general, 1 byte
  transposeCase({4, 1, 5}, {2, 1, 0});
  transposeCase({0, 4}, {1, 0}); // empty
  transposeCase({7}, {0});
}

// ---- Slice, SliceGrad --------------------------------------------------------------------------

void sliceCase(const std::vector<int64_t> &in, const std::vector<int64_t> &out,
               const std::vector<int64_t> &starts, const std::vector<int64_t> &ends,
               const std::vector<int64_t> &axes, const std::vector<int64_t> &steps,
               ir::DType indexType = ir::DType::kInt64) {
  const int64_t n = static_cast<int64_t>(starts.size());
  std::vector<std::vector<int64_t>> shapes = {in, {n}, {n}, {n}};
  if (!steps.empty())
    shapes.push_back({n});
  ops::KernelSpec spec = makeSpec("Slice", shapes, {out});
  for (size_t i = 1; i < spec.inputs.size(); ++i)
    spec.inputs[i].dtype = indexType;
  auto idx = [&](const std::vector<int64_t> &v) {
    if (indexType == ir::DType::kInt64)
      return values64(v);
    std::vector<int32_t> narrow(v.begin(), v.end());
    return Fill{0, 0, bytesOf(narrow)};
  };
  std::vector<Fill> fills = {Fill{}, idx(starts), idx(ends), idx(axes)};
  if (!steps.empty())
    fills.push_back(idx(steps));
  expectParity(spec, fills);
}

TEST(CudaData, Slice) {
  sliceCase({1, 1, 32, 32}, {1, 1, 16, 16}, {0, 0}, {16, 16}, {2, 3}, {}); // gpt: causal mask
  sliceCase({5, 7}, {3, 2}, {-1, 1}, {-100, 5}, {0, 1}, {-2, 3});
  sliceCase({5, 7}, {3, 2}, {-1, 1}, {-100, 5}, {0, -1}, {-2, 3}, ir::DType::kInt32);
  sliceCase({6, 3}, {6, 3}, {INT64_MAX}, {INT64_MIN}, {0}, {-1}); // reversed
  sliceCase({4, 0, 3}, {2, 0, 3}, {1}, {3}, {0}, {});             // empty
}

TEST(CudaData, SliceArgumentsThatDisagreeWithThePlanAreAnError) {
  DTC_REQUIRE_GPU();
  ops::KernelSpec spec = makeSpec("Slice", {{4, 6}, {1}, {1}, {1}}, {{2, 6}});
  for (size_t i = 1; i < 4; ++i)
    spec.inputs[i].dtype = ir::DType::kInt64;
  std::vector<HostTensor> in =
      randomInputs(spec, 3, {Fill{}, values64({0}), values64({3}), values64({0})});
  const std::string error = cudaRunError(spec, in);
  EXPECT_NE(error.find("do not give the output shape"), std::string::npos) << error;
  EXPECT_NE(error.find("test_Slice"), std::string::npos) << error;
}

TEST(CudaData, SliceGrad) {
  ops::KernelSpec spec = makeSpec("SliceGrad", {{2, 3}}, {{5, 7}}, ir::DType::kFloat32, "ai.dtc");
  spec.attrs["starts"] = std::vector<int64_t>{1, 6};
  spec.attrs["steps"] = std::vector<int64_t>{2, -2};
  expectParity(spec);
  ops::KernelSpec mask =
      makeSpec("SliceGrad", {{1, 1, 16, 16}}, {{1, 1, 32, 32}}, ir::DType::kFloat32, "ai.dtc");
  mask.attrs["starts"] = std::vector<int64_t>{0, 0, 0, 0};
  mask.attrs["steps"] = std::vector<int64_t>{1, 1, 1, 1};
  expectParity(mask);
}

// ---- Concat, Split -----------------------------------------------------------------------------

TEST(CudaData, Concat) {
  ops::KernelSpec unet =
      makeSpec("Concat", {{8, 32, 32, 32}, {8, 16, 32, 32}}, {{8, 48, 32, 32}}); // unet: dec1
  unet.attrs["axis"] = int64_t{1};
  expectParity(unet);
  ops::KernelSpec last = makeSpec("Concat", {{3, 5}, {3, 0}, {3, 2}, {3, 1}}, {{3, 8}},
                                  ir::DType::kInt64); // an empty input, odd widths
  last.attrs["axis"] = int64_t{-1};
  expectParity(last, {range(-9, 9), Fill{}, range(-9, 9), range(-9, 9)});
  ops::KernelSpec first = makeSpec("Concat", {{1, 3}, {2, 3}}, {{3, 3}}, ir::DType::kBool);
  first.attrs["axis"] = int64_t{0};
  expectParity(first);
}

TEST(CudaData, Split) {
  ops::KernelSpec qkv =
      makeSpec("Split", {{8, 16, 96}, {3}}, {{8, 16, 32}, {8, 16, 32}, {8, 16, 32}});
  qkv.inputs[1].dtype = ir::DType::kInt64;
  qkv.attrs["axis"] = int64_t{2};
  expectParity(qkv, {Fill{}, values64({32, 32, 32})}); // gpt: qkv
  ops::KernelSpec grad =
      makeSpec("Split", {{8, 48, 32, 32}, {2}}, {{8, 32, 32, 32}, {8, 16, 32, 32}});
  grad.inputs[1].dtype = ir::DType::kInt64;
  grad.attrs["axis"] = int64_t{1};
  expectParity(grad, {Fill{}, values64({32, 16})}); // unet: Concat's gradient
  ops::KernelSpec odd = makeSpec("Split", {{5, 7}}, {{5, 3}, {5, 0}, {5, 4}}, ir::DType::kInt32);
  odd.attrs["axis"] = int64_t{1};
  expectParity(odd, {range(-50, 50)});
}

// ---- Expand, Tile, Where -----------------------------------------------------------------------

void expandCase(const std::vector<int64_t> &in, const std::vector<int64_t> &out,
                ir::DType dtype = ir::DType::kFloat32) {
  ops::KernelSpec spec = makeSpec("Expand", {in, {static_cast<int64_t>(out.size())}}, {out}, dtype);
  spec.inputs[1].dtype = ir::DType::kInt64;
  expectParity(spec, {range(-100, 100), values64(out)});
}

TEST(CudaData, Expand) {
  expandCase({1, 1, 16, 16}, {8, 2, 16, 16}); // gpt: the mask over batch and heads
  expandCase({3, 1}, {2, 3, 4}, ir::DType::kBool);
  expandCase({}, {5, 3}, ir::DType::kInt64);
  expandCase({4, 5}, {4, 5});
}

TEST(CudaData, Tile) {
  ops::KernelSpec spec = makeSpec("Tile", {{2, 3, 1}, {3}}, {{4, 9, 2}});
  spec.inputs[1].dtype = ir::DType::kInt64;
  expectParity(spec, {Fill{}, values64({2, 3, 2})});
  ops::KernelSpec ints = makeSpec("Tile", {{5}, {1}}, {{15}}, ir::DType::kInt64);
  ints.inputs[1].dtype = ir::DType::kInt64;
  expectParity(ints, {range(-9, 9), values64({3})});
}

void whereCase(const std::vector<int64_t> &c, const std::vector<int64_t> &x,
               const std::vector<int64_t> &y, const std::vector<int64_t> &out,
               ir::DType dtype = ir::DType::kFloat32) {
  ops::KernelSpec spec = makeSpec("Where", {c, x, y}, {out}, dtype);
  spec.inputs[0].dtype = ir::DType::kBool;
  expectParity(spec, {Fill{}, range(-100, 100), range(-100, 100)});
}

TEST(CudaData, Where) {
  whereCase({1, 1, 16, 16}, {8, 2, 16, 16}, {}, {8, 2, 16, 16}); // gpt: masked scores
  whereCase({1, 1, 16, 16}, {}, {8, 2, 16, 16}, {8, 2, 16, 16}); // and its gradient
  whereCase({3, 1}, {1, 4}, {3, 4}, {3, 4}, ir::DType::kInt64);
  whereCase({5}, {5}, {5}, {5}, ir::DType::kBool);
  whereCase({2, 1, 3}, {4, 1}, {1}, {2, 4, 3}, ir::DType::kInt32);
  whereCase({3, 0}, {1}, {3, 1}, {3, 0}); // empty: a launch of at least one block
}

// ---- Cast, CastLike ----------------------------------------------------------------------------

void castCase(ir::DType from, ir::DType to, const Fill &fill, int64_t n = 1001) {
  ops::KernelSpec spec = makeSpec("Cast", {{n}}, {{n}}, from);
  spec.outputs[0].dtype = to;
  spec.attrs["to"] = static_cast<int64_t>(to);
  expectParity(spec, {fill});
}

TEST(CudaData, Cast) {
  castCase(ir::DType::kFloat32, ir::DType::kInt32, range(-1e3, 1e3));
  castCase(ir::DType::kFloat32, ir::DType::kInt64, range(-1e3, 1e3));
  castCase(ir::DType::kInt64, ir::DType::kFloat32, range(-1e6, 1e6));
  castCase(ir::DType::kInt32, ir::DType::kInt64, range(-1e6, 1e6));
  castCase(ir::DType::kFloat32, ir::DType::kBool, range(-1, 2));
  castCase(ir::DType::kBool, ir::DType::kFloat32, Fill{});
  castCase(ir::DType::kFloat64, ir::DType::kFloat32, range(-1e10, 1e10));
  castCase(ir::DType::kInt64, ir::DType::kBool, range(-2, 3));
  // Special values: NaN, infinities, out of range, negative zero.
  const std::vector<float> special = {NAN, INFINITY, -INFINITY, 3e9f, -3e9f, -0.0f, 2.5f, -2.5f};
  castCase(ir::DType::kFloat32, ir::DType::kInt32, Fill{0, 0, bytesOf(special)}, 8);
  castCase(ir::DType::kFloat32, ir::DType::kInt64, Fill{0, 0, bytesOf(special)}, 8);
  castCase(ir::DType::kFloat32, ir::DType::kBool, Fill{0, 0, bytesOf(special)}, 8);
}

TEST(CudaData, CastLike) {
  ops::KernelSpec spec = makeSpec("CastLike", {{4, 5}, {1}}, {{4, 5}});
  spec.inputs[1].dtype = ir::DType::kInt64;
  spec.outputs[0].dtype = ir::DType::kInt64;
  expectParity(spec, {range(-50, 50)});
}

// ---- Gather, GatherGrad, GatherElements, GatherElementsGrad ------------------------------------

TEST(CudaData, Gather) {
  ops::KernelSpec tok = makeSpec("Gather", {{64, 32}, {8, 16}}, {{8, 16, 32}}); // gpt: tokens
  tok.inputs[1].dtype = ir::DType::kInt64;
  expectParity(tok, {Fill{}, range(0, 64)});
  ops::KernelSpec pos = makeSpec("Gather", {{16, 32}, {16}}, {{16, 32}}); // gpt: positions
  pos.inputs[1].dtype = ir::DType::kInt64;
  expectParity(pos, {Fill{}, range(0, 16)});
  // Axis 1, int32 and negative indices, an i64 table.
  ops::KernelSpec mid = makeSpec("Gather", {{3, 7, 5}, {2, 4}}, {{3, 2, 4, 5}}, ir::DType::kInt64);
  mid.inputs[1].dtype = ir::DType::kInt32;
  mid.attrs["axis"] = int64_t{-2};
  expectParity(mid, {range(-99, 99), range(-7, 7)});
  ops::KernelSpec scalar = makeSpec("Gather", {{6, 3}, {}}, {{3}});
  scalar.inputs[1].dtype = ir::DType::kInt64;
  expectParity(scalar, {Fill{}, range(-6, 6)});
}

TEST(CudaData, GatherIndexOutOfRangeIsAnError) {
  DTC_REQUIRE_GPU();
  ops::KernelSpec spec = makeSpec("Gather", {{4, 3}, {2}}, {{2, 3}});
  spec.inputs[1].dtype = ir::DType::kInt64;
  std::vector<HostTensor> in = randomInputs(spec, 3, {Fill{}, values64({1, 4})});
  const std::string error = cudaRunError(spec, in);
  EXPECT_NE(error.find("index is out of range for axis 0 of size 4"), std::string::npos) << error;
  ops::KernelSpec grad =
      makeSpec("GatherGrad", {{2, 3}, {2}}, {{4, 3}}, ir::DType::kFloat32, "ai.dtc");
  grad.inputs[1].dtype = ir::DType::kInt64;
  in = randomInputs(grad, 3, {Fill{}, values64({-5, 0})});
  const std::string gradError = cudaRunError(grad, in);
  EXPECT_NE(gradError.find("out of range"), std::string::npos) << gradError;
}

TEST(CudaData, GatherGrad) {
  // gpt: the token embedding's gradient; 128 indices into 64 rows repeat (scatter-add).
  ops::KernelSpec tok =
      makeSpec("GatherGrad", {{8, 16, 32}, {8, 16}}, {{64, 32}}, ir::DType::kFloat32, "ai.dtc");
  tok.inputs[1].dtype = ir::DType::kInt64;
  tok.attrs["shape"] = std::vector<int64_t>{64, 32};
  expectParity(tok, {Fill{}, range(0, 64)}, 1e-4, 1e-5);
  ops::KernelSpec mid =
      makeSpec("GatherGrad", {{3, 2, 4, 5}, {2, 4}}, {{3, 7, 5}}, ir::DType::kFloat32, "ai.dtc");
  mid.inputs[1].dtype = ir::DType::kInt32;
  mid.attrs["axis"] = int64_t{1};
  expectParity(mid, {Fill{}, range(-7, 7)});
}

TEST(CudaData, GatherElementsAndGrad) {
  ops::KernelSpec spec = makeSpec("GatherElements", {{4, 5}, {4, 3}}, {{4, 3}});
  spec.inputs[1].dtype = ir::DType::kInt64;
  spec.attrs["axis"] = int64_t{1};
  expectParity(spec, {Fill{}, range(-5, 5)});
  ops::KernelSpec rows =
      makeSpec("GatherElements", {{3, 4, 2}, {5, 4, 2}}, {{5, 4, 2}}, ir::DType::kInt32);
  rows.inputs[1].dtype = ir::DType::kInt32;
  expectParity(rows, {range(-9, 9), range(0, 3)});
  ops::KernelSpec grad = makeSpec("GatherElementsGrad", {{5, 4, 2}, {5, 4, 2}}, {{3, 4, 2}},
                                  ir::DType::kFloat32, "ai.dtc");
  grad.inputs[1].dtype = ir::DType::kInt64;
  expectParity(grad, {Fill{}, range(-3, 3)});
}

// ---- Resize, ResizeGrad, Pad -------------------------------------------------------------------

ops::KernelSpec resizeSpec(const std::vector<int64_t> &in, const std::vector<int64_t> &out,
                           const std::string &mode, const std::string &transform, bool sizes) {
  const int64_t k = static_cast<int64_t>(in.size());
  ops::KernelSpec spec = sizes ? makeSpec("Resize", {in, {0}, {0}, {k}}, {out})
                               : makeSpec("Resize", {in, {0}, {k}}, {out});
  spec.inputs[1].dtype = ir::DType::kUndefined;
  if (sizes) {
    spec.inputs[2].dtype = ir::DType::kUndefined;
    spec.inputs[3].dtype = ir::DType::kInt64;
  }
  spec.attrs["mode"] = mode;
  spec.attrs["coordinate_transformation_mode"] = transform;
  spec.attrs["nearest_mode"] = std::string("floor");
  return spec;
}

TEST(CudaData, Resize) {
  // unet: bilinear x2 upsampling of the bottleneck.
  ops::KernelSpec unet =
      resizeSpec({8, 32, 16, 16}, {8, 32, 32, 32}, "linear", "half_pixel", false);
  expectParity(unet, {Fill{}, Fill{}, Fill{0, 0, bytesOf(std::vector<float>{1, 1, 2, 2})}});
  ops::KernelSpec align = resizeSpec({1, 2, 5, 7}, {1, 2, 3, 11}, "linear", "align_corners", true);
  expectParity(align, {Fill{}, Fill{}, Fill{}, values64({1, 2, 3, 11})});
  ops::KernelSpec nearest = resizeSpec({2, 3, 4, 4}, {2, 3, 8, 12}, "nearest", "asymmetric", false);
  expectParity(nearest, {Fill{}, Fill{}, Fill{0, 0, bytesOf(std::vector<float>{1, 1, 2, 3})}});
  ops::KernelSpec ints = resizeSpec({1, 1, 5, 3}, {1, 1, 3, 7}, "nearest", "half_pixel", true);
  ints.inputs[0].dtype = ints.outputs[0].dtype = ir::DType::kInt64;
  expectParity(ints, {range(-9, 9), Fill{}, Fill{}, values64({1, 1, 3, 7})});
}

TEST(CudaData, ResizeScalesThatDisagreeWithThePlanAreAnError) {
  DTC_REQUIRE_GPU();
  ops::KernelSpec spec = resizeSpec({1, 1, 4, 4}, {1, 1, 8, 8}, "linear", "half_pixel", false);
  std::vector<HostTensor> in =
      randomInputs(spec, 3, {Fill{}, Fill{}, Fill{0, 0, bytesOf(std::vector<float>{1, 1, 3, 2})}});
  const std::string error = cudaRunError(spec, in);
  EXPECT_NE(error.find("do not give the output shape"), std::string::npos) << error;
}

TEST(CudaData, ResizeGrad) {
  ops::KernelSpec unet =
      makeSpec("ResizeGrad", {{8, 32, 32, 32}}, {{8, 32, 16, 16}}, ir::DType::kFloat32, "ai.dtc");
  unet.attrs["mode"] = std::string("linear");
  unet.attrs["coordinate_transformation_mode"] = std::string("half_pixel");
  unet.attrs["nearest_mode"] = std::string("floor");
  unet.attrs["input_shape"] = std::vector<int64_t>{8, 32, 16, 16};
  unet.attrs["scales"] = std::vector<float>{1, 1, 2, 2};
  expectParity(unet, {}, 1e-4, 1e-5);
  ops::KernelSpec nearest =
      makeSpec("ResizeGrad", {{2, 3, 8, 12}}, {{2, 3, 4, 4}}, ir::DType::kFloat32, "ai.dtc");
  nearest.attrs["mode"] = std::string("nearest");
  nearest.attrs["coordinate_transformation_mode"] = std::string("asymmetric");
  nearest.attrs["input_shape"] = std::vector<int64_t>{2, 3, 4, 4};
  expectParity(nearest);
}

TEST(CudaData, Pad) {
  for (const char *mode : {"constant", "reflect", "edge", "wrap"}) {
    ops::KernelSpec spec = makeSpec("Pad", {{2, 3, 5}, {6}, {}}, {{2, 6, 8}});
    spec.inputs[1].dtype = ir::DType::kInt64;
    spec.attrs["mode"] = std::string(mode);
    const float value = 7.5f;
    expectParity(spec, {Fill{}, values64({0, 1, 2, 0, 2, 1}),
                        Fill{0, 0, bytesOf(std::vector<float>{value})}});
  }
  // Axes given (negative), negative pads (cropping), i64 data, no constant value.
  ops::KernelSpec axes = makeSpec("Pad", {{4, 5}, {2}, {}, {1}}, {{4, 3}}, ir::DType::kInt64);
  axes.inputs[1].dtype = ir::DType::kInt64;
  axes.inputs[2].dtype = ir::DType::kUndefined;
  axes.inputs[3].dtype = ir::DType::kInt32;
  expectParity(axes, {range(-9, 9), values64({-1, -1}), Fill{},
                      Fill{0, 0, bytesOf(std::vector<int32_t>{-1})}});
  // An empty output (its pads still checked by the kernel).
  ops::KernelSpec empty = makeSpec("Pad", {{0, 3}, {4}}, {{0, 5}});
  empty.inputs[1].dtype = ir::DType::kInt64;
  expectParity(empty, {Fill{}, values64({0, 1, 0, 1})});
}

// ---- Dropout, Trilu, OneHot, CumSum, ConstantOfShape, Range ------------------------------------

TEST(CudaData, Dropout) {
  ops::KernelSpec inference = makeSpec("Dropout", {{7, 9}, {}, {}}, {{7, 9}, {7, 9}});
  inference.inputs[2].dtype = ir::DType::kBool;
  inference.outputs[1].dtype = ir::DType::kBool;
  expectParity(inference, {Fill{}, Fill{0, 0, bytesOf(std::vector<float>{0.5f})},
                           Fill{0, 0, std::string(1, '\0')}});
  // Training: the CPU's Philox stream, so output and mask match exactly.
  ops::KernelSpec training = makeSpec("DropoutTraining", {{8, 16, 32}, {3}},
                                      {{8, 16, 32}, {8, 16, 32}}, ir::DType::kFloat32, "ai.dtc");
  training.inputs[1].dtype = ir::DType::kInt64;
  training.outputs[1].dtype = ir::DType::kBool;
  training.attrs["ratio"] = 0.1f;
  training.attrs["stream"] = int64_t{2};
  expectParity(training, {Fill{}, values64({(int64_t{3} << 32) + 99, 41, 1})}, 0, 0);
  ops::KernelSpec odd = training;
  odd.inputs[0].shape = odd.outputs[0].shape = odd.outputs[1].shape = {1001};
  expectParity(odd, {Fill{}, values64({5, 0, 0})}, 0, 0);
  ops::KernelSpec grad =
      makeSpec("DropoutGrad", {{1001}, {1001}}, {{1001}}, ir::DType::kFloat32, "ai.dtc");
  grad.inputs[1].dtype = ir::DType::kBool;
  grad.attrs["ratio"] = 0.25f;
  expectParity(grad);
  ops::KernelSpec emptyGrad = grad; // empty: a launch of at least one block
  emptyGrad.inputs[0].shape = emptyGrad.inputs[1].shape = emptyGrad.outputs[0].shape = {0};
  expectParity(emptyGrad);
}

TEST(CudaData, TrainingModeDropoutIsAnErrorInTheInferenceKernel) {
  ops::KernelSpec spec = makeSpec("Dropout", {{4}, {}, {}}, {{4}});
  spec.inputs[2].dtype = ir::DType::kBool;
  DTC_REQUIRE_GPU();
  std::vector<HostTensor> in = randomInputs(
      spec, 3,
      {Fill{}, Fill{0, 0, bytesOf(std::vector<float>{0.5f})}, Fill{0, 0, std::string(1, '\1')}});
  const std::string error = cudaRunError(spec, in);
  EXPECT_NE(error.find("training-mode Dropout"), std::string::npos) << error;
}

TEST(CudaData, Trilu) {
  for (int64_t upper : {0, 1})
    for (int64_t k : {-2, 0, 1, 40}) {
      ops::KernelSpec spec = makeSpec("Trilu", {{3, 5, 7}, {}}, {{3, 5, 7}});
      spec.inputs[1].dtype = ir::DType::kInt64;
      spec.attrs["upper"] = upper;
      expectParity(spec, {Fill{}, values64({k})});
    }
  ops::KernelSpec noK = makeSpec("Trilu", {{16, 16}}, {{16, 16}}, ir::DType::kInt64);
  expectParity(noK, {range(-9, 9)});
  expectParity(makeSpec("Trilu", {{2, 0, 4}}, {{2, 0, 4}})); // empty
}

TEST(CudaData, OneHot) {
  ops::KernelSpec spec = makeSpec("OneHot", {{4, 6}, {}, {2}}, {{4, 6, 10}});
  spec.inputs[0].dtype = ir::DType::kInt64;
  spec.inputs[1].dtype = ir::DType::kInt64;
  expectParity(spec,
               {range(-12, 12), values64({10}), Fill{0, 0, bytesOf(std::vector<float>{-1, 3})}});
  ops::KernelSpec axis0 = makeSpec("OneHot", {{5}, {}, {2}}, {{7, 5}}, ir::DType::kInt64);
  axis0.inputs[0].dtype = ir::DType::kFloat32;
  axis0.inputs[1].dtype = ir::DType::kFloat32;
  axis0.attrs["axis"] = int64_t{0};
  expectParity(axis0,
               {range(-8, 8), Fill{0, 0, bytesOf(std::vector<float>{7.0f})}, values64({0, 1})});
}

TEST(CudaData, CumSum) {
  for (int64_t axis : {0, 1, -1})
    for (int64_t flags : {0, 1, 2, 3}) {
      ops::KernelSpec spec = makeSpec("CumSum", {{6, 5, 7}, {}}, {{6, 5, 7}});
      spec.inputs[1].dtype = ir::DType::kInt64;
      spec.attrs["exclusive"] = flags & 1;
      spec.attrs["reverse"] = (flags >> 1) & 1;
      expectParity(spec, {Fill{}, values64({axis})}, 0, 0); // the CPU's order: exact
    }
  ops::KernelSpec ints = makeSpec("CumSum", {{1000}, {}}, {{1000}}, ir::DType::kInt32);
  expectParity(ints, {range(-99, 99), Fill{0, 0, bytesOf(std::vector<int32_t>{0})}});
}

TEST(CudaData, ConstantOfShapeAndRange) {
  ops::KernelSpec fill = makeSpec("ConstantOfShape", {{3}}, {{2, 3, 5}}, ir::DType::kInt64);
  fill.attrs["value"] = ir::TensorDataPtr(ir::TensorData::fromInt64s("value", {1}, {-7}));
  expectParity(fill, {values64({2, 3, 5})});
  ops::KernelSpec zeros = makeSpec("ConstantOfShape", {{1}}, {{1001}});
  zeros.inputs[0].dtype = ir::DType::kInt64;
  expectParity(zeros, {values64({1001})});
  ops::KernelSpec ints = makeSpec("Range", {{}, {}, {}}, {{5}}, ir::DType::kInt64);
  expectParity(ints, {values64({10}), values64({-3}), values64({-3})});
  ops::KernelSpec floats = makeSpec("Range", {{}, {}, {}}, {{10}});
  expectParity(floats,
               {Fill{0, 0, bytesOf(std::vector<float>{0.1f})},
                Fill{0, 0, bytesOf(std::vector<float>{1.05f})},
                Fill{0, 0, bytesOf(std::vector<float>{0.1f})}},
               0, 0);
}

// ---- GatherND, GatherNDGrad, ScatterND, ScatterElements, DepthToSpace, SpaceToDepth ------------

TEST(CudaData, GatherNDAndGrad) {
  ops::KernelSpec spec = makeSpec("GatherND", {{4, 5, 6}, {3, 2}}, {{3, 6}});
  spec.inputs[1].dtype = ir::DType::kInt64;
  expectParity(spec, {Fill{}, values64({0, 1, -1, -5, 3, 2})});
  ops::KernelSpec batched =
      makeSpec("GatherND", {{2, 5, 6}, {2, 4, 1}}, {{2, 4, 6}}, ir::DType::kInt64);
  batched.attrs["batch_dims"] = int64_t{1};
  expectParity(batched, {range(-9, 9), values64({0, 4, -1, 2, 3, 3, 1, 0})});
  ops::KernelSpec grad =
      makeSpec("GatherNDGrad", {{3, 6}, {3, 2}}, {{4, 5, 6}}, ir::DType::kFloat32, "ai.dtc");
  grad.inputs[1].dtype = ir::DType::kInt64;
  expectParity(grad, {Fill{}, values64({0, 1, 0, 1, 3, 2})}); // a repeated tuple accumulates
}

TEST(CudaData, ScatterND) {
  for (const char *reduction : {"none", "add", "mul", "min", "max"}) {
    ops::KernelSpec spec = makeSpec("ScatterND", {{4, 5, 6}, {3, 2}, {3, 6}}, {{4, 5, 6}});
    spec.inputs[1].dtype = ir::DType::kInt64;
    spec.attrs["reduction"] = std::string(reduction);
    // Repeated tuples only where the reduction makes the result order-free (up to rounding).
    const bool repeat = std::string(reduction) != "none";
    expectParity(spec, {Fill{}, values64({0, 1, repeat ? 0 : 2, 1, 3, -1}), Fill{}});
  }
  ops::KernelSpec ints = makeSpec("ScatterND", {{8}, {3, 1}, {3}}, {{8}}, ir::DType::kInt64);
  ints.attrs["reduction"] = std::string("add");
  expectParity(ints, {range(-9, 9), values64({7, 0, 7}), range(-9, 9)});
}

TEST(CudaData, ScatterElements) {
  for (const char *reduction : {"none", "add", "max"}) {
    ops::KernelSpec spec = makeSpec("ScatterElements", {{3, 5}, {3, 2}, {3, 2}}, {{3, 5}});
    spec.inputs[1].dtype = ir::DType::kInt64;
    spec.attrs["axis"] = int64_t{1};
    spec.attrs["reduction"] = std::string(reduction);
    expectParity(spec, {Fill{}, values64({0, 4, 2, 1, -1, 3}), Fill{}});
  }
  ops::KernelSpec rows =
      makeSpec("ScatterElements", {{4, 3}, {6, 3}, {6, 3}}, {{4, 3}}, ir::DType::kInt32);
  rows.inputs[1].dtype = ir::DType::kInt32;
  rows.attrs["reduction"] = std::string("add");
  expectParity(rows, {range(-9, 9), range(0, 4), range(-9, 9)}); // repeats: integer sums are exact
}

TEST(CudaData, DepthToSpaceAndSpaceToDepth) {
  for (const char *mode : {"DCR", "CRD"}) {
    ops::KernelSpec spec = makeSpec("DepthToSpace", {{2, 12, 3, 5}}, {{2, 3, 6, 10}});
    spec.attrs["blocksize"] = int64_t{2};
    spec.attrs["mode"] = std::string(mode);
    expectParity(spec);
  }
  ops::KernelSpec s2d = makeSpec("SpaceToDepth", {{2, 3, 6, 10}}, {{2, 12, 3, 5}});
  s2d.attrs["blocksize"] = int64_t{2};
  expectParity(s2d);
}

TEST(CudaData, ShapeAndSize) {
  ops::KernelSpec shape = makeSpec("Shape", {{2, 3, 5, 7}}, {{2}});
  shape.outputs[0].dtype = ir::DType::kInt64;
  shape.attrs["start"] = int64_t{1};
  shape.attrs["end"] = int64_t{-1};
  expectParity(shape);
  ops::KernelSpec all = makeSpec("Shape", {{4, 1, 6}}, {{3}});
  all.outputs[0].dtype = ir::DType::kInt64;
  expectParity(all);
  ops::KernelSpec size = makeSpec("Size", {{4, 1, 6}}, {{}});
  size.outputs[0].dtype = ir::DType::kInt64;
  expectParity(size);
}

TEST(CudaData, CumSumAxisAndRangeLengthErrors) {
  ops::KernelSpec cumsum = makeSpec("CumSum", {{4, 5}, {}}, {{4, 5}});
  cumsum.inputs[1].dtype = ir::DType::kInt64;
  ops::KernelSpec range = makeSpec("Range", {{}, {}, {}}, {{5}}, ir::DType::kInt64);
  DTC_REQUIRE_GPU();
  std::string error = cudaRunError(cumsum, randomInputs(cumsum, 3, {Fill{}, values64({2})}));
  EXPECT_NE(error.find("axis input is out of range"), std::string::npos) << error;
  error =
      cudaRunError(range, randomInputs(range, 3, {values64({0}), values64({6}), values64({1})}));
  EXPECT_NE(error.find("do not give the 5 elements"), std::string::npos) << error;
}

} // namespace
} // namespace dtc::gputest
