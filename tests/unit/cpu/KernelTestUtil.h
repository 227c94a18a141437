// Helpers of the CPU kernel tests: 64-byte aligned buffers, spec builders, a one-call runner,
// deterministic fill and a relative-tolerance comparison.
#pragma once

#include "ops/cpu/Kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace dtc::ops::cpu::test {

/// A 64-byte aligned array of T (the arena's alignment).
template <typename T> class Buf {
public:
  explicit Buf(size_t n = 0) : n_(n) {
    size_t bytes = ((n * sizeof(T) + 63) / 64) * 64;
    p_ = static_cast<T *>(std::aligned_alloc(64, bytes ? bytes : 64));
    std::memset(static_cast<void *>(p_), 0, bytes ? bytes : 64);
  }
  Buf(const std::vector<T> &v) : Buf(v.size()) { std::copy(v.begin(), v.end(), p_); }
  Buf(const Buf &o) : Buf(o.n_) { std::copy(o.p_, o.p_ + n_, p_); }
  Buf &operator=(Buf o) {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~Buf() { std::free(p_); }
  T *data() { return p_; }
  const T *data() const { return p_; }
  size_t size() const { return n_; }
  T &operator[](size_t i) { return p_[i]; }
  const T &operator[](size_t i) const { return p_[i]; }
  std::vector<T> vec() const { return std::vector<T>(p_, p_ + n_); }

private:
  T *p_ = nullptr;
  size_t n_ = 0;
};

inline TensorDesc f32(std::vector<int64_t> shape) { return {ir::DType::kFloat32, shape}; }
inline TensorDesc i64(std::vector<int64_t> shape) { return {ir::DType::kInt64, shape}; }

inline KernelSpec makeSpec(std::string op, std::vector<TensorDesc> ins,
                           std::vector<TensorDesc> outs,
                           std::map<std::string, ir::Attribute> attrs = {}) {
  KernelSpec s;
  s.op = std::move(op);
  s.node = "n0";
  s.inputs = std::move(ins);
  s.outputs = std::move(outs);
  s.attrs = std::move(attrs);
  return s;
}

inline int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Deterministic values in [-1, 1) (a small LCG).
inline Buf<float> randomBuf(size_t n, uint32_t seed) {
  Buf<float> b(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    b[i] = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.f;
  }
  return b;
}

/// Creates the kernel for `spec` and runs it once on the given pointers; fails the test on any
/// error.
inline void runKernel(const KernelSpec &spec, std::vector<const void *> ins,
                      std::vector<void *> outs) {
  CpuContext ctx;
  auto k = createKernel(spec, ctx);
  ASSERT_TRUE(k.hasValue()) << k.status().message();
  Status st = (*k)->run({ins.data(), ins.size(), outs.data(), outs.size()});
  ASSERT_TRUE(st.isOk()) << st.message();
}

/// Expects |a - b| <= 1e-5 * max(1, |b|) elementwise (relative 1e-5, absolute near zero).
inline void expectNear(const float *got, const std::vector<float> &want, double tol = 1e-5) {
  for (size_t i = 0; i < want.size(); ++i) {
    double scale = std::max(1.0, std::fabs(static_cast<double>(want[i])));
    ASSERT_NEAR(got[i], want[i], tol * scale) << "at element " << i;
  }
}

} // namespace dtc::ops::cpu::test
