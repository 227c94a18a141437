// GPU test helpers: random inputs, the CPU and CUDA runs of one spec, and the comparison.
#include "tests/gpu/GpuTestUtil.h"
#include "compiler/ir/Half.h"

#include "ops/cpu/Kernel.h"
#include "ops/cuda/CudaKernel.h"
#include "ops/kernel/Target.h"

#include <cmath>
#include <cstring>
#include <random>

namespace dtc::gputest {

bool gpuAvailable() {
  static const bool available = [] {
    int n = 0;
    bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    cudaGetLastError(); // a "no device" error must not stick to the next call
    return ok;
  }();
  return available;
}

std::vector<HostTensor> randomInputs(const ops::KernelSpec &spec, uint64_t seed,
                                     const std::vector<Fill> &fills) {
  std::mt19937_64 rng(seed);
  std::vector<HostTensor> out;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const ops::TensorDesc &d = spec.inputs[i];
    const Fill f = i < fills.size() ? fills[i] : Fill{};
    HostTensor t{d, std::string(static_cast<size_t>(d.present() ? d.byteSize() : 0), '\0')};
    if (!d.present()) {
      out.push_back(std::move(t));
      continue;
    }
    if (!f.values.empty()) {
      EXPECT_EQ(f.values.size(), t.bytes.size()) << "input " << i << " values";
      t.bytes = f.values;
      out.push_back(std::move(t));
      continue;
    }
    const int64_t n = d.numElements();
    char *p = t.bytes.data();
    std::uniform_real_distribution<double> real(f.lo, f.hi);
    auto integer = [&] {
      const int64_t lo = static_cast<int64_t>(f.lo), hi = static_cast<int64_t>(f.hi);
      return hi > lo ? lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo)) : lo;
    };
    for (int64_t k = 0; k < n; ++k) {
      switch (d.dtype) {
      case ir::DType::kFloat32: {
        float v = static_cast<float>(real(rng));
        std::memcpy(p + 4 * k, &v, 4);
        break;
      }
      case ir::DType::kFloat64: {
        double v = real(rng);
        std::memcpy(p + 8 * k, &v, 8);
        break;
      }
      case ir::DType::kInt64: {
        int64_t v = integer();
        std::memcpy(p + 8 * k, &v, 8);
        break;
      }
      case ir::DType::kInt32: {
        int32_t v = static_cast<int32_t>(integer());
        std::memcpy(p + 4 * k, &v, 4);
        break;
      }
      case ir::DType::kBool:
        p[k] = static_cast<char>(rng() & 1);
        break;
      case ir::DType::kBFloat16: { // mixed precision: bf16-rounded values of the f32 range
        uint16_t v = ir::floatToBFloat16(static_cast<float>(real(rng)));
        std::memcpy(p + 2 * k, &v, 2);
        break;
      }
      default:
        ADD_FAILURE() << "randomInputs: no filler for dtype " << ir::dtypeName(d.dtype);
        return out;
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

std::vector<HostTensor> emptyOutputs(const ops::KernelSpec &spec) {
  std::vector<HostTensor> outs;
  for (const ops::TensorDesc &d : spec.outputs)
    outs.push_back({d, std::string(static_cast<size_t>(d.present() ? d.byteSize() : 0), '\0')});
  return outs;
}

} // namespace

std::vector<HostTensor> runCpu(const ops::KernelSpec &spec, const std::vector<HostTensor> &in) {
  ops::cpu::CpuContext ctx;
  auto kernel = ops::cpu::createKernel(spec, ctx);
  if (!kernel.hasValue()) {
    ADD_FAILURE() << "CPU kernel: " << kernel.status().message();
    return {};
  }
  // 64-byte aligned copies, as the arena gives the kernels.
  std::vector<std::vector<uint64_t>> store;
  std::vector<const void *> ins;
  for (const HostTensor &t : in) {
    store.emplace_back(t.bytes.size() / 8 + 8);
    std::memcpy(store.back().data(), t.bytes.data(), t.bytes.size());
    ins.push_back(t.desc.present() ? store.back().data() : nullptr);
  }
  std::vector<HostTensor> outs = emptyOutputs(spec);
  std::vector<std::vector<uint64_t>> outStore;
  std::vector<void *> outPtrs;
  for (const HostTensor &t : outs) {
    outStore.emplace_back(t.bytes.size() / 8 + 8);
    outPtrs.push_back(outStore.back().data());
  }
  Status s = (*kernel)->run({ins.data(), ins.size(), outPtrs.data(), outPtrs.size()});
  EXPECT_TRUE(s.isOk()) << "CPU run: " << s.message();
  for (size_t i = 0; i < outs.size(); ++i)
    std::memcpy(outs[i].bytes.data(), outStore[i].data(), outs[i].bytes.size());
  return outs;
}

std::vector<HostTensor> runCuda(const ops::KernelSpec &spec, const std::vector<HostTensor> &in) {
  auto ctx = ops::cuda::CudaContext::create(0);
  if (!ctx.hasValue()) {
    ADD_FAILURE() << "CUDA context: " << ctx.status().message();
    return {};
  }
  auto kernel = ops::cuda::createKernel(spec, **ctx);
  if (!kernel.hasValue()) {
    ADD_FAILURE() << "CUDA kernel: " << kernel.status().message();
    return {};
  }
  std::vector<ops::cuda::DeviceBuffer> bufs;
  auto upload = [&](const std::string &bytes) -> void * {
    void *p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes.size(), 1)) != cudaSuccess) {
      ADD_FAILURE() << "cudaMalloc of " << bytes.size() << " bytes failed";
      return nullptr;
    }
    bufs.emplace_back(p);
    if (!bytes.empty())
      cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
    return p;
  };
  std::vector<const void *> ins;
  for (const HostTensor &t : in)
    ins.push_back(t.desc.present() ? upload(t.bytes) : nullptr);
  std::vector<HostTensor> outs = emptyOutputs(spec);
  std::vector<void *> outPtrs;
  for (const HostTensor &t : outs) {
    // NaN-filled, so that an element the kernel does not write shows up as a mismatch.
    outPtrs.push_back(upload(std::string(t.bytes.size(), '\xff')));
  }
  // A pageable cudaMemcpy may return before its DMA ends, and the kernel's non-blocking stream
  // does not wait for the legacy default stream: the uploads complete first.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Status s = (*kernel)->run({ins.data(), ins.size(), outPtrs.data(), outPtrs.size()});
  EXPECT_TRUE(s.isOk()) << "CUDA run: " << s.message();
  EXPECT_EQ(cudaStreamSynchronize((*ctx)->stream()), cudaSuccess);
  Status errors = (*ctx)->checkErrors();
  EXPECT_TRUE(errors.isOk()) << errors.message();
  for (size_t i = 0; i < outs.size(); ++i)
    if (!outs[i].bytes.empty())
      cudaMemcpy(outs[i].bytes.data(), outPtrs[i], outs[i].bytes.size(), cudaMemcpyDeviceToHost);
  return outs;
}

void expectClose(const ops::KernelSpec &spec, const std::vector<HostTensor> &cuda,
                 const std::vector<HostTensor> &cpu, double rtol, double atol) {
  ASSERT_EQ(cuda.size(), cpu.size()) << spec.where();
  for (size_t o = 0; o < cpu.size(); ++o) {
    const ops::TensorDesc &d = cpu[o].desc;
    ASSERT_EQ(cuda[o].bytes.size(), cpu[o].bytes.size()) << spec.where() << " output " << o;
    const int64_t n = d.present() ? d.numElements() : 0;
    int reported = 0;
    for (int64_t k = 0; k < n && reported < 5; ++k) {
      double a = 0, b = 0;
      bool exact = false;
      switch (d.dtype) {
      case ir::DType::kFloat32: {
        float x, y;
        std::memcpy(&x, cuda[o].bytes.data() + 4 * k, 4);
        std::memcpy(&y, cpu[o].bytes.data() + 4 * k, 4);
        a = x, b = y;
        break;
      }
      case ir::DType::kFloat64:
        std::memcpy(&a, cuda[o].bytes.data() + 8 * k, 8);
        std::memcpy(&b, cpu[o].bytes.data() + 8 * k, 8);
        break;
      case ir::DType::kBFloat16: {
        uint16_t x, y;
        std::memcpy(&x, cuda[o].bytes.data() + 2 * k, 2);
        std::memcpy(&y, cpu[o].bytes.data() + 2 * k, 2);
        a = ir::bfloat16ToFloat(x), b = ir::bfloat16ToFloat(y);
        break;
      }
      default: {
        const size_t size = static_cast<size_t>(ir::dtypeSize(d.dtype));
        exact = true;
        a = std::memcmp(cuda[o].bytes.data() + size * k, cpu[o].bytes.data() + size * k, size);
        break;
      }
      }
      bool ok = exact ? a == 0
                      : (std::isnan(a) && std::isnan(b)) ||
                            std::fabs(a - b) <= atol + rtol * std::fabs(b);
      if (!ok) {
        ++reported;
        ADD_FAILURE() << spec.where() << " output " << o << " " << d.str() << " element " << k
                      << ": CUDA " << a << ", CPU " << b;
      }
    }
  }
}

void expectCudaMatchesCpu(const ops::KernelSpec &spec, const std::vector<Fill> &fills, double rtol,
                          double atol, uint64_t seed) {
  if (!gpuAvailable())
    GTEST_SKIP() << "no CUDA device";
  std::vector<HostTensor> in = randomInputs(spec, seed, fills);
  std::vector<HostTensor> cpu = runCpu(spec, in);
  std::vector<HostTensor> cuda = runCuda(spec, in);
  if (::testing::Test::HasFailure())
    return;
  expectClose(spec, cuda, cpu, rtol, atol);
}

void expectParity(const ops::KernelSpec &spec, const std::vector<Fill> &fills, double rtol,
                  double atol) {
  const Status s = ops::cudaTarget().checkKernel(spec);
  ASSERT_TRUE(s.isOk()) << s.message();
  std::vector<HostTensor> in = randomInputs(spec, 1, fills);
  runCpu(spec, in);
  if (::testing::Test::HasFailure())
    return;
  expectCudaMatchesCpu(spec, fills, rtol, atol);
}

ops::KernelSpec makeSpec(const std::string &op, const std::vector<std::vector<int64_t>> &inputs,
                         const std::vector<std::vector<int64_t>> &outputs, ir::DType dtype,
                         const std::string &domain) {
  ops::KernelSpec spec;
  spec.op = op;
  spec.domain = domain;
  spec.node = "test_" + op;
  for (const auto &s : inputs)
    spec.inputs.push_back({dtype, s});
  for (const auto &s : outputs)
    spec.outputs.push_back({dtype, s});
  return spec;
}

} // namespace dtc::gputest
