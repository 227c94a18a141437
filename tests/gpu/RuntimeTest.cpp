// The runtime on a GPU (runtime/cuda/CudaDevice.cpp, the executor on a CUDA plan): arena
// transfers through the pinned staging buffers (several chunks, odd sizes and offsets), copies
// inside the arena (overlapping too), a larger alignment than cudaMalloc's, out-of-memory
// messages, and whole plans compiled by dtc-compile (--device cuda vs --device cpu): inference
// of the bundled models and the training runs of the MLP, compared value by value. Every test
// skips without a GPU (DTC_GPU_TEST_DEVICE=cpu runs the plan-level ones with the CPU as the
// device under test: a dry run of their plumbing). The model-level training parity of all bundled
// models is tests/gpu/gpu_parity.py.
#include "tests/gpu/GpuTestUtil.h"

#include "compiler/plan/Plan.h"
#include "runtime/Device.h"
#include "runtime/Executor.h"
#include "runtime/Trainer.h"
#include "runtime/io/Npy.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#ifndef DTC_GPU_TEST_TOOLS_DIR
#error "DTC_GPU_TEST_TOOLS_DIR (the build's tools folder) must be defined"
#endif

namespace dtc::gputest {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<rt::Device> cudaDevice() {
  auto dev = rt::createDevice(ops::DeviceKind::kCuda, 0, rt::DeviceOptions{});
  EXPECT_TRUE(dev.hasValue()) << dev.status().message();
  return dev ? dev.takeValue() : nullptr;
}

std::string pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (char &c : s)
    c = static_cast<char>(rng());
  return s;
}

TEST(CudaDevice, TransfersAndCopiesRoundTrip) {
  DTC_REQUIRE_GPU();
  auto dev = cudaDevice();
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->kind(), ops::DeviceKind::kCuda);
  // 40 MiB: uploads of 19 MiB + 3 bytes cross the 8 MiB staging chunks.
  const uint64_t arena = uint64_t{40} << 20;
  ASSERT_TRUE(dev->allocateArena(arena, 256).isOk());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(dev->arenaAt(0)) % 256, 0u);
  std::string host(arena, '\0');
  const size_t n = (size_t{19} << 20) + 3;
  const std::string a = pattern(n, 1);
  ASSERT_TRUE(dev->upload(256, a.data(), n).isOk());
  std::memcpy(host.data() + 256, a.data(), n);
  // A small upload right behind it (reuses a staging buffer the big one may still be copying).
  const std::string b = pattern(777, 2);
  ASSERT_TRUE(dev->upload(arena - 1000, b.data(), b.size()).isOk());
  std::memcpy(host.data() + arena - 1000, b.data(), b.size());
  // Disjoint, then overlapping forwards and backwards (memmove semantics).
  ASSERT_TRUE(dev->copy(dev->arenaAt(uint64_t{20} << 20), dev->arenaAt(256), n).isOk());
  std::memmove(host.data() + (size_t{20} << 20), host.data() + 256, n);
  ASSERT_TRUE(dev->copy(dev->arenaAt(1000), dev->arenaAt(256), 5000).isOk());
  std::memmove(host.data() + 1000, host.data() + 256, 5000);
  ASSERT_TRUE(dev->copy(dev->arenaAt(300), dev->arenaAt(2000), 9000).isOk());
  std::memmove(host.data() + 300, host.data() + 2000, 9000);
  ASSERT_TRUE(dev->synchronize().isOk());
  std::string back(arena, '\x55');
  ASSERT_TRUE(dev->download(0, back.data(), arena).isOk());
  ASSERT_EQ(back.size(), host.size());
  size_t firstDiff = 0;
  while (firstDiff < arena && back[firstDiff] == host[firstDiff])
    ++firstDiff;
  EXPECT_EQ(firstDiff, arena) << "first differing byte at " << firstDiff;
  // A download at an odd offset and size.
  std::string part(12345, '\0');
  ASSERT_TRUE(dev->download(4097, part.data(), part.size()).isOk());
  EXPECT_EQ(part, host.substr(4097, part.size()));
}

TEST(CudaDevice, LargerAlignmentAndReallocation) {
  DTC_REQUIRE_GPU();
  auto dev = cudaDevice();
  ASSERT_TRUE(dev);
  ASSERT_TRUE(dev->allocateArena(1000, 4096).isOk());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(dev->arenaAt(0)) % 4096, 0u);
  ASSERT_TRUE(dev->allocateArena(3000, 256).isOk());
  std::string zeros(3000, '\x7f');
  ASSERT_TRUE(dev->download(0, zeros.data(), zeros.size()).isOk());
  EXPECT_EQ(zeros, std::string(3000, '\0')); // zero-filled
}

TEST(CudaDevice, OutOfMemorySaysWhatWasNeededAndFree) {
  DTC_REQUIRE_GPU();
  auto dev = cudaDevice();
  ASSERT_TRUE(dev);
  Status s = dev->allocateArena(uint64_t{1} << 50, 256); // 1 PiB
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("out of GPU memory: the plan's arena needs 1125899906842624 bytes"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("are free"), std::string::npos) << s.message();
  // The device stays usable.
  EXPECT_TRUE(dev->allocateArena(1 << 20, 256).isOk());
}

// Whole plans. dtc-compile runs as a tool (the tests link the runtime, not the compiler).

/// The device these plan-level tests put under test: "cuda", or with DTC_GPU_TEST_DEVICE=cpu the
/// CPU against itself (a dry run of the tests' own plumbing on a machine without a GPU).
std::string deviceUnderTest() {
  const char *d = std::getenv("DTC_GPU_TEST_DEVICE");
  return d && std::string(d) == "cpu" ? "cpu" : "cuda";
}
#define DTC_REQUIRE_DEVICE()                                                                       \
  do {                                                                                             \
    if (deviceUnderTest() == "cuda")                                                               \
      DTC_REQUIRE_GPU();                                                                           \
  } while (0)

std::string tool(const std::string &name) {
  return std::string(DTC_GPU_TEST_TOOLS_DIR) + "/" + name;
}
std::string modelPath(const std::string &file) {
  return std::string(DTC_GPU_TEST_SOURCE_DIR) + "/models/" + file;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "dtc_gpu_rt_XXXXXX").string();
    path = ::mkdtemp(t.data()) ? fs::path(t) : fs::path();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty())
      fs::remove_all(path, ec);
  }
};

/// Compiles `model` with dtc-compile and `flags` into `out`; fails the test with its stderr.
bool compilePlan(const std::string &model, const std::string &flags, const fs::path &out) {
  const fs::path err = out.string() + ".stderr";
  const std::string cmd = tool("dtc-compile") + " '" + model + "' " + flags + " -o '" +
                          out.string() + "' 2> '" + err.string() + "' > /dev/null";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream in(err);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ADD_FAILURE() << cmd << "\n" << text;
    return false;
  }
  return true;
}

Expected<std::unique_ptr<rt::Executor>> load(const fs::path &planPath) {
  DTC_ASSIGN_OR_RETURN(plan::Plan p, plan::readPlanFile(planPath.string()));
  rt::ExecutorOptions eo;
  eo.planPath = planPath.string();
  return rt::Executor::create(std::move(p), eo);
}

/// Random inputs for every graph input of `ex` (floats in [-1, 1), integers in [0, intHi)).
std::vector<rt::HostArray> randomInputs(const rt::Executor &ex, int64_t intHi) {
  std::mt19937 rng(7);
  std::vector<rt::HostArray> out;
  const plan::RankProgram &rp = ex.program();
  for (const plan::Binding &b : rp.inputs()) {
    const plan::Buffer &buf = rp.buffers(b.buffer());
    rt::HostArray a;
    a.name = b.name();
    a.dtype = static_cast<ir::DType>(buf.dtype());
    a.shape.assign(buf.shape().begin(), buf.shape().end());
    a.bytes.resize(buf.size_bytes());
    const int64_t n = a.numElements();
    for (int64_t i = 0; i < n; ++i) {
      if (a.dtype == ir::DType::kFloat32) {
        const float v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
        std::memcpy(a.bytes.data() + 4 * i, &v, 4);
      } else if (a.dtype == ir::DType::kInt64) {
        const int64_t v = static_cast<int64_t>(rng() % static_cast<uint32_t>(intHi));
        std::memcpy(a.bytes.data() + 8 * i, &v, 8);
      } else if (a.dtype == ir::DType::kInt32) {
        const int32_t v = static_cast<int32_t>(rng() % static_cast<uint32_t>(intHi));
        std::memcpy(a.bytes.data() + 4 * i, &v, 4);
      } else {
        ADD_FAILURE() << "input '" << a.name << "': dtype " << static_cast<int>(a.dtype)
                      << " has no random fill here";
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

/// Every f32 element within atol + rtol * |cpu|.
void expectArraysClose(const rt::HostArray &cuda, const rt::HostArray &cpu, double rtol,
                       double atol, const std::string &what) {
  ASSERT_EQ(cuda.shape, cpu.shape) << what;
  ASSERT_EQ(cuda.dtype, cpu.dtype) << what;
  ASSERT_EQ(cuda.dtype, ir::DType::kFloat32) << what;
  const int64_t n = cpu.numElements();
  const auto *g = reinterpret_cast<const float *>(cuda.bytes.data());
  const auto *c = reinterpret_cast<const float *>(cpu.bytes.data());
  int reported = 0;
  for (int64_t i = 0; i < n && reported < 5; ++i)
    if (!(std::fabs(static_cast<double>(g[i]) - c[i]) <= atol + rtol * std::fabs(c[i]))) {
      ADD_FAILURE() << what << "[" << i << "]: cuda " << g[i] << ", cpu " << c[i];
      ++reported;
    }
}

TEST(CudaExecutor, ViewOnlyPlanRuns) {
  DTC_REQUIRE_DEVICE();
  TempDir dir;
  const fs::path model = dir.path / "v.onnxtxt";
  {
    std::ofstream f(model);
    f << "<ir_version: 8, opset_import: [\"\" : 13]>\n"
         "agraph (float[N, 3, 4] x) => (float[N, 12] y) {\n"
         "  shape = Constant <value = int64[2] {0, -1}> ()\n"
         "  y = Reshape(x, shape)\n"
         "}\n";
  }
  ASSERT_TRUE(compilePlan(model.string(),
                          "--inference --batch-size 5 --device " + deviceUnderTest(),
                          dir.path / "v.dtc"));
  auto ex = load(dir.path / "v.dtc");
  ASSERT_TRUE(ex.hasValue()) << ex.status().message();
  EXPECT_EQ((*ex)->device().name(), deviceUnderTest() + ":0");
  rt::HostArray x;
  x.name = "x";
  x.dtype = ir::DType::kFloat32;
  x.shape = {5, 3, 4};
  x.bytes.resize(5 * 12 * 4);
  for (int i = 0; i < 60; ++i) {
    const float v = 0.5f * static_cast<float>(i) - 3.0f;
    std::memcpy(x.bytes.data() + 4 * i, &v, 4);
  }
  ASSERT_TRUE((*ex)->setInput(x).isOk());
  ASSERT_TRUE((*ex)->run().isOk());
  auto y = (*ex)->output("y");
  ASSERT_TRUE(y.hasValue()) << y.status().message();
  EXPECT_EQ(y->shape, (std::vector<int64_t>{5, 12}));
  EXPECT_EQ(y->bytes, x.bytes);
}

/// Inference of a bundled model on cuda vs cpu (the same plan flags, the same random inputs).
void inferenceParity(const std::string &file, const std::string &flags, int64_t intHi, double rtol,
                     double atol) {
  TempDir dir;
  ASSERT_TRUE(compilePlan(modelPath(file), "--inference " + flags, dir.path / "cpu.dtc"));
  ASSERT_TRUE(compilePlan(modelPath(file),
                          "--inference --device " + deviceUnderTest() + " " + flags,
                          dir.path / "cuda.dtc"));
  fs::copy_file(modelPath(file), dir.path / file);
  auto cpu = load(dir.path / "cpu.dtc");
  ASSERT_TRUE(cpu.hasValue()) << cpu.status().message();
  auto cuda = load(dir.path / "cuda.dtc");
  ASSERT_TRUE(cuda.hasValue()) << cuda.status().message();
  for (const rt::HostArray &a : randomInputs(**cpu, intHi)) {
    ASSERT_TRUE((*cpu)->setInput(a).isOk());
    ASSERT_TRUE((*cuda)->setInput(a).isOk());
  }
  for (rt::Executor *ex : {cpu->get(), cuda->get()}) {
    Status s = ex->run();
    ASSERT_TRUE(s.isOk()) << s.message();
  }
  // Twice on the GPU: a second run of the same plan gives the same outputs (no state leaks
  // between runs through the workspace or the arena).
  auto first = (*cuda)->outputs();
  ASSERT_TRUE(first.hasValue()) << first.status().message();
  ASSERT_TRUE((*cuda)->run().isOk());
  auto outCpu = (*cpu)->outputs();
  auto outCuda = (*cuda)->outputs();
  ASSERT_TRUE(outCpu.hasValue() && outCuda.hasValue());
  ASSERT_EQ(outCpu->size(), outCuda->size());
  for (size_t i = 0; i < outCpu->size(); ++i) {
    expectArraysClose((*outCuda)[i], (*outCpu)[i], rtol, atol, file + " " + (*outCpu)[i].name);
    EXPECT_EQ((*outCuda)[i].bytes, (*first)[i].bytes) << "second run differs: " << file;
  }
}

TEST(CudaExecutor, InferenceMlp) {
  DTC_REQUIRE_DEVICE();
  inferenceParity("mlp.onnx", "--batch-size 8", 0, 1e-4, 1e-5);
}
TEST(CudaExecutor, InferenceCnn) {
  DTC_REQUIRE_DEVICE();
  inferenceParity("cnn.onnx", "--batch-size 8", 0, 1e-3, 1e-4);
}
TEST(CudaExecutor, InferenceResnet) {
  DTC_REQUIRE_DEVICE();
  inferenceParity("resnet.onnx", "--batch-size 4", 0, 1e-3, 1e-4);
}
TEST(CudaExecutor, InferenceUnet) {
  DTC_REQUIRE_DEVICE();
  inferenceParity("unet.onnx", "--batch-size 2", 0, 1e-3, 1e-4);
}
TEST(CudaExecutor, InferenceGpt) {
  DTC_REQUIRE_DEVICE();
  // Token ids below 32: within every bundled GPT's vocabulary.
  inferenceParity("gpt.onnx", "--batch-size 4", 32, 1e-3, 1e-4);
}

/// Trains the MLP for `steps` steps with `flags` on cuda and on cpu (same data, no shuffle):
/// the per-step losses (from --log) and the final parameters (--save-params) must agree.
void trainingParity(const std::string &flags, int64_t steps, double rtol) {
  TempDir dir;
  const std::string model = modelPath("mlp.onnx");
  ASSERT_TRUE(compilePlan(model, "--batch-size 16 " + flags, dir.path / "cpu.dtc"));
  ASSERT_TRUE(compilePlan(model, "--device " + deviceUnderTest() + " --batch-size 16 " + flags,
                          dir.path / "cuda.dtc"));
  fs::copy_file(model, dir.path / "mlp.onnx");
  // 64 samples of the 784-feature input with labels in [0, 10).
  {
    std::mt19937 rng(3);
    rt::HostArray x, label;
    x.name = "input";
    x.dtype = ir::DType::kFloat32;
    x.shape = {64, 784};
    x.bytes.resize(64 * 784 * 4);
    for (int64_t i = 0; i < 64 * 784; ++i) {
      const float v = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
      std::memcpy(x.bytes.data() + 4 * i, &v, 4);
    }
    label.name = "label";
    label.dtype = ir::DType::kInt64;
    label.shape = {64};
    label.bytes.resize(64 * 8);
    for (int64_t i = 0; i < 64; ++i) {
      const int64_t v = static_cast<int64_t>(rng() % 10);
      std::memcpy(label.bytes.data() + 8 * i, &v, 8);
    }
    ASSERT_TRUE(rt::writeNpz((dir.path / "train.npz").string(), {x, label}).isOk());
  }
  std::vector<double> losses[2];
  std::vector<rt::HostArray> params[2];
  const char *names[2] = {"cpu", "cuda"};
  for (int d = 0; d < 2; ++d) {
    auto p = plan::readPlanFile((dir.path / (std::string(names[d]) + ".dtc")).string());
    ASSERT_TRUE(p.hasValue()) << p.status().message();
    rt::TrainOptions o;
    o.planPath = (dir.path / (std::string(names[d]) + ".dtc")).string();
    o.dataPath = (dir.path / "train.npz").string();
    o.steps = steps;
    o.shuffle = false;
    o.progress = nullptr;
    o.logPath = (dir.path / (std::string(names[d]) + ".jsonl")).string();
    o.saveParamsPath = (dir.path / (std::string(names[d]) + "_params.npz")).string();
    Status s = rt::train(p.takeValue(), o);
    ASSERT_TRUE(s.isOk()) << names[d] << ": " << s.message();
    std::ifstream log(o.logPath);
    for (std::string line; std::getline(log, line);) {
      const size_t at = line.find("\"loss\":");
      if (line.find("\"event\":\"step\"") != std::string::npos && at != std::string::npos)
        losses[d].push_back(std::strtod(line.c_str() + at + 7, nullptr));
    }
    auto arrays = rt::readArrays(o.saveParamsPath);
    ASSERT_TRUE(arrays.hasValue()) << arrays.status().message();
    params[d] = arrays.takeValue();
  }
  ASSERT_EQ(losses[0].size(), static_cast<size_t>(steps));
  ASSERT_EQ(losses[1].size(), losses[0].size());
  for (size_t i = 0; i < losses[0].size(); ++i)
    EXPECT_NEAR(losses[1][i], losses[0][i], rtol * std::fabs(losses[0][i]) + 1e-6) << "step " << i;
  ASSERT_EQ(params[0].size(), params[1].size());
  for (size_t i = 0; i < params[0].size(); ++i) {
    EXPECT_EQ(params[1][i].name, params[0][i].name);
    expectArraysClose(params[1][i], params[0][i], rtol, 1e-5, "parameter " + params[0][i].name);
  }
}

TEST(CudaTraining, MlpOneStepSgd) {
  DTC_REQUIRE_DEVICE();
  trainingParity("--optimizer sgd --lr 0.1", 1, 1e-4);
}
TEST(CudaTraining, MlpTwentyStepsMomentum) {
  DTC_REQUIRE_DEVICE();
  trainingParity("--optimizer sgd --lr 0.05 --momentum 0.9", 20, 1e-3);
}
TEST(CudaTraining, MlpTwentyStepsAdam) {
  DTC_REQUIRE_DEVICE();
  trainingParity("--optimizer adam --lr 0.001", 20, 1e-3);
}
TEST(CudaTraining, MlpTwentyStepsAdamw) {
  DTC_REQUIRE_DEVICE();
  trainingParity("--optimizer adamw --lr 0.001", 20, 1e-3);
}

} // namespace
} // namespace dtc::gputest
