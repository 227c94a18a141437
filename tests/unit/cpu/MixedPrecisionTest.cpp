// bf16 CPU kernels of mixed precision (--precision bf16): Cast f32 <-> bf16/f16 bit patterns,
// and MatMul, Gemm, MatMulT, Conv, ConvGradData, ConvGradWeight in bf16 against the f32 kernel
// run on the same (bf16-representable) inputs. Tolerance: the bf16 kernels accumulate in f32 and
// round the result once to bf16 (8 significant bits), so |bf16 - f32| <= 2^-8 |f32| plus the f32
// accumulation-order noise (1e-5 of the sum of |products|' scale); f16 dense ops are refused.
#include "compiler/ir/Half.h"
#include "tests/unit/cpu/KernelTestUtil.h"

#include <limits>

namespace dtc::ops::cpu::test {
namespace {

TensorDesc bf16(std::vector<int64_t> shape) { return {ir::DType::kBFloat16, shape}; }

/// The spec with every operand's dtype set to bf16.
KernelSpec asBf16(KernelSpec s) {
  for (TensorDesc &t : s.inputs)
    t.dtype = ir::DType::kBFloat16;
  for (TensorDesc &t : s.outputs)
    t.dtype = ir::DType::kBFloat16;
  return s;
}

/// Random values in [-1, 1) rounded to bf16 (so that the f32 reference reads the same numbers).
Buf<float> bf16Exact(size_t n, uint32_t seed) {
  Buf<float> b = randomBuf(n, seed);
  for (size_t i = 0; i < n; ++i)
    b[i] = ir::bfloat16ToFloat(ir::floatToBFloat16(b[i]));
  return b;
}

Buf<uint16_t> toBf16(const Buf<float> &f) {
  Buf<uint16_t> b(f.size());
  for (size_t i = 0; i < f.size(); ++i)
    b[i] = ir::floatToBFloat16(f[i]);
  return b;
}

/// Runs `spec` in f32 and in bf16 on the same bf16-exact random inputs and compares every output
/// within the bf16 bound; returns the largest error relative to max |f32 output|.
double expectBf16MatchesF32(const KernelSpec &spec, uint32_t seed = 1) {
  std::vector<Buf<float>> inF;
  std::vector<Buf<uint16_t>> inB;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    inF.push_back(bf16Exact(static_cast<size_t>(count(spec.inputs[i].shape)), seed + 17 * i));
    inB.push_back(toBf16(inF.back()));
  }
  std::vector<Buf<float>> outF;
  std::vector<Buf<uint16_t>> outB;
  for (const TensorDesc &t : spec.outputs) {
    outF.emplace_back(static_cast<size_t>(count(t.shape)));
    outB.emplace_back(static_cast<size_t>(count(t.shape)));
  }
  std::vector<const void *> pf, pb;
  std::vector<void *> of, ob;
  for (size_t i = 0; i < inF.size(); ++i) {
    pf.push_back(inF[i].data());
    pb.push_back(inB[i].data());
  }
  for (size_t i = 0; i < outF.size(); ++i) {
    of.push_back(outF[i].data());
    ob.push_back(outB[i].data());
  }
  runKernel(spec, pf, of);
  runKernel(asBf16(spec), pb, ob);
  double worst = 0;
  for (size_t o = 0; o < outF.size(); ++o) {
    double scale = 1e-3;
    for (size_t i = 0; i < outF[o].size(); ++i)
      scale = std::max(scale, std::fabs(static_cast<double>(outF[o][i])));
    for (size_t i = 0; i < outF[o].size(); ++i) {
      const double want = outF[o][i], got = ir::bfloat16ToFloat(outB[o][i]);
      EXPECT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -8) + 1e-5 * scale)
          << spec.op << " output " << o << " element " << i << ": bf16 " << got << ", f32 " << want;
      worst = std::max(worst, std::fabs(got - want) / scale);
    }
  }
  return worst;
}

TEST(MixedPrecisionCast, F32ToBf16RoundsToNearestEvenAndBack) {
  const float inf = std::numeric_limits<float>::infinity();
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1). 1 + 3 * 2^-8 rounds up.
  std::vector<float> x = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f, 3.0e38f, inf, -inf,
                          0.0f};
  std::vector<uint16_t> want = {0x3f80, 0x3f80, 0x3f82, 0xc020, 0x7f62, 0x7f80, 0xff80, 0x0000};
  Buf<float> in(x);
  Buf<uint16_t> out(x.size());
  runKernel(makeSpec("Cast", {f32({8})}, {bf16({8})},
                     {{"to", ir::Attribute(static_cast<int64_t>(ir::DType::kBFloat16))}}),
            {in.data()}, {out.data()});
  EXPECT_EQ(out.vec(), want);
  Buf<float> back(x.size());
  runKernel(makeSpec("Cast", {bf16({8})}, {f32({8})},
                     {{"to", ir::Attribute(static_cast<int64_t>(ir::DType::kFloat32))}}),
            {out.data()}, {back.data()});
  std::vector<float> wantBack = {1.0f, 1.0f, 1.0f + 0x1p-6f, -2.5f, 2.9980e38f, inf, -inf, 0.0f};
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(back[i], i == 4 ? ir::bfloat16ToFloat(0x7f62) : wantBack[i]) << i;
  // NaN stays NaN.
  Buf<float> nan(std::vector<float>{std::numeric_limits<float>::quiet_NaN()});
  Buf<uint16_t> nanOut(1);
  runKernel(makeSpec("Cast", {f32({1})}, {bf16({1})},
                     {{"to", ir::Attribute(static_cast<int64_t>(ir::DType::kBFloat16))}}),
            {nan.data()}, {nanOut.data()});
  EXPECT_TRUE(std::isnan(ir::bfloat16ToFloat(nanOut[0])));
}

TEST(MixedPrecisionCast, F16OverflowSubnormalAndIntegers) {
  // 65504 is the largest half; 65520 rounds to infinity; 2^-24 is the smallest subnormal.
  std::vector<float> x = {65504.0f, 65520.0f, 0x1p-24f, -0.5f};
  Buf<float> in(x);
  Buf<uint16_t> h(x.size());
  runKernel(makeSpec("Cast", {f32({4})}, {{ir::DType::kFloat16, {4}}},
                     {{"to", ir::Attribute(static_cast<int64_t>(ir::DType::kFloat16))}}),
            {in.data()}, {h.data()});
  EXPECT_EQ(h.vec(), (std::vector<uint16_t>{0x7bff, 0x7c00, 0x0001, 0xb800}));
  // bf16 -> i64 truncates toward zero through f32, as f32 -> i64 does.
  Buf<uint16_t> b(std::vector<uint16_t>{ir::floatToBFloat16(-2.75f), ir::floatToBFloat16(7.5f)});
  Buf<int64_t> i(2);
  runKernel(makeSpec("Cast", {bf16({2})}, {i64({2})},
                     {{"to", ir::Attribute(static_cast<int64_t>(ir::DType::kInt64))}}),
            {b.data()}, {i.data()});
  EXPECT_EQ(i.vec(), (std::vector<int64_t>{-2, 7}));
}

TEST(MixedPrecisionKernels, MatMulBatchedAndBroadcast) {
  // Attention's batched product and a weight shared over the batch (the GPT's shapes).
  expectBf16MatchesF32(
      makeSpec("MatMul", {f32({2, 4, 16, 8}), f32({2, 4, 8, 16})}, {f32({2, 4, 16, 16})}));
  // The result really is rounded to bf16: it differs from f32 somewhere, within the bound.
  EXPECT_GT(expectBf16MatchesF32(
                makeSpec("MatMul", {f32({8, 33, 64}), f32({64, 17})}, {f32({8, 33, 17})})),
            0.0);
}

TEST(MixedPrecisionKernels, GemmBiasScaledCAndTransposes) {
  ir::Attribute one(int64_t{1});
  expectBf16MatchesF32(makeSpec("Gemm", {f32({32, 64}), f32({10, 64}), f32({10})}, {f32({32, 10})},
                                {{"transB", one}}));
  // beta != 1: C is copied into Y (converted through f32 in bf16) before the sum post-op.
  expectBf16MatchesF32(
      makeSpec("Gemm", {f32({64, 32}), f32({64, 10}), f32({32, 10})}, {f32({32, 10})},
               {{"transA", one}, {"alpha", ir::Attribute(0.5f)}, {"beta", ir::Attribute(0.25f)}}));
}

TEST(MixedPrecisionKernels, MatMulT) {
  KernelSpec s = makeSpec("MatMulT", {f32({24, 16}), f32({24, 8})}, {f32({16, 8})},
                          {{"transA", ir::Attribute(int64_t{1})}});
  s.domain = "ai.dtc";
  expectBf16MatchesF32(s);
}

TEST(MixedPrecisionKernels, ConvForwardAndGradients) {
  std::map<std::string, ir::Attribute> win = {
      {"kernel_shape", ir::Attribute(std::vector<int64_t>{3, 3})},
      {"pads", ir::Attribute(std::vector<int64_t>{1, 1, 1, 1})},
      {"strides", ir::Attribute(std::vector<int64_t>{1, 1})}};
  expectBf16MatchesF32(makeSpec("Conv", {f32({2, 3, 12, 12}), f32({8, 3, 3, 3}), f32({8})},
                                {f32({2, 8, 12, 12})}, win));
  auto data = win;
  data["input_shape"] = ir::Attribute(std::vector<int64_t>{2, 3, 12, 12});
  KernelSpec gd = makeSpec("ConvGradData", {f32({2, 8, 12, 12}), f32({8, 3, 3, 3})},
                           {f32({2, 3, 12, 12})}, data);
  gd.domain = "ai.dtc";
  expectBf16MatchesF32(gd);
  KernelSpec gw = makeSpec("ConvGradWeight", {f32({2, 8, 12, 12}), f32({2, 3, 12, 12})},
                           {f32({8, 3, 3, 3}), f32({8})}, win);
  gw.domain = "ai.dtc";
  expectBf16MatchesF32(gw);
}

TEST(MixedPrecisionKernels, Fp16AndMixedDTypesRefused) {
  KernelSpec s = makeSpec("MatMul", {{ir::DType::kFloat16, {4, 4}}, {ir::DType::kFloat16, {4, 4}}},
                          {{ir::DType::kFloat16, {4, 4}}});
  Status st = checkKernel(s);
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.message(), "node 'n0' (MatMul): input 0 has dtype f16: fp16 compute needs a CPU "
                          "with AVX512-FP16 or a GPU (use --precision bf16)");
  s = makeSpec("MatMul", {bf16({4, 4}), f32({4, 4})}, {bf16({4, 4})});
  st = checkKernel(s);
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.message(),
            "node 'n0' (MatMul): input 1 has dtype f32; the CPU kernel supports bf16");
}

} // namespace
} // namespace dtc::ops::cpu::test
