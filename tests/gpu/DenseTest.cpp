// The dense CUDA kernels (ops/cuda/MatMul.cpp, Conv.cpp, Pool.cpp, Norm.cpp, Softmax.cpp):
//  - without a GPU: the CUDA target's answers for them, the GEMM plans (batch strides, the
//    column-major operand swap) run through a host emulation of cublasSgemmStridedBatched, and
//    the pooling window math of DenseUtil.h run on the host, all against the CPU kernels;
//  - with a GPU: every kernel against the CPU kernel on the bundled models' shapes and edge
//    shapes (broadcast, size-1 and odd dims, empty tensors where the op allows them).
#include "tests/gpu/GpuTestUtil.h"

#include "ops/cuda/DenseUtil.h"
#include "ops/kernel/Target.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

namespace dtc::gputest {
namespace {

using Ints = std::vector<int64_t>;

ops::KernelSpec withAttrs(ops::KernelSpec spec, std::map<std::string, ir::Attribute> attrs) {
  for (auto &[k, v] : attrs)
    spec.attrs[k] = v;
  return spec;
}

std::vector<float> floats(const HostTensor &t) {
  std::vector<float> v(t.bytes.size() / sizeof(float));
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

HostTensor tensorOf(const ops::TensorDesc &d, const std::vector<float> &v) {
  HostTensor t{d, std::string(v.size() * sizeof(float), '\0')};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// ---------------------------------------------------------------------------------------------
// Host checks (no GPU needed)

TEST(CudaDenseTarget, ChecksWithoutAGpu) {
  const ops::Target &t = ops::cudaTarget();
  // Asymmetric pads that cuDNN's begin pad reproduces (the end pad adds nothing) pass...
  ops::KernelSpec ok = withAttrs(makeSpec("Conv", {{1, 2, 6, 6}, {3, 2, 3, 3}}, {{1, 3, 3, 3}}),
                                 {{"pads", Ints{1, 1, 0, 0}}, {"strides", Ints{2, 2}}});
  EXPECT_TRUE(t.checkKernel(ok).isOk()) << t.checkKernel(ok).message();
  // ...those that change the output size are a check error naming cuDNN.
  ops::KernelSpec bad = withAttrs(makeSpec("Conv", {{1, 2, 6, 6}, {3, 2, 3, 3}}, {{1, 3, 5, 5}}),
                                  {{"pads", Ints{0, 0, 1, 1}}});
  Status s = t.checkKernel(bad);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("cannot be expressed by cuDNN"), std::string::npos) << s.message();
  // Synchronized batch norm is not available on the GPU.
  ops::KernelSpec bn =
      withAttrs(makeSpec("BatchNormTraining", {{4, 3, 2, 2}, {3}, {3}, {3}, {3}},
                         {{4, 3, 2, 2}, {3}, {3}, {3}, {3}}, ir::DType::kFloat32, "ai.dtc"),
                {{"sync", int64_t{1}}});
  EXPECT_NE(t.checkKernel(bn).message().find("sync=1"), std::string::npos)
      << t.checkKernel(bn).message();
  bn.attrs.erase("sync");
  EXPECT_TRUE(t.checkKernel(bn).isOk()) << t.checkKernel(bn).message();
  // BatchNormGrad may write dX over dY; Softmax may not run in place.
  ops::KernelSpec bng = makeSpec("BatchNormGrad", {{4, 3, 2, 2}, {4, 3, 2, 2}, {3}, {3}, {3}},
                                 {{4, 3, 2, 2}, {3}, {3}}, ir::DType::kFloat32, "ai.dtc");
  EXPECT_EQ(t.inPlaceInput(bng), 0);
  EXPECT_EQ(t.inPlaceInput(makeSpec("Softmax", {{2, 3}}, {{2, 3}})), -1);
}

/// cublasSgemmStridedBatched on the host (column-major, the kernel's arguments).
void hostGemm(const ops::cuda::GemmPlan &p, const float *a, const float *b, float *y, float beta) {
  ops::cuda::ColumnMajorGemm g = ops::cuda::columnMajor(p);
  for (const ops::cuda::GemmCall &c : p.calls)
    for (int64_t i = 0; i < p.batch; ++i) {
      const float *bi = b + c.b + i * p.strideB, *ai = a + c.a + i * p.strideA;
      float *yi = y + c.y + i * p.m * p.n;
      for (int64_t col = 0; col < g.cols; ++col)
        for (int64_t r = 0; r < g.rows; ++r) {
          double acc = 0;
          for (int64_t k = 0; k < g.depth; ++k) {
            float op1 = g.trans1 ? bi[k + r * g.ld1] : bi[r + k * g.ld1];
            float op2 = g.trans2 ? ai[col + k * g.ld2] : ai[k + col * g.ld2];
            acc += static_cast<double>(op1) * op2;
          }
          float &out = yi[r + col * g.ldy];
          out = static_cast<float>(p.alpha * acc) + (beta == 0.f ? 0.f : beta * out);
        }
    }
}

/// The GEMM plan of `spec` emulated on the host against the CPU kernel (no C).
void expectPlanMatchesCpu(const ops::KernelSpec &spec) {
  SCOPED_TRACE(spec.op + " " + spec.inputs[0].str() + " x " + spec.inputs[1].str());
  ASSERT_TRUE(ops::cudaTarget().checkKernel(spec).isOk())
      << ops::cudaTarget().checkKernel(spec).message();
  std::vector<HostTensor> in = randomInputs(spec, 7);
  std::vector<HostTensor> cpu = runCpu(spec, in);
  std::vector<float> a = floats(in[0]), b = floats(in[1]);
  std::vector<float> y(static_cast<size_t>(spec.outputs[0].numElements()), -777.f);
  // GemmKernel::run: Y = broadcast(C) (beta * C for an empty K), then the product with beta.
  ops::cuda::GemmPlan p = ops::cuda::gemmPlan(spec);
  float beta = 0.f;
  if (p.hasC) {
    std::vector<float> c = floats(in[2]);
    for (size_t i = 0; i < y.size(); ++i)
      y[i] = ops::cuda::broadcastCAt(c.data(), p.n, p.cm, p.cn, p.k == 0 ? p.beta : 1.f,
                                     static_cast<int64_t>(i));
    beta = p.beta;
  } else if (p.k == 0) {
    std::fill(y.begin(), y.end(), 0.f);
  }
  if (p.k > 0)
    hostGemm(p, a.data(), b.data(), y.data(), beta);
  expectClose(spec, {tensorOf(spec.outputs[0], y)}, cpu, 1e-5, 1e-5);
}

TEST(CudaDensePlan, MatMulBatchesMatchCpu) {
  expectPlanMatchesCpu(makeSpec("MatMul", {{3, 5}, {5, 4}}, {{3, 4}}));
  expectPlanMatchesCpu(makeSpec("MatMul", {{8, 16, 32}, {32, 96}}, {{8, 16, 96}}));
  expectPlanMatchesCpu(makeSpec("MatMul", {{8, 4, 16, 8}, {8, 4, 8, 16}}, {{8, 4, 16, 16}}));
  expectPlanMatchesCpu(makeSpec("MatMul", {{2, 1, 3, 5}, {1, 3, 5, 2}}, {{2, 3, 3, 2}}));
  expectPlanMatchesCpu(makeSpec("MatMul", {{3, 1, 2, 4, 3}, {2, 1, 3, 5}}, {{3, 2, 2, 4, 5}}));
  expectPlanMatchesCpu(makeSpec("MatMul", {{5}, {2, 5, 3}}, {{2, 3}}));
  expectPlanMatchesCpu(makeSpec("MatMul", {{2, 3, 5}, {5}}, {{2, 3}}));
  expectPlanMatchesCpu(makeSpec("MatMul", {{7}, {7}}, {{}}));
  expectPlanMatchesCpu(makeSpec("MatMul", {{1, 1}, {1, 1}}, {{1, 1}}));
}

TEST(CudaDensePlan, MatMulTAndGemmMatchCpu) {
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1}) {
      Ints a = ta ? Ints{2, 3, 5, 4} : Ints{2, 3, 4, 5}, b = tb ? Ints{1, 6, 5} : Ints{1, 5, 6};
      expectPlanMatchesCpu(
          withAttrs(makeSpec("MatMulT", {a, b}, {{2, 3, 4, 6}}, ir::DType::kFloat32, "ai.dtc"),
                    {{"transA", ta}, {"transB", tb}, {"alpha", 0.5f}}));
      Ints ga = ta ? Ints{7, 3} : Ints{3, 7}, gb = tb ? Ints{5, 7} : Ints{7, 5};
      expectPlanMatchesCpu(withAttrs(makeSpec("Gemm", {ga, gb}, {{3, 5}}),
                                     {{"transA", ta}, {"transB", tb}, {"alpha", 1.5f}}));
      for (const Ints &c : {Ints{3, 5}, Ints{3, 1}, Ints{1, 5}, Ints{5}, Ints{}})
        expectPlanMatchesCpu(
            withAttrs(makeSpec("Gemm", {ga, gb, c}, {{3, 5}}),
                      {{"transA", ta}, {"transB", tb}, {"alpha", 0.5f}, {"beta", 2.f}}));
    }
  expectPlanMatchesCpu(
      withAttrs(makeSpec("Gemm", {{8, 32}, {10, 32}, {10}}, {{8, 10}}), {{"transB", int64_t{1}}}));
  expectPlanMatchesCpu(
      withAttrs(makeSpec("Gemm", {{3, 0}, {0, 5}, {5}}, {{3, 5}}), {{"beta", 3.f}})); // empty K
  expectPlanMatchesCpu(makeSpec("MatMul", {{3, 0}, {0, 4}}, {{3, 4}}));               // zeros
}

/// The pooling math of DenseUtil.h on the host against the CPU kernel, forward and backward.
void expectPoolMathMatchesCpu(const std::string &op, const Ints &x, const Ints &y,
                              std::map<std::string, ir::Attribute> attrs) {
  ops::KernelSpec spec = withAttrs(makeSpec(op, {x}, {y}), attrs);
  SCOPED_TRACE(op + " " + spec.inputs[0].str());
  ASSERT_TRUE(ops::cudaTarget().checkKernel(spec).isOk())
      << ops::cudaTarget().checkKernel(spec).message();
  bool max = op == "MaxPool", global = op == "GlobalAveragePool";
  ops::cuda::PoolGeom g = ops::cuda::poolGeom(spec, x, y, max, global);
  std::vector<HostTensor> in = randomInputs(spec, 3);
  std::vector<float> xv = floats(in[0]);
  if (max && xv.size() > 4) { // ties and a NaN
    xv[1] = xv[0];
    xv[xv.size() - 1] = std::numeric_limits<float>::quiet_NaN();
    in[0] = tensorOf(spec.inputs[0], xv);
  }
  std::vector<float> yv(static_cast<size_t>(spec.outputs[0].numElements()));
  for (size_t i = 0; i < yv.size(); ++i)
    yv[i] = ops::cuda::poolForwardAt(g, xv.data(), static_cast<int64_t>(i));
  expectClose(spec, {tensorOf(spec.outputs[0], yv)}, runCpu(spec, in), 1e-5, 1e-6);
  if (global)
    return;

  // The gradient op: MaxPoolGrad(dY, X), AveragePoolGrad(dY) with input_shape.
  ops::KernelSpec grad = max ? makeSpec("MaxPoolGrad", {y, x}, {x}, ir::DType::kFloat32, "ai.dtc")
                             : makeSpec("AveragePoolGrad", {y}, {x}, ir::DType::kFloat32, "ai.dtc");
  grad.attrs = spec.attrs;
  if (!max)
    grad.attrs["input_shape"] = x;
  ASSERT_TRUE(ops::cudaTarget().checkKernel(grad).isOk())
      << ops::cudaTarget().checkKernel(grad).message();
  std::vector<HostTensor> gin = randomInputs(grad, 5);
  if (max) { // X without NaN (the CPU's argmax skips NaN differently per path); keep the tie
    xv[xv.size() - 1] = 0.25f;
    gin[1] = tensorOf(grad.inputs[1], xv);
  }
  std::vector<float> dy = floats(gin[0]);
  std::vector<float> dx(static_cast<size_t>(grad.outputs[0].numElements()), 0.f);
  ops::cuda::PoolGeom gg = ops::cuda::poolGeom(grad, x, y, max, false);
  for (size_t i = 0; i < dy.size(); ++i)
    ops::cuda::poolBackwardAt(gg, dy.data(), max ? xv.data() : nullptr, dx.data(),
                              static_cast<int64_t>(i));
  expectClose(grad, {tensorOf(grad.outputs[0], dx)}, runCpu(grad, gin), 1e-5, 1e-6);
}

TEST(CudaDensePoolMath, MatchesCpu) {
  expectPoolMathMatchesCpu("MaxPool", {8, 16, 32, 32}, {8, 16, 16, 16},
                           {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  expectPoolMathMatchesCpu(
      "MaxPool", {2, 3, 9, 7}, {2, 3, 5, 4},
      {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  expectPoolMathMatchesCpu("MaxPool", {1, 2, 10}, {1, 2, 4},
                           {{"kernel_shape", Ints{3}},
                            {"strides", Ints{2}},
                            {"dilations", Ints{2}},
                            {"ceil_mode", int64_t{1}}});
  expectPoolMathMatchesCpu("AveragePool", {2, 3, 7, 7}, {2, 3, 4, 4},
                           {{"kernel_shape", Ints{3, 3}},
                            {"strides", Ints{2, 2}},
                            {"pads", Ints{1, 1, 1, 1}},
                            {"count_include_pad", int64_t{1}}});
  expectPoolMathMatchesCpu(
      "AveragePool", {2, 3, 7, 7}, {2, 3, 4, 4},
      {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  expectPoolMathMatchesCpu("AveragePool", {1, 2, 6, 6}, {1, 2, 3, 3},
                           {{"kernel_shape", Ints{3, 3}},
                            {"strides", Ints{2, 2}},
                            {"pads", Ints{0, 0, 1, 1}},
                            {"ceil_mode", int64_t{1}},
                            {"count_include_pad", int64_t{1}}});
  expectPoolMathMatchesCpu("AveragePool", {1, 2, 5, 4, 6}, {1, 2, 2, 2, 3},
                           {{"kernel_shape", Ints{2, 2, 2}}, {"strides", Ints{2, 2, 2}}});
  expectPoolMathMatchesCpu("GlobalAveragePool", {8, 64, 4, 4}, {8, 64, 1, 1}, {});
}

/// Runs `spec` on the host through the CUDA kernel's own argument mapping and per-row/channel
/// functions (`body`), returning its outputs. `aliasOutput0` makes output 0 overwrite input
/// `aliasOutput0` (the in-place rule).
std::vector<HostTensor> runHost(const ops::KernelSpec &spec, const std::vector<HostTensor> &in,
                                const std::function<void(const ops::KernelArgs &)> &body,
                                int aliasOutput0 = -1) {
  std::vector<std::vector<float>> inBufs, outBufs;
  std::vector<const void *> ins;
  std::vector<void *> outs;
  for (const HostTensor &t : in)
    inBufs.push_back(floats(t));
  for (size_t i = 0; i < in.size(); ++i)
    ins.push_back(spec.inputs[i].present() ? inBufs[i].data() : nullptr);
  for (const ops::TensorDesc &d : spec.outputs)
    outBufs.emplace_back(static_cast<size_t>(d.present() ? d.numElements() : 0), -777.f);
  for (size_t i = 0; i < outBufs.size(); ++i)
    outs.push_back(spec.outputs[i].present() ? outBufs[i].data() : nullptr);
  if (aliasOutput0 >= 0)
    outs[0] = const_cast<void *>(ins[static_cast<size_t>(aliasOutput0)]);
  body(ops::KernelArgs{ins.data(), ins.size(), outs.data(), outs.size()});
  std::vector<HostTensor> result;
  for (size_t i = 0; i < outBufs.size(); ++i)
    result.push_back(tensorOf(spec.outputs[i], i == 0 && aliasOutput0 >= 0
                                                   ? inBufs[static_cast<size_t>(aliasOutput0)]
                                                   : outBufs[i]));
  return result;
}

/// The host run of the CUDA kernel's functions against the CPU kernel.
void expectHostMatchesCpu(const ops::KernelSpec &spec, const std::vector<Fill> &fills,
                          const std::function<void(const ops::KernelArgs &)> &body,
                          double rtol = 1e-4, double atol = 1e-5, int aliasOutput0 = -1) {
  SCOPED_TRACE(spec.op + " " + spec.inputs[0].str() + (aliasOutput0 >= 0 ? " in place" : ""));
  ASSERT_TRUE(ops::cudaTarget().checkKernel(spec).isOk())
      << ops::cudaTarget().checkKernel(spec).message();
  std::vector<HostTensor> in = randomInputs(spec, 11, fills);
  std::vector<HostTensor> cpu = runCpu(spec, in);
  expectClose(spec, runHost(spec, in, body, aliasOutput0), cpu, rtol, atol);
}

TEST(CudaDenseRowMath, SoftmaxMatchesCpu) {
  for (const std::string op : {"Softmax", "LogSoftmax", "SoftmaxGrad", "LogSoftmaxGrad"}) {
    bool grad = op.find("Grad") != std::string::npos;
    for (const auto &[x, axis] : std::vector<std::pair<Ints, int64_t>>{
             {{4, 3, 16}, -1}, {{3, 77, 5}, 1}, {{2, 9}, 0}, {{4, 1}, -1}}) {
      ops::KernelSpec s = withAttrs(grad ? makeSpec(op, {x, x}, {x}, ir::DType::kFloat32, "ai.dtc")
                                         : makeSpec(op, {x}, {x}),
                                    {{"axis", axis}});
      Fill y = op == "SoftmaxGrad" ? Fill{0.0, 0.2, ""} : Fill{-4.0, -0.1, ""};
      expectHostMatchesCpu(s, {Fill{-5, 5, ""}, y}, [&](const ops::KernelArgs &args) {
        ops::cuda::SoftmaxArgs a = ops::cuda::softmaxArgs(s, args);
        for (int64_t r = 0; r < a.outer * a.inner; ++r)
          grad ? ops::cuda::softmaxGradRow(a, r, 0, 1) : ops::cuda::softmaxRow(a, r, 0, 1);
      });
    }
  }
  // A row holding NaN is NaN everywhere; the other rows are unaffected.
  ops::KernelSpec s = makeSpec("Softmax", {{2, 3}}, {{2, 3}});
  std::vector<float> x = {1.f, std::numeric_limits<float>::quiet_NaN(), 2.f, 0.f, 1.f, 2.f};
  std::vector<HostTensor> in = {tensorOf(s.inputs[0], x)};
  std::vector<HostTensor> host = runHost(s, in, [&](const ops::KernelArgs &args) {
    ops::cuda::SoftmaxArgs a = ops::cuda::softmaxArgs(s, args);
    for (int64_t r = 0; r < 2; ++r)
      ops::cuda::softmaxRow(a, r, 0, 1);
  });
  expectClose(s, host, runCpu(s, in));
}

TEST(CudaDenseRowMath, BatchNormMatchesCpu) {
  Fill var{0.5, 2.0, ""};
  for (const Ints &x : {Ints{4, 6, 5, 5}, Ints{3, 5, 7}, Ints{1, 4}, Ints{2, 3, 1, 1}}) {
    Ints c = {x[1]};
    ops::KernelSpec inf = makeSpec("BatchNormalization", {x, c, c, c, c}, {x});
    expectHostMatchesCpu(
        inf, {Fill{}, Fill{}, Fill{}, Fill{}, var}, [&](const ops::KernelArgs &args) {
          ops::cuda::BatchNormArgs a = ops::cuda::batchNormArgs(inf, args, nullptr);
          for (int64_t i = 0; i < inf.outputs[0].numElements(); ++i)
            ops::cuda::batchNormInferenceAt(a, i);
        });
    for (size_t outputs : {size_t{5}, size_t{3}}) {
      ops::KernelSpec s = withAttrs(makeSpec("BatchNormTraining", {x, c, c, c, c}, {x, c, c, c, c},
                                             ir::DType::kFloat32, "ai.dtc"),
                                    {{"momentum", 0.8f}, {"epsilon", 1e-3f}});
      s.outputs.resize(outputs);
      expectHostMatchesCpu(
          s, {Fill{1.0, 3.0, ""}, Fill{}, Fill{}, Fill{}, var}, [&](const ops::KernelArgs &args) {
            std::vector<float> scratch(2 * static_cast<size_t>(x[1]));
            ops::cuda::BatchNormArgs a = ops::cuda::batchNormArgs(s, args, scratch.data());
            for (int64_t ch = 0; ch < x[1]; ++ch)
              ops::cuda::batchNormTrainingChannel(a, ch, 0, 1, nullptr);
          });
    }
    for (size_t outputs : {size_t{3}, size_t{1}})
      for (int alias : {-1, 0}) {
        ops::KernelSpec s = withAttrs(
            makeSpec("BatchNormGrad", {x, x, c, c, c}, {x, c, c}, ir::DType::kFloat32, "ai.dtc"),
            {{"epsilon", 1e-3f}});
        s.outputs.resize(outputs);
        expectHostMatchesCpu(
            s, {Fill{}, Fill{}, Fill{}, Fill{}, var},
            [&](const ops::KernelArgs &args) {
              ops::cuda::BatchNormArgs a = ops::cuda::batchNormArgs(s, args, nullptr);
              for (int64_t ch = 0; ch < x[1]; ++ch)
                ops::cuda::batchNormGradChannel(a, ch, 0, 1, nullptr);
            },
            1e-4, 1e-5, alias);
      }
  }
}

TEST(CudaDenseRowMath, LayerNormMatchesCpu) {
  for (const auto &[x, axis] : std::vector<std::pair<Ints, int64_t>>{
           {{4, 5, 32}, -1}, {{3, 77}, -1}, {{2, 3, 4, 5}, 1}, {{5, 1}, -1}}) {
    Ints tail(x.begin() + (axis < 0 ? static_cast<long>(x.size()) + axis : axis), x.end());
    Ints stats = x;
    for (size_t i = x.size() - tail.size(); i < x.size(); ++i)
      stats[i] = 1;
    for (bool full : {true, false}) {
      ops::KernelSpec s = withAttrs(
          makeSpec("LayerNormalization", {x, tail, tail}, {x, stats, stats}), {{"axis", axis}});
      if (!full) {
        s.inputs.pop_back();
        s.outputs.resize(1);
      }
      expectHostMatchesCpu(s, {}, [&](const ops::KernelArgs &args) {
        ops::cuda::LayerNormArgs a = ops::cuda::layerNormArgs(s, args, nullptr);
        for (int64_t r = 0; r < a.outer; ++r)
          ops::cuda::layerNormRow(a, r, 0, 1, nullptr);
      });
      ops::KernelSpec g = withAttrs(
          makeSpec("LayerNormGrad", {x, x, tail}, {x, tail, tail}, ir::DType::kFloat32, "ai.dtc"),
          {{"axis", axis}});
      if (!full)
        g.outputs.resize(2);
      expectHostMatchesCpu(
          g, {},
          [&](const ops::KernelArgs &args) {
            int64_t rows = ops::cuda::layerNormArgs(g, args, nullptr).outer;
            std::vector<float> scratch(2 * static_cast<size_t>(rows));
            ops::cuda::LayerNormArgs a = ops::cuda::layerNormArgs(g, args, scratch.data());
            for (int64_t r = 0; r < a.outer; ++r)
              ops::cuda::layerNormGradRow(a, r, 0, 1, nullptr);
            for (int64_t j = 0; j < a.inner; ++j)
              ops::cuda::layerNormGradColumn(a, j);
          },
          1e-3, 1e-4);
    }
  }
}

/// What cuDNN computes for a ConvPlan (NCHW cross-correlation, groups, one pad per axis for both
/// ends, alpha = 1; FusedConv: onto Z with beta = 1, + bias, NaN-keeping relu), on host buffers
/// found through the plan's operand ids: the descriptors and roles the CUDA kernel hands to
/// cuDNN, checked against the CPU kernel.
void emulateCudnn(const ops::cuda::ConvPlan &p, const ops::KernelArgs &args) {
  auto in = [&](int id) {
    return static_cast<const float *>(id >= 0 ? args.inputs[static_cast<size_t>(id)]
                                              : args.outputs[static_cast<size_t>(-1 - id)]);
  };
  auto out = [&](int id) {
    return static_cast<float *>(args.outputs[static_cast<size_t>(-1 - id)]);
  };
  // Spatial axes padded to 3.
  int64_t X[3] = {1, 1, 1}, Y[3] = {1, 1, 1}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1}, D[3] = {1, 1, 1},
          P[3] = {0, 0, 0};
  size_t sp = p.x.size() - 2;
  for (size_t i = 0; i < sp; ++i) {
    X[i] = p.x[2 + i];
    Y[i] = p.y[2 + i];
    K[i] = p.w[2 + i];
    S[i] = p.strides[i];
    D[i] = p.dilations[i];
    P[i] = p.pads[i];
  }
  int64_t n = p.x[0], c = p.x[1], m = p.y[1], cg = c / p.group, mg = m / p.group;
  int64_t xs = X[0] * X[1] * X[2], ys = Y[0] * Y[1] * Y[2], ks = K[0] * K[1] * K[2];
  std::vector<float> y(static_cast<size_t>(n * m * ys), 0.f), x(static_cast<size_t>(n * c * xs));
  std::vector<float> w(static_cast<size_t>(m * cg * ks), 0.f);
  const float *xIn = p.kind == ops::cuda::ConvKind::kBackwardData ? nullptr : in(p.xId);
  const float *yIn = p.kind == ops::cuda::ConvKind::kForward ? nullptr : in(p.yId);
  const float *wIn = p.kind == ops::cuda::ConvKind::kBackwardFilter ? nullptr : in(p.wId);
  std::fill(x.begin(), x.end(), 0.f);
  // Every (image, output channel, output position, input channel, kernel position) pair.
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < m; ++k)
      for (int64_t o = 0; o < ys; ++o)
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t r = 0; r < ks; ++r) {
            int64_t o3[3] = {o / (Y[1] * Y[2]), (o / Y[2]) % Y[1], o % Y[2]};
            int64_t r3[3] = {r / (K[1] * K[2]), (r / K[2]) % K[1], r % K[2]};
            int64_t idx = 0;
            bool inside = true;
            for (int a = 0; a < 3; ++a) {
              int64_t v = o3[a] * S[a] - P[a] + r3[a] * D[a];
              inside = inside && v >= 0 && v < X[a];
              idx = idx * X[a] + v;
            }
            if (!inside)
              continue;
            size_t xi = static_cast<size_t>((b * c + (k / mg) * cg + ci) * xs + idx);
            size_t yi = static_cast<size_t>((b * m + k) * ys + o);
            size_t wi = static_cast<size_t>((k * cg + ci) * ks + r);
            if (p.kind == ops::cuda::ConvKind::kForward)
              y[yi] += xIn[xi] * wIn[wi];
            else if (p.kind == ops::cuda::ConvKind::kBackwardData)
              x[xi] += yIn[yi] * wIn[wi];
            else
              w[wi] += yIn[yi] * xIn[xi];
          }
  auto bias = [&](std::vector<float> &t, int64_t channels, int64_t spatial) {
    if (p.bias < 0 || !args.inputs[static_cast<size_t>(p.bias)])
      return;
    const float *bv = in(p.bias);
    for (size_t i = 0; i < t.size(); ++i)
      t[i] += bv[(static_cast<int64_t>(i) / spatial) % channels];
  };
  if (p.kind == ops::cuda::ConvKind::kForward) {
    if (p.z >= 0)
      for (size_t i = 0; i < y.size(); ++i)
        y[i] += in(p.z)[i];
    bias(y, m, ys);
    if (p.relu)
      for (float &v : y)
        v = v < 0.f ? 0.f : v;
    std::copy(y.begin(), y.end(), out(p.yId));
  } else if (p.kind == ops::cuda::ConvKind::kBackwardData) {
    bias(x, c, xs);
    std::copy(x.begin(), x.end(), out(p.xId));
  } else {
    std::copy(w.begin(), w.end(), out(p.wId));
    if (p.biasGrad >= 0 && args.outputs[static_cast<size_t>(p.biasGrad)]) {
      float *db = static_cast<float *>(args.outputs[static_cast<size_t>(p.biasGrad)]);
      for (int64_t k = 0; k < m; ++k) {
        double sum = 0;
        for (int64_t b = 0; b < n; ++b)
          for (int64_t o = 0; o < ys; ++o)
            sum += yIn[(b * m + k) * ys + o];
        db[k] = static_cast<float>(sum);
      }
    }
  }
}

void expectConvPlanMatchesCpu(const ops::KernelSpec &spec) {
  expectHostMatchesCpu(
      spec, {}, [&](const ops::KernelArgs &args) { emulateCudnn(ops::cuda::convPlan(spec), args); },
      1e-4, 1e-4);
}

ops::KernelSpec convSpec(const std::string &op, const std::vector<Ints> &in,
                         const std::vector<Ints> &out, std::map<std::string, ir::Attribute> attrs) {
  ops::KernelSpec s = withAttrs(makeSpec(op, in, out, ir::DType::kFloat32,
                                         op == "Conv" || op == "ConvTranspose" ? "" : "ai.dtc"),
                                attrs);
  if (op == "ConvGradData") {
    s.attrs["input_shape"] = out[0];
    s.attrs["kernel_shape"] = Ints(in[1].begin() + 2, in[1].end());
  } else if (op == "ConvGradWeight") {
    s.attrs["kernel_shape"] = Ints(out[0].begin() + 2, out[0].end());
  }
  return s;
}

TEST(CudaDenseConvPlan, CudnnRolesMatchCpu) {
  using A = std::map<std::string, ir::Attribute>;
  A pad1 = {{"pads", Ints{1, 1, 1, 1}}};
  A strided = {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}};
  A grouped = {{"group", int64_t{2}}, {"dilations", Ints{2, 1}}};
  A asym1d = {{"strides", Ints{2}}, {"pads", Ints{1, 0}}};
  expectConvPlanMatchesCpu(
      convSpec("Conv", {{2, 3, 8, 8}, {4, 3, 3, 3}, {4}}, {{2, 4, 8, 8}}, pad1));
  expectConvPlanMatchesCpu(convSpec("Conv", {{2, 4, 7, 7}, {6, 4, 3, 3}}, {{2, 6, 4, 4}}, strided));
  expectConvPlanMatchesCpu(
      convSpec("Conv", {{2, 4, 7, 6}, {6, 2, 3, 2}, {6}}, {{2, 6, 3, 5}}, grouped));
  expectConvPlanMatchesCpu(convSpec("Conv", {{2, 4, 10}, {6, 4, 3}, {6}}, {{2, 6, 5}}, asym1d));
  expectConvPlanMatchesCpu(convSpec("Conv", {{1, 2, 4, 5, 3}, {3, 2, 3, 3, 3}}, {{1, 3, 4, 5, 3}},
                                    {{"pads", Ints{1, 1, 1, 1, 1, 1}}}));
  for (const char *act : {"", "Relu"}) {
    A a = pad1;
    a["activation"] = std::string(act);
    expectConvPlanMatchesCpu(
        convSpec("FusedConv", {{2, 3, 6, 6}, {4, 3, 3, 3}, {4}, {2, 4, 6, 6}}, {{2, 4, 6, 6}}, a));
    expectConvPlanMatchesCpu(
        convSpec("FusedConv", {{2, 3, 6, 6}, {4, 3, 3, 3}}, {{2, 4, 6, 6}}, a));
  }
  expectConvPlanMatchesCpu(
      convSpec("ConvGradData", {{2, 6, 4, 4}, {6, 4, 3, 3}}, {{2, 4, 7, 7}}, strided));
  expectConvPlanMatchesCpu(
      convSpec("ConvGradData", {{2, 6, 3, 5}, {6, 2, 3, 2}}, {{2, 4, 7, 6}}, grouped));
  expectConvPlanMatchesCpu(convSpec("ConvGradData", {{2, 6, 5}, {6, 4, 3}}, {{2, 4, 10}}, asym1d));
  expectConvPlanMatchesCpu(
      convSpec("ConvGradWeight", {{2, 6, 4, 4}, {2, 4, 7, 7}}, {{6, 4, 3, 3}, {6}}, strided));
  expectConvPlanMatchesCpu(
      convSpec("ConvGradWeight", {{2, 6, 3, 5}, {2, 4, 7, 6}}, {{6, 2, 3, 2}}, grouped));
  expectConvPlanMatchesCpu(
      convSpec("ConvGradWeight", {{2, 6, 5}, {2, 4, 10}}, {{6, 4, 3}, {6}}, asym1d));
  expectConvPlanMatchesCpu(convSpec("ConvTranspose", {{2, 6, 4, 4}, {6, 3, 2, 2}, {3}},
                                    {{2, 3, 8, 8}}, {{"strides", Ints{2, 2}}}));
  expectConvPlanMatchesCpu(convSpec("ConvTranspose", {{2, 4, 5, 5}, {4, 3, 3, 3}}, {{2, 6, 10, 10}},
                                    {{"strides", Ints{2, 2}},
                                     {"pads", Ints{1, 1, 1, 1}},
                                     {"output_padding", Ints{1, 1}},
                                     {"group", int64_t{2}}}));
  expectConvPlanMatchesCpu(convSpec("ConvTranspose", {{1, 2, 4}, {2, 3, 3}, {3}}, {{1, 3, 7}},
                                    {{"strides", Ints{2}}, {"output_shape", Ints{7}}}));
}

// ---------------------------------------------------------------------------------------------
// GPU parity (skipped without a GPU)

TEST(CudaDense, MatMul) {
  expectCudaMatchesCpu(makeSpec("MatMul", {{8, 16, 32}, {32, 96}}, {{8, 16, 96}}));
  expectCudaMatchesCpu(makeSpec("MatMul", {{8, 4, 16, 8}, {8, 4, 8, 16}}, {{8, 4, 16, 16}}));
  expectCudaMatchesCpu(makeSpec("MatMul", {{2, 1, 3, 5}, {1, 3, 5, 2}}, {{2, 3, 3, 2}}));
  expectCudaMatchesCpu(makeSpec("MatMul", {{5}, {2, 5, 3}}, {{2, 3}}));
  expectCudaMatchesCpu(makeSpec("MatMul", {{2, 3, 5}, {5}}, {{2, 3}}));
  expectCudaMatchesCpu(makeSpec("MatMul", {{7}, {7}}, {{}}));
  expectCudaMatchesCpu(makeSpec("MatMul", {{33, 67}, {67, 129}}, {{33, 129}}), {}, 1e-4, 1e-4);
  expectCudaMatchesCpu(makeSpec("MatMul", {{3, 0}, {0, 4}}, {{3, 4}})); // empty K: zeros
  expectCudaMatchesCpu(makeSpec("MatMul", {{0, 5}, {5, 4}}, {{0, 4}}));
}

// Mixed precision (--precision bf16): cuBLAS on bf16 operands with f32 accumulation against the
// oneDNN bf16 kernel; both round the f32 result once to bf16, so they differ by at most a few bf16
// ulps (2^-8 relative each) where the two summation orders straddle a rounding boundary.
TEST(CudaDense, MatMulGemmMatMulTBf16) {
  const ir::DType bf = ir::DType::kBFloat16;
  expectCudaMatchesCpu(makeSpec("MatMul", {{8, 16, 32}, {32, 96}}, {{8, 16, 96}}, bf), {}, 2e-2,
                       1e-2);
  expectCudaMatchesCpu(makeSpec("MatMul", {{8, 4, 16, 8}, {8, 4, 8, 16}}, {{8, 4, 16, 16}}, bf), {},
                       2e-2, 1e-2);
  expectCudaMatchesCpu(makeSpec("MatMul", {{33, 67}, {67, 129}}, {{33, 129}}, bf), {}, 2e-2, 2e-2);
  expectCudaMatchesCpu(
      withAttrs(makeSpec("Gemm", {{32, 64}, {10, 64}}, {{32, 10}}, bf), {{"transB", int64_t{1}}}),
      {}, 2e-2, 2e-2);
  expectCudaMatchesCpu(
      withAttrs(makeSpec("MatMulT", {{128, 32}, {128, 64}}, {{32, 64}}, bf, "ai.dtc"),
                {{"transA", int64_t{1}}}),
      {}, 2e-2, 5e-2);
}

TEST(CudaDense, MatMulT) {
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1}) {
      Ints a = ta ? Ints{8, 4, 8, 16} : Ints{8, 4, 16, 8},
           b = tb ? Ints{8, 4, 16, 8} : Ints{8, 4, 8, 16};
      expectCudaMatchesCpu(
          withAttrs(makeSpec("MatMulT", {a, b}, {{8, 4, 16, 16}}, ir::DType::kFloat32, "ai.dtc"),
                    {{"transA", ta}, {"transB", tb}, {"alpha", 0.25f}}));
    }
  // The weight gradient of a [128, 32] x [32, 64] layer: dW = X^T dY.
  expectCudaMatchesCpu(withAttrs(makeSpec("MatMulT", {{128, 32}, {128, 64}}, {{32, 64}},
                                          ir::DType::kFloat32, "ai.dtc"),
                                 {{"transA", int64_t{1}}}),
                       {}, 1e-4, 1e-4);
  expectCudaMatchesCpu(withAttrs(
      makeSpec("MatMulT", {{2, 3, 5, 4}, {1, 6, 5}}, {{2, 3, 4, 6}}, ir::DType::kFloat32, "ai.dtc"),
      {{"transA", int64_t{1}}, {"transB", int64_t{1}}}));
}

TEST(CudaDense, Gemm) {
  // cnn's classifier: [8, 32] x [10, 32]^T + bias[10].
  expectCudaMatchesCpu(
      withAttrs(makeSpec("Gemm", {{8, 32}, {10, 32}, {10}}, {{8, 10}}), {{"transB", int64_t{1}}}));
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1}) {
      Ints a = ta ? Ints{7, 3} : Ints{3, 7}, b = tb ? Ints{5, 7} : Ints{7, 5};
      for (const Ints &c : {Ints{3, 5}, Ints{3, 1}, Ints{1, 5}, Ints{5}, Ints{}})
        expectCudaMatchesCpu(
            withAttrs(makeSpec("Gemm", {a, b, c}, {{3, 5}}),
                      {{"transA", ta}, {"transB", tb}, {"alpha", 0.5f}, {"beta", 2.f}}));
    }
  expectCudaMatchesCpu(makeSpec("Gemm", {{3, 7}, {7, 5}}, {{3, 5}})); // no C
  expectCudaMatchesCpu(withAttrs(makeSpec("Gemm", {{3, 0}, {0, 5}, {5}}, {{3, 5}}),
                                 {{"beta", 3.f}})); // empty K: beta * C
}

ops::KernelSpec conv(const Ints &x, const Ints &w, const Ints &y,
                     std::map<std::string, ir::Attribute> attrs, bool bias = true) {
  std::vector<Ints> in = {x, w};
  if (bias)
    in.push_back({w[0]});
  return withAttrs(makeSpec("Conv", in, {y}), attrs);
}

TEST(CudaDense, Conv) {
  expectCudaMatchesCpu(
      conv({8, 3, 32, 32}, {16, 3, 3, 3}, {8, 16, 32, 32}, {{"pads", Ints{1, 1, 1, 1}}}), {}, 1e-4,
      1e-4);
  expectCudaMatchesCpu(conv({4, 16, 15, 15}, {32, 16, 3, 3}, {4, 32, 8, 8},
                            {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, false),
                       {}, 1e-4, 1e-4);
  expectCudaMatchesCpu(conv({2, 8, 9, 9}, {8, 2, 3, 3}, {2, 8, 5, 5},
                            {{"group", int64_t{4}}, {"dilations", Ints{2, 2}}}),
                       {}, 1e-4, 1e-4);
  expectCudaMatchesCpu(
      conv({2, 4, 10}, {6, 4, 3}, {2, 6, 5}, {{"strides", Ints{2}}, {"pads", Ints{1, 0}}}), {},
      1e-4, 1e-4); // 1-D, asymmetric pads cuDNN can express
  expectCudaMatchesCpu(
      conv({1, 2, 5, 6, 7}, {3, 2, 3, 3, 3}, {1, 3, 5, 6, 7}, {{"pads", Ints{1, 1, 1, 1, 1, 1}}}),
      {}, 1e-4, 1e-4); // 3-D
  expectCudaMatchesCpu(
      conv({8, 64, 8, 8}, {128, 64, 1, 1}, {8, 128, 4, 4}, {{"strides", Ints{2, 2}}}), {}, 1e-4,
      1e-4); // resnet's 1x1 downsample
  expectCudaMatchesCpu(conv({0, 3, 8, 8}, {4, 3, 3, 3}, {0, 4, 6, 6}, {})); // empty batch
}

TEST(CudaDense, FusedConv) {
  for (const char *act : {"", "Relu"}) {
    ops::KernelSpec s =
        withAttrs(makeSpec("FusedConv", {{2, 4, 8, 8}, {6, 4, 3, 3}, {6}, {2, 6, 8, 8}},
                           {{2, 6, 8, 8}}, ir::DType::kFloat32, "ai.dtc"),
                  {{"pads", Ints{1, 1, 1, 1}}, {"activation", std::string(act)}});
    expectCudaMatchesCpu(s, {}, 1e-4, 1e-4);
    s.inputs.pop_back(); // without Z
    expectCudaMatchesCpu(s, {}, 1e-4, 1e-4);
  }
}

TEST(CudaDense, ConvGradData) {
  auto spec = [](const Ints &dy, const Ints &w, const Ints &x,
                 std::map<std::string, ir::Attribute> attrs) {
    ops::KernelSpec s = makeSpec("ConvGradData", {dy, w}, {x}, ir::DType::kFloat32, "ai.dtc");
    s.attrs = std::move(attrs);
    s.attrs["input_shape"] = x;
    s.attrs["kernel_shape"] = Ints(w.begin() + 2, w.end());
    return s;
  };
  expectCudaMatchesCpu(
      spec({8, 16, 32, 32}, {16, 3, 3, 3}, {8, 3, 32, 32}, {{"pads", Ints{1, 1, 1, 1}}}), {}, 1e-4,
      1e-4);
  expectCudaMatchesCpu(spec({4, 32, 8, 8}, {32, 16, 3, 3}, {4, 16, 15, 15},
                            {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}),
                       {}, 1e-4, 1e-4);
  expectCudaMatchesCpu(spec({2, 8, 5, 5}, {8, 2, 3, 3}, {2, 8, 9, 9},
                            {{"group", int64_t{4}}, {"dilations", Ints{2, 2}}}),
                       {}, 1e-4, 1e-4);
  expectCudaMatchesCpu(spec({2, 6, 5}, {6, 4, 3}, {2, 4, 11}, {{"strides", Ints{2}}}), {}, 1e-4,
                       1e-4);
}

TEST(CudaDense, ConvGradWeight) {
  auto spec = [](const Ints &dy, const Ints &x, const Ints &w, bool bias,
                 std::map<std::string, ir::Attribute> attrs) {
    std::vector<Ints> outs = {w};
    if (bias)
      outs.push_back({w[0]});
    ops::KernelSpec s = makeSpec("ConvGradWeight", {dy, x}, outs, ir::DType::kFloat32, "ai.dtc");
    s.attrs = std::move(attrs);
    s.attrs["kernel_shape"] = Ints(w.begin() + 2, w.end());
    return s;
  };
  expectCudaMatchesCpu(
      spec({8, 16, 32, 32}, {8, 3, 32, 32}, {16, 3, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1}}}), {},
      1e-3, 1e-3);
  expectCudaMatchesCpu(spec({4, 32, 8, 8}, {4, 16, 15, 15}, {32, 16, 3, 3}, false,
                            {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}),
                       {}, 1e-3, 1e-3);
  expectCudaMatchesCpu(spec({2, 8, 5, 5}, {2, 8, 9, 9}, {8, 2, 3, 3}, true,
                            {{"group", int64_t{4}}, {"dilations", Ints{2, 2}}}),
                       {}, 1e-4, 1e-4);
  expectCudaMatchesCpu(spec({2, 6, 5}, {2, 4, 11}, {6, 4, 3}, true, {{"strides", Ints{2}}}), {},
                       1e-4, 1e-4);
}

TEST(CudaDense, ConvTranspose) {
  // unet's upsampling: k2 s2, [8, 64, 8, 8] -> [8, 32, 16, 16].
  expectCudaMatchesCpu(
      withAttrs(makeSpec("ConvTranspose", {{8, 64, 8, 8}, {64, 32, 2, 2}, {32}}, {{8, 32, 16, 16}}),
                {{"strides", Ints{2, 2}}}),
      {}, 1e-4, 1e-4);
  expectCudaMatchesCpu(
      withAttrs(makeSpec("ConvTranspose", {{2, 4, 5, 5}, {4, 3, 3, 3}}, {{2, 6, 10, 10}}),
                {{"strides", Ints{2, 2}},
                 {"pads", Ints{1, 1, 1, 1}},
                 {"output_padding", Ints{1, 1}},
                 {"group", int64_t{2}}}),
      {}, 1e-4, 1e-4);
  expectCudaMatchesCpu(
      withAttrs(makeSpec("ConvTranspose", {{1, 2, 7}, {2, 3, 3}}, {{1, 3, 9}}), {}), {}, 1e-4,
      1e-4); // 1-D
}

void poolParity(const std::string &op, const Ints &x, const Ints &y,
                std::map<std::string, ir::Attribute> attrs) {
  ops::KernelSpec spec = withAttrs(makeSpec(op, {x}, {y}), attrs);
  expectCudaMatchesCpu(spec);
  if (op == "GlobalAveragePool")
    return;
  bool max = op == "MaxPool";
  ops::KernelSpec grad = max ? makeSpec("MaxPoolGrad", {y, x}, {x}, ir::DType::kFloat32, "ai.dtc")
                             : makeSpec("AveragePoolGrad", {y}, {x}, ir::DType::kFloat32, "ai.dtc");
  grad.attrs = spec.attrs;
  if (!max)
    grad.attrs["input_shape"] = x;
  expectCudaMatchesCpu(grad, {}, 1e-4, 1e-5);
}

TEST(CudaDense, Pooling) {
  poolParity("MaxPool", {8, 16, 32, 32}, {8, 16, 16, 16},
             {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  poolParity("MaxPool", {2, 3, 9, 7}, {2, 3, 5, 4},
             {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  poolParity("MaxPool", {1, 2, 10}, {1, 2, 4},
             {{"kernel_shape", Ints{3}},
              {"strides", Ints{2}},
              {"dilations", Ints{2}},
              {"ceil_mode", int64_t{1}}});
  poolParity("AveragePool", {2, 3, 7, 7}, {2, 3, 4, 4},
             {{"kernel_shape", Ints{3, 3}},
              {"strides", Ints{2, 2}},
              {"pads", Ints{1, 1, 1, 1}},
              {"count_include_pad", int64_t{1}}});
  poolParity("AveragePool", {1, 2, 6, 6}, {1, 2, 3, 3},
             {{"kernel_shape", Ints{3, 3}},
              {"strides", Ints{2, 2}},
              {"pads", Ints{0, 0, 1, 1}},
              {"ceil_mode", int64_t{1}},
              {"count_include_pad", int64_t{1}}});
  poolParity("AveragePool", {1, 2, 5, 4, 6}, {1, 2, 2, 2, 3},
             {{"kernel_shape", Ints{2, 2, 2}}, {"strides", Ints{2, 2, 2}}});
  poolParity("GlobalAveragePool", {8, 64, 4, 4}, {8, 64, 1, 1}, {});
  poolParity("GlobalAveragePool", {3, 5, 7}, {3, 5, 1}, {});
}

TEST(CudaDense, BatchNormalization) {
  Fill var{0.5, 2.0, ""};
  expectCudaMatchesCpu(withAttrs(makeSpec("BatchNormalization",
                                          {{8, 16, 5, 5}, {16}, {16}, {16}, {16}}, {{8, 16, 5, 5}}),
                                 {{"epsilon", 1e-5f}}),
                       {Fill{}, Fill{}, Fill{}, Fill{}, var});
}

TEST(CudaDense, BatchNormTraining) {
  Fill var{0.5, 2.0, ""};
  for (const Ints &x : {Ints{8, 16, 32, 32}, Ints{3, 5, 7}, Ints{1, 4}, Ints{2, 3, 1, 1}}) {
    Ints c = {x[1]};
    ops::KernelSpec s = withAttrs(makeSpec("BatchNormTraining", {x, c, c, c, c}, {x, c, c, c, c},
                                           ir::DType::kFloat32, "ai.dtc"),
                                  {{"momentum", 0.9f}, {"epsilon", 1e-5f}});
    expectCudaMatchesCpu(s, {Fill{1.0, 3.0, ""}, Fill{}, Fill{}, Fill{}, var}, 1e-4, 1e-5);
    s.outputs.resize(3); // without the saved statistics
    expectCudaMatchesCpu(s, {Fill{1.0, 3.0, ""}, Fill{}, Fill{}, Fill{}, var}, 1e-4, 1e-5);
  }
}

TEST(CudaDense, BatchNormGrad) {
  Fill var{0.5, 2.0, ""};
  for (const Ints &x : {Ints{8, 16, 32, 32}, Ints{3, 5, 7}, Ints{2, 4}}) {
    Ints c = {x[1]};
    ops::KernelSpec s = withAttrs(
        makeSpec("BatchNormGrad", {x, x, c, c, c}, {x, c, c}, ir::DType::kFloat32, "ai.dtc"),
        {{"epsilon", 1e-5f}});
    expectCudaMatchesCpu(s, {Fill{}, Fill{}, Fill{}, Fill{}, var}, 1e-3, 1e-4);
    s.outputs.resize(1);
    expectCudaMatchesCpu(s, {Fill{}, Fill{}, Fill{}, Fill{}, var}, 1e-3, 1e-4);
  }
}

TEST(CudaDense, Softmax) {
  for (const char *op : {"Softmax", "LogSoftmax"}) {
    expectCudaMatchesCpu(
        withAttrs(makeSpec(op, {{8, 4, 16, 16}}, {{8, 4, 16, 16}}), {{"axis", int64_t{-1}}}));
    expectCudaMatchesCpu(
        withAttrs(makeSpec(op, {{3, 77, 5}}, {{3, 77, 5}}), {{"axis", int64_t{1}}}));
    expectCudaMatchesCpu(withAttrs(makeSpec(op, {{2, 1000}}, {{2, 1000}}), {}),
                         {Fill{-20, 20, ""}});
    expectCudaMatchesCpu(withAttrs(makeSpec(op, {{4, 1}}, {{4, 1}}), {}));
    expectCudaMatchesCpu(withAttrs(makeSpec(op, {{0, 3}}, {{0, 3}}), {})); // empty
  }
}

TEST(CudaDense, SoftmaxGrad) {
  for (const char *op : {"SoftmaxGrad", "LogSoftmaxGrad"}) {
    // Y must be a softmax (or log-softmax) output for the CPU's formula: fill it in range.
    Fill y = std::string(op) == "SoftmaxGrad" ? Fill{0.0, 0.2, ""} : Fill{-4.0, -0.1, ""};
    expectCudaMatchesCpu(withAttrs(makeSpec(op, {{8, 4, 16, 16}, {8, 4, 16, 16}}, {{8, 4, 16, 16}},
                                            ir::DType::kFloat32, "ai.dtc"),
                                   {{"axis", int64_t{-1}}}),
                         {Fill{}, y}, 1e-4, 1e-5);
    expectCudaMatchesCpu(withAttrs(makeSpec(op, {{3, 77, 5}, {3, 77, 5}}, {{3, 77, 5}},
                                            ir::DType::kFloat32, "ai.dtc"),
                                   {{"axis", int64_t{1}}}),
                         {Fill{}, y}, 1e-4, 1e-5);
  }
}

} // namespace
} // namespace dtc::gputest

namespace dtc::gputest {
namespace {

TEST(CudaDense, LayerNormalization) {
  // gpt's [batch, sequence, embedding] rows; an odd row length across block sizes; axis 1.
  for (const auto &[x, axis] : std::vector<std::pair<Ints, int64_t>>{
           {{8, 16, 32}, -1}, {{3, 777}, -1}, {{2, 3, 4, 5}, 1}, {{5, 1}, -1}}) {
    Ints tail(x.begin() + (axis < 0 ? static_cast<long>(x.size()) + axis : axis), x.end());
    Ints stats = x;
    for (size_t i = x.size() - tail.size(); i < x.size(); ++i)
      stats[i] = 1;
    ops::KernelSpec s =
        withAttrs(makeSpec("LayerNormalization", {x, tail, tail}, {x, stats, stats}),
                  {{"axis", axis}, {"epsilon", 1e-5f}});
    expectCudaMatchesCpu(s, {}, 1e-4, 1e-5);
    s.inputs.pop_back(); // without B, Y only
    s.outputs.resize(1);
    expectCudaMatchesCpu(s, {}, 1e-4, 1e-5);
  }
}

TEST(CudaDense, LayerNormGrad) {
  for (const auto &[x, axis] : std::vector<std::pair<Ints, int64_t>>{
           {{8, 16, 32}, -1}, {{3, 777}, -1}, {{2, 3, 4, 5}, 1}}) {
    Ints tail(x.begin() + (axis < 0 ? static_cast<long>(x.size()) + axis : axis), x.end());
    ops::KernelSpec s = withAttrs(
        makeSpec("LayerNormGrad", {x, x, tail}, {x, tail, tail}, ir::DType::kFloat32, "ai.dtc"),
        {{"axis", axis}, {"epsilon", 1e-5f}});
    expectCudaMatchesCpu(s, {}, 1e-3, 1e-4);
    s.outputs.resize(2); // without dB
    expectCudaMatchesCpu(s, {}, 1e-3, 1e-4);
  }
}

TEST(CudaDenseTarget, LayerNormScaleMustHaveTheRowSize) {
  ops::KernelSpec s = withAttrs(makeSpec("LayerNormalization", {{2, 3, 4}, {4}}, {{2, 3, 4}}),
                                {{"axis", int64_t{1}}});
  Status st = ops::cudaTarget().checkKernel(s);
  EXPECT_NE(st.message().find("no broadcasting of Scale and B"), std::string::npos) << st.message();
  s.inputs[1].shape = {3, 4};
  EXPECT_TRUE(ops::cudaTarget().checkKernel(s).isOk())
      << ops::cudaTarget().checkKernel(s).message();
}

} // namespace
} // namespace dtc::gputest
