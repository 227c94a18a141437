// Helpers of the GPU tests (tests/gpu): skip without a GPU, and run one kernel spec on the CUDA
// backend and on the CPU backend with the same random inputs, comparing every output.
#pragma once

#include "ops/kernel/Kernel.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace dtc::gputest {

/// True when the CUDA runtime sees at least one device (cudaGetDeviceCount).
bool gpuAvailable();

/// Skips the current test (GTEST_SKIP: counted as skipped, not passed) without a GPU.
#define DTC_REQUIRE_GPU()                                                                          \
  do {                                                                                             \
    if (!::dtc::gputest::gpuAvailable())                                                           \
      GTEST_SKIP() << "no CUDA device";                                                            \
  } while (0)

/// One operand's bytes on the host.
struct HostTensor {
  ops::TensorDesc desc;
  std::string bytes;
};

/// How an input is filled: floats uniform in [lo, hi); integers uniform in [lo, hi) (indices:
/// lo = 0, hi = the axis size); bools 0/1. `values` (when not empty) gives the bytes instead.
struct Fill {
  double lo = -1.0;
  double hi = 1.0;
  std::string values;
};

/// Random inputs for `spec` (seeded), one Fill per input (missing ones default).
std::vector<HostTensor> randomInputs(const ops::KernelSpec &spec, uint64_t seed,
                                     const std::vector<Fill> &fills = {});

/// Runs `spec` on the CPU kernels, returning the outputs (fails the test on error).
std::vector<HostTensor> runCpu(const ops::KernelSpec &spec, const std::vector<HostTensor> &in);
/// Runs `spec` on the CUDA kernels of device 0 (inputs uploaded, outputs downloaded after the
/// stream synchronized and the error slot was checked); fails the test on error.
std::vector<HostTensor> runCuda(const ops::KernelSpec &spec, const std::vector<HostTensor> &in);

/// Expects every output element within atol + rtol * |cpu| of the CPU's (NaNs must match;
/// integer and bool outputs exactly), reporting the first mismatches with their index.
void expectClose(const ops::KernelSpec &spec, const std::vector<HostTensor> &cuda,
                 const std::vector<HostTensor> &cpu, double rtol = 1e-4, double atol = 1e-5);

/// The whole parity check: random inputs, both backends, expectClose. Skips without a GPU.
void expectCudaMatchesCpu(const ops::KernelSpec &spec, const std::vector<Fill> &fills = {},
                          double rtol = 1e-4, double atol = 1e-5, uint64_t seed = 1);

/// The parity check of one spec, whose CPU side runs without a GPU too: the CUDA target accepts
/// the spec (valid for the CPU kernel and within the CUDA kernel's limits) and the CPU kernel
/// runs on the random inputs; then, with a GPU, expectCudaMatchesCpu (else the test is skipped).
void expectParity(const ops::KernelSpec &spec, const std::vector<Fill> &fills = {},
                  double rtol = 1e-4, double atol = 1e-5);

/// The bytes of `v` (a Fill's values, a HostTensor's bytes).
template <typename T> std::string bytesOf(const std::vector<T> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T));
}
/// The elements of `t` as T.
template <typename T> std::vector<T> valuesOf(const HostTensor &t) {
  std::vector<T> v(t.bytes.size() / sizeof(T));
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}
/// Uniform in [lo, hi) (integers: indices below hi).
inline Fill range(double lo, double hi) { return Fill{lo, hi, {}}; }
/// Exactly these bytes.
inline Fill given(std::string bytes) { return Fill{0, 0, std::move(bytes)}; }

/// A spec with row-major f32 (or `dtype`) operands: makeSpec("Add", {{2,3},{3}}, {{2,3}}).
ops::KernelSpec makeSpec(const std::string &op, const std::vector<std::vector<int64_t>> &inputs,
                         const std::vector<std::vector<int64_t>> &outputs,
                         ir::DType dtype = ir::DType::kFloat32, const std::string &domain = "");

} // namespace dtc::gputest
