// Tests of the CPU kernel registry (lookup, checkKernel errors, in-place and view rules, run
// argument checks) and of the data-movement kernels (views, Transpose, Concat).
#include "ops/comm/Collective.h"
#include "tests/unit/cpu/KernelTestUtil.h"

#include "ops/OpDef.h"

#include <algorithm>

namespace dtc::ops::cpu::test {
namespace {

TEST(CpuKernelRegistry, Lookup) {
  EXPECT_TRUE(hasKernel("", "Conv"));
  EXPECT_TRUE(hasKernel("ai.onnx", "Gemm"));
  EXPECT_TRUE(hasKernel("ai.dtc", "FusedConv"));
  EXPECT_FALSE(hasKernel("", "NoSuchOp"));
  EXPECT_FALSE(hasKernel("com.microsoft", "Conv"));
  EXPECT_TRUE(isViewOp("", "Reshape"));
  EXPECT_TRUE(isViewOp("", "Identity"));
  EXPECT_FALSE(isViewOp("", "Transpose"));
  std::vector<std::string> names = kernelOpNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "Add"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "Reorder"), names.end());
}

// Every operator in ops/Ops.def (ONNX ops the importer accepts, and dtc's own gradient, loss and
// optimizer ops) has a CPU kernel, in its canonical form: Constant nodes become initializers at
// import and Upsample becomes Resize, so those two need none.
TEST(CpuKernelRegistry, EveryOperatorHasAKernel) {
  const std::vector<const ops::OpDef *> &defs = ops::allOps();
  ASSERT_GT(defs.size(), 50u);
  size_t dtcOps = 0;
  for (const ops::OpDef *d : defs) {
    if (d->domain.empty() && (d->name == "Constant" || d->name == "Upsample"))
      continue;
    if (ops::isCollectiveOp(d->domain, d->name)) // a plan Collective instruction, no kernel
      continue;
    dtcOps += d->domain == ir::kDtcDomain;
    EXPECT_TRUE(hasKernel(d->domain, d->name)) << d->domain << "." << d->name;
  }
  EXPECT_GT(dtcOps, 10u);
}

TEST(CpuKernelRegistry, CheckErrors) {
  auto msg = [](const KernelSpec &s) { return checkKernel(s).message(); };
  EXPECT_EQ(msg(makeSpec("NoSuchOp", {f32({1})}, {f32({1})})),
            "node 'n0' (NoSuchOp): no CPU kernel for op 'NoSuchOp'");
  KernelSpec bad = makeSpec("Relu", {{ir::DType::kFloat64, {2}}}, {{ir::DType::kFloat64, {2}}});
  EXPECT_EQ(msg(bad), "node 'n0' (Relu): input 0 has dtype f64; the CPU kernel supports f32");
  EXPECT_EQ(msg(makeSpec("Add", {i64({2}), i64({2})}, {f32({2})})),
            "node 'n0' (Add): output 0 has dtype f32; the CPU kernel supports i64");
  EXPECT_EQ(msg(makeSpec("Add", {{ir::DType::kInt32, {2}}, f32({2})}, {f32({2})})),
            "node 'n0' (Add): input 0 has dtype i32; the CPU kernel supports f32 or i64");
  EXPECT_EQ(msg(makeSpec("Add", {f32({2})}, {f32({2})})),
            "node 'n0' (Add): expected 2 inputs, got 1");
  EXPECT_EQ(msg(makeSpec("Gemm", {f32({2, 2})}, {f32({2, 2})})),
            "node 'n0' (Gemm): expected 2 to 3 inputs, got 1");
  EXPECT_EQ(msg(makeSpec("Relu", {f32({2})}, {f32({2}), f32({2})})),
            "node 'n0' (Relu): expected 1 output(s), got 2");
  EXPECT_EQ(msg(makeSpec("Add", {f32({2, 3}), f32({4})}, {f32({2, 3})})),
            "node 'n0' (Add): input shapes [2,3] and [4] do not broadcast");
  EXPECT_EQ(msg(makeSpec("Relu", {f32({2, -1})}, {f32({2, -1})})),
            "node 'n0' (Relu): input 0 has an invalid shape or dtype f32[2,-1]");
  EXPECT_EQ(msg(makeSpec("MaxPool", {f32({1, 1, 4, 4})}, {f32({1, 1, 2, 2}), i64({1, 1, 2, 2})},
                         {{"kernel_shape", std::vector<int64_t>{2, 2}}})),
            "node 'n0' (MaxPool): the Indices output of MaxPool is not supported by the CPU "
            "kernel");
  // createKernel reports the same error.
  CpuContext ctx;
  auto k = createKernel(bad, ctx);
  ASSERT_FALSE(k.hasValue());
  EXPECT_EQ(k.status().message(), msg(bad));
}

TEST(CpuKernelRegistry, InPlaceRules) {
  EXPECT_EQ(inPlaceInput(makeSpec("Relu", {f32({4})}, {f32({4})})), 0);
  EXPECT_EQ(inPlaceInput(makeSpec("Softmax", {f32({4})}, {f32({4})})), -1);
  EXPECT_EQ(inPlaceInput(makeSpec("Reshape", {f32({4}), i64({2})}, {f32({2, 2})})), -1);
  EXPECT_EQ(inPlaceInput(makeSpec("Add", {i64({4}), i64({})}, {i64({4})})), 0);
  // An invalid spec never claims in-place.
  EXPECT_EQ(inPlaceInput(makeSpec("Add", {f32({4}), f32({3})}, {f32({4})})), -1);
  EXPECT_EQ(inPlaceInput(makeSpec("Nope", {f32({4})}, {f32({4})})), -1);
}

TEST(CpuKernelRegistry, RunChecksArguments) {
  CpuContext ctx;
  auto k = createKernel(makeSpec("Relu", {f32({4})}, {f32({4})}), ctx);
  ASSERT_TRUE(k.hasValue());
  Buf<float> x(4), y(4);
  const void *ins[] = {nullptr};
  void *outs[] = {y.data(), y.data()};
  EXPECT_EQ((*k)->run({ins, 1, outs, 1}).message(), "node 'n0' (Relu): input 0 has no buffer");
  ins[0] = x.data();
  EXPECT_EQ((*k)->run({ins, 1, outs, 2}).message(),
            "node 'n0' (Relu): run with 2 outputs; the kernel has 1");
  EXPECT_EQ((*k)->run({ins, 2, outs, 1}).message(),
            "node 'n0' (Relu): run with 2 inputs; the kernel has 1");
  EXPECT_TRUE((*k)->run({ins, 1, outs, 1}).isOk());
}

TEST(CpuKernelRegistry, EmptyTensorsRunAsNoOps) {
  Buf<float> a(1), b(1), y(1);
  runKernel(makeSpec("Add", {f32({0, 3}), f32({3})}, {f32({0, 3})}), {nullptr, b.data()},
            {nullptr});
  // Concat with an empty input copies the others only.
  Buf<float> c(std::vector<float>{1, 2}), d(2);
  runKernel(makeSpec("Concat", {f32({0}), f32({2})}, {f32({2})}, {{"axis", int64_t{0}}}),
            {a.data(), c.data()}, {d.data()});
  EXPECT_EQ(d.vec(), (std::vector<float>{1, 2}));
}

TEST(CpuViews, CopyOrAlias) {
  Buf<float> x = randomBuf(12, 51), y(12);
  Buf<int64_t> shape(std::vector<int64_t>{3, 4});
  runKernel(makeSpec("Reshape", {f32({2, 6}), i64({2})}, {f32({3, 4})}), {x.data(), shape.data()},
            {y.data()});
  EXPECT_EQ(y.vec(), x.vec());
  std::vector<float> before = x.vec();
  runKernel(makeSpec("Flatten", {f32({2, 3, 2})}, {f32({2, 6})}, {{"axis", int64_t{1}}}),
            {x.data()}, {x.data()}); // aliased: nothing to do
  EXPECT_EQ(x.vec(), before);
  Buf<int64_t> xi(std::vector<int64_t>{5, 6, 7}), yi(3), axes(std::vector<int64_t>{0});
  runKernel(makeSpec("Unsqueeze", {i64({3}), i64({1})}, {i64({1, 3})}), {xi.data(), axes.data()},
            {yi.data()});
  EXPECT_EQ(yi.vec(), xi.vec());
  runKernel(makeSpec("Identity", {i64({3})}, {i64({3})}), {xi.data()}, {yi.data()});
  EXPECT_EQ(yi.vec(), xi.vec());
  EXPECT_EQ(checkKernel(makeSpec("Squeeze", {f32({2, 6})}, {f32({2, 5})})).message(),
            "node 'n0' (Squeeze): output f32[2,5] and input f32[2,6] have different element "
            "counts");
}

template <typename T>
std::vector<T> refTranspose(const std::vector<T> &x, const std::vector<int64_t> &in,
                            const std::vector<int64_t> &perm) {
  std::vector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(in[static_cast<size_t>(p)]);
  std::vector<int64_t> inStrides(in.size(), 1);
  for (size_t i = in.size(); i-- > 1;)
    inStrides[i - 1] = inStrides[i] * in[i];
  std::vector<T> y;
  for (int64_t o = 0; o < count(out); ++o) {
    int64_t rem = o, src = 0;
    for (size_t d = out.size(); d-- > 0;) {
      src += (rem % out[d]) * inStrides[static_cast<size_t>(perm[d])];
      rem /= out[d];
    }
    y.push_back(x[static_cast<size_t>(src)]);
  }
  return y;
}

TEST(CpuTranspose, PermsF32AndI64) {
  const std::vector<int64_t> in = {2, 3, 4, 5};
  const std::vector<std::vector<int64_t>> perms = {
      {0, 1, 2, 3}, {3, 2, 1, 0}, {0, 2, 3, 1}, {1, 0, 3, 2}, {2, 0, 1, 3}};
  Buf<float> x = randomBuf(120, 52);
  Buf<int64_t> xi(120);
  for (size_t i = 0; i < 120; ++i)
    xi[i] = static_cast<int64_t>(i) * 1000000007LL;
  for (const auto &perm : perms) {
    std::vector<int64_t> out;
    for (int64_t p : perm)
      out.push_back(in[static_cast<size_t>(p)]);
    Buf<float> y(120);
    runKernel(makeSpec("Transpose", {f32(in)}, {f32(out)}, {{"perm", perm}}), {x.data()},
              {y.data()});
    EXPECT_EQ(y.vec(), refTranspose(x.vec(), in, perm));
    Buf<int64_t> yi(120);
    runKernel(makeSpec("Transpose", {i64(in)}, {i64(out)}, {{"perm", perm}}), {xi.data()},
              {yi.data()});
    EXPECT_EQ(yi.vec(), refTranspose(xi.vec(), in, perm));
  }
  Buf<float> y(120); // default perm: reversed
  runKernel(makeSpec("Transpose", {f32(in)}, {f32({5, 4, 3, 2})}), {x.data()}, {y.data()});
  EXPECT_EQ(y.vec(), refTranspose(x.vec(), in, {3, 2, 1, 0}));
  EXPECT_EQ(checkKernel(makeSpec("Transpose", {f32({2, 3})}, {f32({3, 2})},
                                 {{"perm", std::vector<int64_t>{0, 0}}}))
                .message(),
            "node 'n0' (Transpose): perm [0,0] is not a permutation of the 2 axes");
}

template <typename T>
std::vector<T> refConcat(const std::vector<std::vector<T>> &xs,
                         const std::vector<std::vector<int64_t>> &shapes, size_t axis) {
  int64_t outer = 1;
  for (size_t i = 0; i < axis; ++i)
    outer *= shapes[0][i];
  std::vector<T> y;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < xs.size(); ++k) {
      int64_t slab = 1;
      for (size_t i = axis; i < shapes[k].size(); ++i)
        slab *= shapes[k][i];
      for (int64_t j = 0; j < slab; ++j)
        y.push_back(xs[k][static_cast<size_t>(o * slab + j)]);
    }
  return y;
}

TEST(CpuConcat, AxesF32AndI64) {
  for (int64_t axis : {0, 1, 2, -1, -3}) {
    size_t a = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
    std::vector<std::vector<int64_t>> shapes = {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}};
    shapes[1][a] = 1;
    shapes[2][a] = 2;
    std::vector<int64_t> out = {2, 3, 4};
    out[a] += 3;
    std::vector<Buf<float>> xs;
    std::vector<Buf<int64_t>> xis;
    std::vector<TensorDesc> ds, dis;
    std::vector<const void *> ptrs, iptrs;
    for (size_t k = 0; k < 3; ++k) {
      xs.push_back(randomBuf(static_cast<size_t>(count(shapes[k])), 60 + uint32_t(k)));
      Buf<int64_t> bi(static_cast<size_t>(count(shapes[k])));
      for (size_t i = 0; i < bi.size(); ++i)
        bi[i] = static_cast<int64_t>(k * 1000 + i);
      xis.push_back(bi);
      ds.push_back(f32(shapes[k]));
      dis.push_back(i64(shapes[k]));
    }
    for (size_t k = 0; k < 3; ++k) {
      ptrs.push_back(xs[k].data());
      iptrs.push_back(xis[k].data());
    }
    Buf<float> y(static_cast<size_t>(count(out)));
    runKernel(makeSpec("Concat", ds, {f32(out)}, {{"axis", axis}}), ptrs, {y.data()});
    EXPECT_EQ(y.vec(), refConcat<float>({xs[0].vec(), xs[1].vec(), xs[2].vec()}, shapes, a));
    Buf<int64_t> yi(static_cast<size_t>(count(out)));
    runKernel(makeSpec("Concat", dis, {i64(out)}, {{"axis", axis}}), iptrs, {yi.data()});
    EXPECT_EQ(yi.vec(), refConcat<int64_t>({xis[0].vec(), xis[1].vec(), xis[2].vec()}, shapes, a));
  }
  EXPECT_EQ(checkKernel(makeSpec("Concat", {f32({2, 3}), f32({3, 3})}, {f32({5, 3})},
                                 {{"axis", int64_t{1}}}))
                .message(),
            "node 'n0' (Concat): input 1 has shape [3,3], which does not match input 0 [2,3] "
            "outside axis 1");
}

} // namespace
} // namespace dtc::ops::cpu::test
