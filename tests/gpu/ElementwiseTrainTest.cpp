// The CUDA reductions, losses and optimizers (ops/cuda/Reduce.cu, Loss.cu, Optimizer.cu): the
// reduction plan and the optimizer math of TrainingUtil.cuh against the CPU kernels (host
// path, no GPU needed), and every kernel against its CPU kernel (skipped without a GPU).
#include "tests/gpu/GpuTestUtil.h"

#include "ops/cpu/Kernel.h"
#include "ops/cuda/TrainingUtil.cuh"
#include "ops/kernel/Target.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace dtc::gputest {
namespace {

using ir::DType;
using ops::cuda::ReduceOp;
using ops::cuda::ReducePlan;
using ops::cuda::ReduceShape;

/// A reduction spec: input `in`, output `out`, axes (an i64 input when not empty).
ops::KernelSpec reduceSpec(const std::string &op, const std::vector<int64_t> &in,
                           const std::vector<int64_t> &axes, const std::vector<int64_t> &out,
                           bool keepdims, DType dtype = DType::kFloat32, bool noop = false) {
  ops::KernelSpec spec =
      axes.empty() ? makeSpec(op, {in}, {out}, dtype)
                   : makeSpec(op, {in, {static_cast<int64_t>(axes.size())}}, {out}, dtype);
  if (!axes.empty())
    spec.inputs[1].dtype = DType::kInt64;
  spec.attrs["keepdims"] = int64_t{keepdims ? 1 : 0};
  spec.attrs["noop_with_empty_axes"] = int64_t{noop ? 1 : 0};
  return spec;
}

ReduceShape shapeOf(const ops::KernelSpec &spec) {
  ReduceShape s{};
  s.rank = static_cast<int>(spec.inputs[0].shape.size());
  s.outRank = static_cast<int>(spec.outputs[0].shape.size());
  for (int d = 0; d < s.rank; ++d)
    s.in[d] = spec.inputs[0].shape[static_cast<size_t>(d)];
  for (int d = 0; d < s.outRank; ++d)
    s.out[d] = spec.outputs[0].shape[static_cast<size_t>(d)];
  s.keepdims = spec.attrInt("keepdims", 1) != 0;
  s.noopWithEmptyAxes = spec.attrInt("noop_with_empty_axes", 0) != 0;
  return s;
}

/// The reduction the CUDA kernels compute, on the host, from the same plan and math.
template <typename T, typename A>
std::vector<T> hostReduce(ReduceOp op, const ReducePlan &p, const std::vector<T> &x,
                          int64_t outCount) {
  std::vector<T> y;
  for (int64_t o = 0; o < outCount; ++o) {
    const int64_t base = p.keptOffset(o);
    A acc = ops::cuda::reduceInit<A>(op);
    for (int64_t r = 0; r < p.mid; ++r)
      acc = ops::cuda::reduceStep<A>(
          op, acc, static_cast<A>(x[static_cast<size_t>(base + p.reducedOffset(r))]));
    if constexpr (!std::is_integral_v<A>) {
      if (op == ReduceOp::kLogSumExp && std::isfinite(acc)) {
        double s = 0.0;
        for (int64_t r = 0; r < p.mid; ++r)
          s += std::exp(static_cast<double>(x[static_cast<size_t>(base + p.reducedOffset(r))]) -
                        acc);
        acc += std::log(s);
      }
    }
    y.push_back(static_cast<T>(ops::cuda::reduceFinish(op, acc, p.mid)));
  }
  return y;
}

struct ReduceCase {
  std::vector<int64_t> in, axes, out;
  bool keepdims;
};

/// Shapes the bundled models reduce (bias gradients, layer-norm means, global pooling) and edge
/// cases (size-1 axes, no axes, negative axes, non-contiguous reduced axes, empty inputs).
std::vector<ReduceCase> reduceCases() {
  return {
      {{8, 10}, {0}, {1, 10}, true},
      {{32, 64}, {0}, {1, 64}, true},
      {{2, 16, 64}, {-1}, {2, 16, 1}, true},
      {{2, 16, 64}, {2}, {2, 16}, false},
      {{4, 3, 5, 5}, {0, 2, 3}, {3}, false},
      {{4, 3, 5, 5}, {2, 3}, {4, 3, 1, 1}, true},
      {{3, 1, 4}, {1}, {3, 4}, false},
      {{3, 1, 4}, {1}, {3, 1, 4}, true},
      {{5, 7}, {}, {1, 1}, true},
      {{5, 7}, {}, {}, false},
      {{2, 3, 4, 5}, {0, 2}, {3, 5}, false},
      {{6, 0, 3}, {1}, {6, 1, 3}, true},
      {{7}, {0}, {}, false},
      {{300, 70}, {0}, {1, 70}, true},
      {{2, 200, 3}, {1}, {2, 3}, false},
      {{2, 3, 300}, {1, 2}, {2, 1, 1}, true},
  };
}

const std::vector<std::string> kReduceOps = {"ReduceSum", "ReduceMean",      "ReduceMax",
                                             "ReduceMin", "ReduceProd",      "ReduceL1",
                                             "ReduceL2",  "ReduceLogSumExp", "ReduceSumSquare"};

// ---------------------------------------------------------------------------------------------
// Host path against the CPU kernels (no GPU needed).

TEST(CudaReduceMath, PlanAndMathMatchCpuKernels) {
  for (const ReduceCase &c : reduceCases()) {
    for (const std::string &name : kReduceOps) {
      for (DType dt : {DType::kFloat32, DType::kInt64}) {
        if (dt == DType::kInt64 && (name == "ReduceL2" || name == "ReduceLogSumExp"))
          continue;
        ops::KernelSpec spec = reduceSpec(name, c.in, c.axes, c.out, c.keepdims, dt);
        std::vector<Fill> fills = {dt == DType::kInt64 ? range(-3, 4) : range(-2, 2),
                                   given(bytesOf(c.axes))};
        std::vector<HostTensor> in = randomInputs(spec, 3, fills);
        std::vector<HostTensor> cpu = runCpu(spec, in);
        ASSERT_EQ(cpu.size(), 1u) << spec.where();
        ReducePlan plan{};
        ops::cuda::buildReducePlan(shapeOf(spec), c.axes.data(),
                                   static_cast<int64_t>(c.axes.size()), plan);
        ASSERT_EQ(plan.ok, 1) << spec.where() << " " << ops::shapeStr(c.in);
        ReduceOp op;
        ASSERT_TRUE(ops::cuda::reduceOpOf(name, op));
        const int64_t outCount = spec.outputs[0].numElements();
        const std::string what = spec.where() + " " + ops::shapeStr(c.in) + " axes " +
                                 ops::shapeStr(c.axes) + " keepdims " + std::to_string(c.keepdims);
        if (dt == DType::kInt64) {
          EXPECT_EQ((hostReduce<int64_t, int64_t>(op, plan, valuesOf<int64_t>(in[0]), outCount)),
                    valuesOf<int64_t>(cpu[0]))
              << what;
          continue;
        }
        std::vector<float> mine =
            hostReduce<float, double>(op, plan, valuesOf<float>(in[0]), outCount);
        std::vector<float> want = valuesOf<float>(cpu[0]);
        ASSERT_EQ(mine.size(), want.size()) << what;
        for (size_t i = 0; i < mine.size(); ++i)
          EXPECT_TRUE((std::isnan(mine[i]) && std::isnan(want[i])) || mine[i] == want[i] ||
                      std::fabs(mine[i] - want[i]) <= 1e-5 + 1e-5 * std::fabs(want[i]))
              << what << " element " << i << ": " << mine[i] << " vs CPU " << want[i];
      }
    }
  }
}

TEST(CudaReduceMath, BadAxesAreRejectedLikeTheCpu) {
  // (axes, keepdims): out of range, named twice, or not giving the plan's output shape.
  const std::vector<std::vector<int64_t>> bad = {{2}, {-3}, {0, 0}, {1, -1}};
  for (const std::vector<int64_t> &axes : bad) {
    ops::KernelSpec spec = reduceSpec("ReduceSum", {4, 5}, axes, {4, 1}, true);
    ReducePlan plan{};
    ops::cuda::buildReducePlan(shapeOf(spec), axes.data(), static_cast<int64_t>(axes.size()), plan);
    EXPECT_EQ(plan.ok, 0) << ops::shapeStr(axes);
  }
  // Axis 0 gives [1, 5], not the plan's [4, 1].
  const std::vector<int64_t> axis0 = {0};
  ops::KernelSpec spec = reduceSpec("ReduceSum", {4, 5}, axis0, {4, 1}, true);
  ReducePlan plan{};
  ops::cuda::buildReducePlan(shapeOf(spec), axis0.data(), 1, plan);
  EXPECT_EQ(plan.ok, 0);
  // Without keepdims, [3, 3] -> [3] is ambiguous from the shapes alone: the run-time axes
  // decide, and both plans are built.
  ops::KernelSpec amb = reduceSpec("ReduceSum", {3, 3}, {1}, {3}, false);
  for (int64_t a : {0, 1}) {
    ReducePlan p{};
    ops::cuda::buildReducePlan(shapeOf(amb), &a, 1, p);
    ASSERT_EQ(p.ok, 1);
    EXPECT_EQ(p.redStrides[0], a == 0 ? 3 : 1);
  }
}

TEST(CudaReduceMath, ArgMaxArgMinMatchCpuKernel) {
  std::vector<float> x;
  for (int i = 0; i < 60; ++i)
    x.push_back(static_cast<float>((i * 7) % 5)); // ties
  x[13] = std::numeric_limits<float>::quiet_NaN();
  x[44] = std::numeric_limits<float>::quiet_NaN();
  for (const char *op : {"ArgMax", "ArgMin"})
    for (int64_t axis : {0, 1, -1})
      for (int64_t last : {0, 1}) {
        std::vector<int64_t> out = {3, 4, 5};
        out[static_cast<size_t>(axis < 0 ? 2 : axis)] = 1;
        ops::KernelSpec spec = makeSpec(op, {{3, 4, 5}}, {out});
        spec.outputs[0].dtype = DType::kInt64;
        spec.attrs["axis"] = axis;
        spec.attrs["select_last_index"] = last;
        std::vector<HostTensor> cpu = runCpu(spec, {{spec.inputs[0], bytesOf(x)}});
        ASSERT_EQ(cpu.size(), 1u);
        const int64_t a = axis < 0 ? 2 : axis;
        const int64_t n = spec.inputs[0].shape[static_cast<size_t>(a)];
        int64_t outer = 1, inner = 1;
        for (int64_t k = 0; k < 3; ++k) {
          if (k < a)
            outer *= spec.inputs[0].shape[static_cast<size_t>(k)];
          else if (k > a)
            inner *= spec.inputs[0].shape[static_cast<size_t>(k)];
        }
        std::vector<int64_t> mine;
        for (int64_t o = 0; o < outer * inner; ++o) {
          const int64_t q = o / inner, i = o - q * inner;
          mine.push_back(ops::cuda::argReduceLine<float>(x.data() + q * n * inner + i, n, inner,
                                                         std::string(op) == "ArgMax", last != 0));
        }
        EXPECT_EQ(mine, valuesOf<int64_t>(cpu[0])) << op << " axis " << axis << " last " << last;
      }
}

TEST(CudaOptimizerMath, StepsMatchCpuKernels) {
  struct Case {
    std::string op;
    std::map<std::string, ir::Attribute> attrs;
    int64_t step;
    bool gradScale;
  };
  const std::vector<Case> cases = {
      {"SGD", {{"momentum", 0.f}, {"weight_decay", 0.f}}, 0, false},
      {"SGD", {{"momentum", 0.f}, {"weight_decay", 0.01f}}, 0, true},
      {"SGD", {{"momentum", 0.9f}, {"nesterov", int64_t{0}}, {"weight_decay", 0.f}}, 0, false},
      {"SGD", {{"momentum", 0.9f}, {"nesterov", int64_t{1}}, {"weight_decay", 1e-4f}}, 0, true},
      {"Adam",
       {{"beta1", 0.9f}, {"beta2", 0.999f}, {"epsilon", 1e-8f}, {"weight_decay", 0.f}},
       0,
       false},
      {"Adam",
       {{"beta1", 0.8f}, {"beta2", 0.99f}, {"epsilon", 1e-6f}, {"weight_decay", 0.1f}},
       7,
       true},
      {"AdamW",
       {{"beta1", 0.9f}, {"beta2", 0.999f}, {"epsilon", 1e-8f}, {"weight_decay", 0.01f}},
       3,
       false},
  };
  const int64_t n = 1000;
  const float lr = 0.05f, scale = 0.7f;
  for (const Case &c : cases) {
    const bool sgd = c.op == "SGD";
    const bool momentum = sgd && c.attrs.at("momentum").f() != 0.f;
    std::vector<std::vector<int64_t>> ins = {{n}, {n}, {}};
    if (sgd) {
      ins.push_back({n});
      if (c.gradScale)
        ins.push_back({});
    } else {
      ins.push_back({});
      ins.push_back({n});
      ins.push_back({n});
      if (c.gradScale)
        ins.push_back({});
    }
    ops::KernelSpec spec = makeSpec(c.op, ins,
                                    sgd ? std::vector<std::vector<int64_t>>(momentum ? 2 : 1, {n})
                                        : std::vector<std::vector<int64_t>>(3, {n}),
                                    DType::kFloat32, "ai.dtc");
    spec.attrs = c.attrs;
    if (sgd && !momentum)
      spec.inputs[3].dtype = DType::kUndefined;
    if (!sgd)
      spec.inputs[3].dtype = DType::kInt64;
    std::vector<Fill> fills = {range(-1, 1), range(-1, 1), given(bytesOf(std::vector<float>{lr}))};
    if (sgd)
      fills.push_back(momentum ? range(-0.5, 0.5) : Fill{});
    else {
      fills.push_back(given(bytesOf(std::vector<int64_t>{c.step})));
      fills.push_back(range(-0.1, 0.1));
      fills.push_back(range(0, 0.01));
    }
    if (c.gradScale)
      fills.push_back(given(bytesOf(std::vector<float>{scale})));
    std::vector<HostTensor> in = randomInputs(spec, 5, fills);
    std::vector<HostTensor> cpu = runCpu(spec, in);
    ASSERT_EQ(cpu.size(), spec.outputs.size()) << c.op;
    const std::vector<float> p = valuesOf<float>(in[0]), g = valuesOf<float>(in[1]);
    const float s = c.gradScale ? scale : 1.f;
    std::vector<std::vector<float>> mine(spec.outputs.size());
    if (sgd) {
      const std::vector<float> b = momentum ? valuesOf<float>(in[3]) : std::vector<float>(n, 0.f);
      for (int64_t i = 0; i < n; ++i) {
        float pi = p[i], bi = b[i];
        ops::cuda::sgdStep(lr, spec.attrFloat("momentum", 0.f), spec.attrInt("nesterov", 0) != 0,
                           spec.attrFloat("weight_decay", 0.f), s, g[i], pi, bi);
        mine[0].push_back(pi);
        if (momentum)
          mine[1].push_back(bi);
      }
    } else {
      const std::vector<float> m = valuesOf<float>(in[4]), v = valuesOf<float>(in[5]);
      const float b1 = spec.attrFloat("beta1", 0.9f), b2 = spec.attrFloat("beta2", 0.999f);
      const float wd = spec.attrFloat("weight_decay", 0.f);
      const ops::cuda::AdamScalars sc = ops::cuda::adamScalars(lr, c.step, b1, b2, wd);
      for (int64_t i = 0; i < n; ++i) {
        float pi = p[i], mi = m[i], vi = v[i];
        ops::cuda::adamStep(c.op == "AdamW", sc, b1, b2, spec.attrFloat("epsilon", 1e-8f), wd, s,
                            g[i], pi, mi, vi);
        mine[0].push_back(pi);
        mine[1].push_back(mi);
        mine[2].push_back(vi);
      }
    }
    for (size_t o = 0; o < mine.size(); ++o) {
      const std::vector<float> want = valuesOf<float>(cpu[o]);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(mine[o][static_cast<size_t>(i)], want[static_cast<size_t>(i)],
                    1e-6 + 1e-6 * std::fabs(want[static_cast<size_t>(i)]))
            << c.op << " output " << o << " element " << i;
    }
  }
}

TEST(CudaOptimizerMath, ClipGradNormScaleMatchesCpuKernel) {
  for (float sum : {0.f, 0.25f, 4.f, 1e6f, std::numeric_limits<float>::quiet_NaN()}) {
    ops::KernelSpec spec = makeSpec("ClipGradNormScale", {{}, {}}, {{}}, DType::kFloat32, "ai.dtc");
    spec.attrs["max_norm"] = 1.5f;
    spec.attrs["input_scale"] = 0.5f;
    const float a = sum * 0.25f, b = sum * 0.75f;
    std::vector<HostTensor> cpu = runCpu(spec, {{spec.inputs[0], bytesOf(std::vector<float>{a})},
                                                {spec.inputs[1], bytesOf(std::vector<float>{b})}});
    const float want = valuesOf<float>(cpu[0])[0];
    const float mine = ops::cuda::clipGradNormScale(static_cast<double>(a) + b, 1.5f, 0.5f);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(mine));
    else
      EXPECT_EQ(mine, want) << sum;
  }
}

/// Labels in [0, C) with every fifth one ignored (-100).
Fill labelFill(int64_t count, int64_t classes, DType dtype) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < count; ++i)
    v.push_back(i % 5 == 3 ? -100 : (i * 7 + 3) % classes);
  if (dtype == DType::kInt64)
    return given(bytesOf(v));
  std::vector<int32_t> w(v.begin(), v.end());
  return given(bytesOf(w));
}

/// The host path of the loss kernels (one thread per sample) for one spec: returns the
/// outputs as the CUDA kernels compute them. `slot` receives an out-of-range label's site.
std::vector<std::vector<float>> hostLoss(const ops::KernelSpec &spec,
                                         const std::vector<HostTensor> &in, int &slot) {
  const bool grad = spec.domain == "ai.dtc";
  const bool softmax = spec.op.rfind("SoftmaxCrossEntropyLoss", 0) == 0;
  const size_t labelsInput = grad ? (softmax ? 2 : 1) : 1;
  const std::vector<int64_t> &scores = grad ? spec.outputs[0].shape : spec.inputs[0].shape;
  ops::cuda::LossShape s{};
  s.n = scores[0];
  s.c = scores[1];
  s.d = 1;
  for (size_t i = 2; i < scores.size(); ++i)
    s.d *= scores[i];
  s.labels32 = spec.inputs[labelsInput].dtype == DType::kInt32;
  s.hasIgnore = spec.attrs.count("ignore_index") > 0;
  s.ignore = spec.attrInt("ignore_index", 0);
  const std::string r = spec.attrString("reduction", "mean");
  s.reduction = r == "none" ? 0 : r == "sum" ? 1 : 2;
  s.site = 7;
  auto ptr = [&](size_t i) -> const void * {
    return i < in.size() && in[i].desc.present() ? in[i].bytes.data() : nullptr;
  };
  const float *w = static_cast<const float *>(ptr(labelsInput + 1));
  const int64_t samples = s.samples();
  std::vector<std::vector<float>> out;
  for (const ops::TensorDesc &d : spec.outputs)
    out.emplace_back(static_cast<size_t>(d.numElements()), 0.f);
  if (!grad) {
    std::vector<double> scratch(static_cast<size_t>(2 * samples));
    for (int64_t i = 0; i < samples; ++i)
      ops::cuda::lossSample(s, softmax, static_cast<const float *>(ptr(0)), ptr(1), w,
                            out[0].data(), out.size() > 1 ? out[1].data() : nullptr, scratch.data(),
                            &slot, i, 0, 1, nullptr, nullptr);
    if (s.reduction != 0) {
      double l = 0.0, wt = 0.0;
      for (int64_t i = 0; i < samples; ++i) {
        l += scratch[static_cast<size_t>(i)];
        wt += scratch[static_cast<size_t>(samples + i)];
      }
      out[0][0] = static_cast<float>(s.reduction == 2 ? l / wt : l);
    }
    return out;
  }
  const float *dloss = static_cast<const float *>(ptr(0));
  double g = 0.0;
  if (s.reduction != 0) {
    double wt = 0.0;
    for (int64_t i = 0; i < samples; ++i) {
      const int64_t y = ops::cuda::sampleLabel(s, ptr(labelsInput), i, &slot);
      if (y >= 0)
        wt += w ? w[y] : 1.f;
    }
    g = s.reduction == 2 ? static_cast<double>(dloss[0]) / wt : static_cast<double>(dloss[0]);
  }
  for (int64_t i = 0; i < samples; ++i) {
    if (softmax) {
      ops::cuda::sceGradSample(s, dloss, static_cast<const float *>(ptr(1)), ptr(2), w,
                               static_cast<const float *>(ptr(4)), &g, out[0].data(), &slot, i, 0,
                               1, nullptr, nullptr);
    } else {
      int64_t y;
      const float scale = ops::cuda::sampleScale(s, dloss, ptr(1), w, &g, i, &slot, y);
      const int64_t n = i / s.d, j = i - n * s.d;
      if (y >= 0)
        out[0][static_cast<size_t>((n * s.c + y) * s.d + j)] = -scale;
    }
  }
  return out;
}

void expectLossMatchesCpu(const ops::KernelSpec &spec, const std::vector<Fill> &fills) {
  std::vector<HostTensor> in = randomInputs(spec, 9, fills);
  std::vector<HostTensor> cpu = runCpu(spec, in);
  ASSERT_EQ(cpu.size(), spec.outputs.size()) << spec.where();
  int slot = 0;
  std::vector<std::vector<float>> mine = hostLoss(spec, in, slot);
  EXPECT_EQ(slot, 0) << spec.where();
  for (size_t o = 0; o < cpu.size(); ++o) {
    const std::vector<float> want = valuesOf<float>(cpu[o]);
    ASSERT_EQ(mine[o].size(), want.size());
    int reported = 0;
    for (size_t i = 0; i < want.size() && reported < 5; ++i)
      if (!((std::isnan(mine[o][i]) && std::isnan(want[i])) ||
            std::fabs(mine[o][i] - want[i]) <= 1e-6 + 1e-5 * std::fabs(want[i]))) {
        ++reported;
        ADD_FAILURE() << spec.where() << " " << spec.attrString("reduction", "mean") << " "
                      << spec.outputs[0].str() << " output " << o << " element " << i << ": "
                      << mine[o][i] << " vs CPU " << want[i];
      }
  }
}

TEST(CudaLossMath, ForwardAndGradientsMatchCpuKernels) {
  const std::vector<std::vector<int64_t>> shapes = {{8, 10}, {2, 65, 16}, {2, 3, 4, 4}};
  for (const auto &sc : shapes) {
    std::vector<int64_t> perSample = sc;
    perSample.erase(perSample.begin() + 1);
    int64_t samples = sc[0];
    for (size_t i = 2; i < sc.size(); ++i)
      samples *= sc[i];
    for (const char *reduction : {"mean", "sum", "none"}) {
      for (bool weights : {false, true}) {
        std::vector<std::vector<int64_t>> ins = {sc, perSample};
        ins.push_back(weights ? std::vector<int64_t>{sc[1]} : std::vector<int64_t>{});
        for (const char *op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}) {
          const bool sce = std::string(op) == "SoftmaxCrossEntropyLoss";
          std::vector<std::vector<int64_t>> outs = {
              std::string(reduction) == "none" ? perSample : std::vector<int64_t>{}};
          if (sce)
            outs.push_back(sc);
          ops::KernelSpec spec = makeSpec(op, ins, outs);
          spec.inputs[1].dtype = DType::kInt64;
          if (!weights)
            spec.inputs[2].dtype = DType::kUndefined;
          spec.attrs["reduction"] = reduction;
          spec.attrs["ignore_index"] = int64_t{-100};
          expectLossMatchesCpu(spec, {range(-3, sce ? 3 : 0),
                                      labelFill(samples, sc[1], DType::kInt64), range(0.5, 2)});
        }
        const std::vector<int64_t> dloss =
            std::string(reduction) == "none" ? perSample : std::vector<int64_t>{};
        for (bool dlp : {false, true}) {
          std::vector<std::vector<int64_t>> gin = {
              dloss, sc, perSample, weights ? std::vector<int64_t>{sc[1]} : std::vector<int64_t>{}};
          if (dlp)
            gin.push_back(sc);
          ops::KernelSpec sceGrad =
              makeSpec("SoftmaxCrossEntropyLossGrad", gin, {sc}, DType::kFloat32, "ai.dtc");
          sceGrad.inputs[2].dtype = DType::kInt32;
          if (!weights)
            sceGrad.inputs[3].dtype = DType::kUndefined;
          sceGrad.attrs["reduction"] = reduction;
          sceGrad.attrs["ignore_index"] = int64_t{-100};
          expectLossMatchesCpu(sceGrad, {range(0.5, 1.5), range(-3, 3),
                                         labelFill(samples, sc[1], DType::kInt32), range(0.5, 2),
                                         range(-0.1, 0.1)});
        }
        std::vector<std::vector<int64_t>> nin = {dloss, perSample};
        if (weights)
          nin.push_back({sc[1]});
        ops::KernelSpec nll =
            makeSpec("NegativeLogLikelihoodLossGrad", nin, {sc}, DType::kFloat32, "ai.dtc");
        nll.inputs[1].dtype = DType::kInt64;
        nll.attrs["reduction"] = reduction;
        nll.attrs["ignore_index"] = int64_t{-100};
        expectLossMatchesCpu(
            nll, {range(0.5, 1.5), labelFill(samples, sc[1], DType::kInt64), range(0.5, 2)});
      }
    }
  }
}

TEST(CudaLossMath, OutOfRangeLabelIsReported) {
  ops::cuda::LossShape s{};
  s.n = 2;
  s.c = 3;
  s.d = 1;
  s.hasIgnore = true;
  s.ignore = -100;
  s.site = 5;
  const std::vector<int64_t> labels = {-100, 3};
  int slot = 0;
  EXPECT_EQ(ops::cuda::sampleLabel(s, labels.data(), 0, &slot), -1);
  EXPECT_EQ(slot, 0);
  EXPECT_EQ(ops::cuda::sampleLabel(s, labels.data(), 1, &slot), -1);
  EXPECT_EQ(slot, 5);
  // The CPU kernel refuses the same label.
  ops::KernelSpec spec = makeSpec("SoftmaxCrossEntropyLoss", {{2, 3}, {2}}, {{}});
  spec.inputs[1].dtype = DType::kInt64;
  spec.attrs["ignore_index"] = int64_t{-100};
  ops::cpu::CpuContext ctx;
  auto k = ops::cpu::createKernel(spec, ctx);
  ASSERT_TRUE(k.hasValue()) << k.status().message();
  const std::vector<float> x(6, 0.f);
  float loss = 0.f;
  const void *ins[] = {x.data(), labels.data()};
  void *outs[] = {&loss};
  EXPECT_FALSE((*k)->run({ins, 2, outs, 1}).isOk());
}

TEST(CudaTrainTarget, ChecksWithoutAGpu) {
  const ops::Target &t = ops::cudaTarget();
  ops::KernelSpec sum = reduceSpec("ReduceSum", {8, 10}, {0}, {1, 10}, true);
  EXPECT_TRUE(t.checkKernel(sum).isOk()) << t.checkKernel(sum).message();
  ops::KernelSpec sce = makeSpec("SoftmaxCrossEntropyLossGrad", {{}, {8, 10}, {8}}, {{8, 10}},
                                 DType::kFloat32, "ai.dtc");
  sce.inputs[2].dtype = DType::kInt64;
  sce.attrs["reduction"] = "mean";
  EXPECT_TRUE(t.checkKernel(sce).isOk()) << t.checkKernel(sce).message();
  EXPECT_EQ(t.inPlaceInput(sce), 1);
  ops::KernelSpec adam =
      makeSpec("Adam", {{4}, {4}, {}, {}, {4}, {4}}, {{4}, {4}, {4}}, DType::kFloat32, "ai.dtc");
  adam.inputs[3].dtype = DType::kInt64;
  EXPECT_TRUE(t.checkKernel(adam).isOk()) << t.checkKernel(adam).message();
  EXPECT_EQ(t.inPlaceInput(adam), 0);
  // The vocabulary-parallel loss's label check: a view of its labels.
  ops::KernelSpec check = makeSpec("CheckLabels", {{8, 16}}, {{8, 16}}, DType::kInt64, "ai.dtc");
  check.attrs["classes"] = int64_t{64};
  EXPECT_TRUE(t.checkKernel(check).isOk()) << t.checkKernel(check).message();
  EXPECT_TRUE(t.isViewOp("ai.dtc", "CheckLabels"));
}

// ---------------------------------------------------------------------------------------------
// CUDA kernels against the CPU kernels (skipped without a GPU).

TEST(CudaReduce, EveryOpShapeAndDtype) {
  for (const ReduceCase &c : reduceCases())
    for (const std::string &name : kReduceOps) {
      // The CPU sums some axis sets in f32 (oneDNN), the CUDA kernels in double.
      expectParity(reduceSpec(name, c.in, c.axes, c.out, c.keepdims),
                   {range(-2, 2), given(bytesOf(c.axes))}, 2e-5, 1e-5);
      if (name != "ReduceL2" && name != "ReduceLogSumExp")
        expectParity(reduceSpec(name, c.in, c.axes, c.out, c.keepdims, DType::kInt64),
                     {range(-3, 4), given(bytesOf(c.axes))});
    }
}

TEST(CudaReduce, LargeRowsAndNoopWithEmptyAxes) {
  // Long rows (one block per output) and long columns (one thread per output).
  expectParity(reduceSpec("ReduceSum", {3, 100000}, {1}, {3, 1}, true),
               {range(-1, 1), given(bytesOf(std::vector<int64_t>{1}))}, 1e-5, 1e-5);
  expectParity(reduceSpec("ReduceMean", {4096, 33}, {0}, {1, 33}, true),
               {range(-1, 1), given(bytesOf(std::vector<int64_t>{0}))}, 1e-5, 1e-6);
  expectParity(reduceSpec("ReduceMax", {3, 5000}, {1}, {3}, false),
               {range(-1, 1), given(bytesOf(std::vector<int64_t>{1}))});
  // No axes with noop_with_empty_axes: a copy (L1 takes |x|).
  expectParity(reduceSpec("ReduceL1", {4, 6}, {}, {4, 6}, true, DType::kFloat32, true));
  expectParity(reduceSpec("ReduceSum", {4, 6}, {}, {4, 6}, true, DType::kFloat32, true));
}

TEST(CudaReduce, ArgMaxArgMin) {
  for (const char *op : {"ArgMax", "ArgMin"})
    for (DType dt : {DType::kFloat32, DType::kInt64, DType::kInt32})
      for (int64_t axis : {0, 1, 2}) {
        std::vector<int64_t> out = {7, 33, 65};
        out[static_cast<size_t>(axis)] = 1;
        ops::KernelSpec spec = makeSpec(op, {{7, 33, 65}}, {out}, dt);
        spec.outputs[0].dtype = DType::kInt64;
        spec.attrs["axis"] = axis;
        spec.attrs["select_last_index"] = int64_t{axis == 1};
        expectParity(spec, {range(-5, 5)});
      }
}

TEST(CudaReduce, NanPropagatesThroughMaxAndMin) {
  std::vector<float> x(64, 1.f);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  x[40] = -std::numeric_limits<float>::infinity();
  for (const char *op : {"ReduceMax", "ReduceMin", "ReduceLogSumExp"})
    expectParity(reduceSpec(op, {2, 32}, {1}, {2, 1}, true),
                 {given(bytesOf(x)), given(bytesOf(std::vector<int64_t>{1}))});
}

/// Loss specs: scores (N, C, d...), labels (N, d...), optional weights.
ops::KernelSpec lossSpec(const std::string &op, const std::vector<int64_t> &scores,
                         const std::string &reduction, bool weights, bool logProb,
                         DType labels = DType::kInt64) {
  std::vector<int64_t> perSample = scores;
  perSample.erase(perSample.begin() + 1);
  std::vector<std::vector<int64_t>> ins = {scores, perSample};
  if (weights)
    ins.push_back({scores[1]});
  std::vector<std::vector<int64_t>> outs = {reduction == "none" ? perSample
                                                                : std::vector<int64_t>{}};
  if (logProb)
    outs.push_back(scores);
  ops::KernelSpec spec = makeSpec(op, ins, outs);
  spec.inputs[1].dtype = labels;
  spec.attrs["reduction"] = reduction;
  spec.attrs["ignore_index"] = int64_t{-100};
  return spec;
}

TEST(CudaLoss, ForwardShapesReductionsWeights) {
  // mlp (8, 10), gpt with the class axis moved to 1 (2, 65, 16), unet-like (2, 3, 8, 8), and
  // a large class count (one block per sample with many classes per thread).
  const std::vector<std::vector<int64_t>> shapes = {{8, 10}, {2, 65, 16}, {2, 3, 8, 8}, {4, 5000}};
  for (const auto &s : shapes) {
    int64_t samples = s[0];
    for (size_t i = 2; i < s.size(); ++i)
      samples *= s[i];
    for (const char *reduction : {"mean", "sum", "none"})
      for (bool weights : {false, true})
        for (DType lt : {DType::kInt64, DType::kInt32}) {
          expectParity(lossSpec("SoftmaxCrossEntropyLoss", s, reduction, weights, true, lt),
                       {range(-3, 3), labelFill(samples, s[1], lt), range(0.5, 2)}, 1e-5, 1e-6);
          expectParity(lossSpec("NegativeLogLikelihoodLoss", s, reduction, weights, false, lt),
                       {range(-3, 0), labelFill(samples, s[1], lt), range(0.5, 2)}, 1e-5, 1e-6);
        }
  }
}

TEST(CudaLoss, CheckLabelsPassesLabelsInRange) {
  // The tied GPT's labels (8, 16) in [0, 64), i64 and i32, with ignore_index (-100) among them:
  // copied unchanged.
  for (DType lt : {DType::kInt64, DType::kInt32}) {
    ops::KernelSpec spec = makeSpec("CheckLabels", {{8, 16}}, {{8, 16}}, lt, "ai.dtc");
    spec.attrs["classes"] = int64_t{64};
    spec.attrs["ignore_index"] = int64_t{-100};
    expectParity(spec, {labelFill(8 * 16, 64, lt)});
  }
}

TEST(CudaLoss, GradientsShapesReductionsWeights) {
  const std::vector<std::vector<int64_t>> shapes = {{8, 10}, {2, 65, 16}, {2, 3, 8, 8}, {4, 5000}};
  for (const auto &s : shapes) {
    std::vector<int64_t> perSample = s;
    perSample.erase(perSample.begin() + 1);
    int64_t samples = s[0];
    for (size_t i = 2; i < s.size(); ++i)
      samples *= s[i];
    for (const char *reduction : {"mean", "sum", "none"}) {
      const std::vector<int64_t> dloss =
          std::string(reduction) == "none" ? perSample : std::vector<int64_t>{};
      for (bool weights : {false, true})
        for (bool dlp : {false, true}) {
          std::vector<std::vector<int64_t>> ins = {dloss, s, perSample};
          ins.push_back(weights ? std::vector<int64_t>{s[1]} : std::vector<int64_t>{});
          if (dlp)
            ins.push_back(s);
          ops::KernelSpec sce =
              makeSpec("SoftmaxCrossEntropyLossGrad", ins, {s}, DType::kFloat32, "ai.dtc");
          sce.inputs[2].dtype = DType::kInt64;
          if (!weights)
            sce.inputs[3].dtype = DType::kUndefined;
          sce.attrs["reduction"] = reduction;
          sce.attrs["ignore_index"] = int64_t{-100};
          expectParity(sce,
                       {range(0.5, 1.5), range(-3, 3), labelFill(samples, s[1], DType::kInt64),
                        range(0.5, 2), range(-0.1, 0.1)},
                       1e-5, 1e-6);
        }
      for (bool weights : {false, true}) {
        std::vector<std::vector<int64_t>> ins = {dloss, perSample};
        if (weights)
          ins.push_back({s[1]});
        ops::KernelSpec nll =
            makeSpec("NegativeLogLikelihoodLossGrad", ins, {s}, DType::kFloat32, "ai.dtc");
        nll.inputs[1].dtype = DType::kInt32;
        nll.attrs["reduction"] = reduction;
        nll.attrs["ignore_index"] = int64_t{-100};
        expectParity(nll, {range(0.5, 1.5), labelFill(samples, s[1], DType::kInt32), range(0.5, 2)},
                     1e-5, 1e-6);
      }
    }
  }
}

TEST(CudaOptimizer, SgdAdamAdamW) {
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{128 * 784}}) {
    for (float momentum : {0.f, 0.9f})
      for (int64_t nesterov : {0, 1}) {
        if (momentum == 0.f && nesterov)
          continue;
        ops::KernelSpec sgd = makeSpec("SGD", {{n}, {n}, {}, {n}, {}},
                                       std::vector<std::vector<int64_t>>(momentum ? 2 : 1, {n}),
                                       DType::kFloat32, "ai.dtc");
        if (momentum == 0.f)
          sgd.inputs[3].dtype = DType::kUndefined;
        sgd.attrs["momentum"] = momentum;
        sgd.attrs["nesterov"] = nesterov;
        sgd.attrs["weight_decay"] = 1e-4f;
        expectParity(sgd, {range(-1, 1), range(-1, 1), given(bytesOf(std::vector<float>{0.1f})),
                           range(-0.5, 0.5), given(bytesOf(std::vector<float>{0.8f}))});
      }
    for (const char *op : {"Adam", "AdamW"}) {
      ops::KernelSpec adam =
          makeSpec(op, {{n}, {n}, {}, {}, {n}, {n}}, {{n}, {n}, {n}}, DType::kFloat32, "ai.dtc");
      adam.inputs[3].dtype = DType::kInt64;
      adam.attrs["beta1"] = 0.9f;
      adam.attrs["beta2"] = 0.999f;
      adam.attrs["epsilon"] = 1e-8f;
      adam.attrs["weight_decay"] = 0.01f;
      for (int64_t step : {0, 9})
        expectParity(adam,
                     {range(-1, 1), range(-1, 1), given(bytesOf(std::vector<float>{1e-3f})),
                      given(bytesOf(std::vector<int64_t>{step})), range(-0.1, 0.1), range(0, 0.01)},
                     1e-5, 1e-7);
    }
  }
}

TEST(CudaOptimizer, SumSquaresClipScaleZeroGradient) {
  // More tensors than one launch takes (32), of mixed sizes including a large one.
  std::vector<std::vector<int64_t>> grads;
  for (int i = 0; i < 70; ++i)
    grads.push_back({i == 5 ? 128 * 784 : (i % 7) * 33 + 1});
  expectParity(makeSpec("SumSquares", grads, {{}}, DType::kFloat32, "ai.dtc"), {}, 1e-5, 1e-6);
  std::vector<std::vector<int64_t>> scalars(40, std::vector<int64_t>{});
  ops::KernelSpec clip = makeSpec("ClipGradNormScale", scalars, {{}}, DType::kFloat32, "ai.dtc");
  clip.attrs["max_norm"] = 1.f;
  clip.attrs["input_scale"] = 0.5f;
  expectParity(clip, std::vector<Fill>(40, range(0, 2)), 1e-6, 1e-7);
  expectParity(makeSpec("ZeroGradient", {{1000}, {1000}}, {{1000}}, DType::kFloat32, "ai.dtc"));
}

} // namespace
} // namespace dtc::gputest
