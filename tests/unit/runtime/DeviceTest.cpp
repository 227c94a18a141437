// Devices (runtime/Device.h) on the CPU side: the CPU device's arena transfers and copies
// (overlapping ranges too), the GPU choice from the plan's device index and the local rank, and
// createDevice's answer for a CUDA plan on this machine (an error naming the device and why, or
// on a machine with a GPU a working CUDA device).
#include "runtime/Device.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

namespace dtc::rt {
namespace {

TEST(CpuDevice, UploadDownloadCopyRoundTrip) {
  auto dev = createDevice(ops::DeviceKind::kCpu, 0, DeviceOptions{});
  ASSERT_TRUE(dev.hasValue()) << dev.status().message();
  Device &d = **dev;
  EXPECT_EQ(d.name(), "cpu:0");
  EXPECT_EQ(d.kind(), ops::DeviceKind::kCpu);
  ASSERT_TRUE(d.allocateArena(1000, 64).isOk());
  EXPECT_EQ(d.arenaBytes(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d.arenaAt(0)) % 64, 0u);
  // Zero-filled.
  std::vector<uint8_t> back(1000, 0xff);
  ASSERT_TRUE(d.download(0, back.data(), back.size()).isOk());
  for (uint8_t b : back)
    ASSERT_EQ(b, 0);
  std::vector<uint8_t> src(200);
  std::iota(src.begin(), src.end(), uint8_t{1});
  ASSERT_TRUE(d.upload(64, src.data(), src.size()).isOk());
  // A disjoint copy, then an overlapping one (memmove semantics: the source bytes as they were).
  ASSERT_TRUE(d.copy(d.arenaAt(512), d.arenaAt(64), 200).isOk());
  ASSERT_TRUE(d.copy(d.arenaAt(74), d.arenaAt(64), 100).isOk());
  ASSERT_TRUE(d.download(0, back.data(), back.size()).isOk());
  for (int i = 0; i < 200; ++i)
    EXPECT_EQ(back[512 + i], src[i]) << i;
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(back[64 + i], src[i]) << i;
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(back[74 + i], src[i]) << i;
  for (int i = 110; i < 200; ++i)
    EXPECT_EQ(back[64 + i], src[i]) << i;
  EXPECT_TRUE(d.synchronize().isOk());
  EXPECT_TRUE(d.prepare().isOk());
}

TEST(Device, GpuChoiceAddsTheLocalRankModuloTheCount) {
  EXPECT_EQ(chooseGpu(0, 0, 1), 0);
  EXPECT_EQ(chooseGpu(0, 1, 2), 1);
  EXPECT_EQ(chooseGpu(1, 1, 2), 0);
  EXPECT_EQ(chooseGpu(0, 5, 4), 1);
  EXPECT_EQ(chooseGpu(3, 0, 8), 3);
  // From the launcher's environment: Open MPI first, then Slurm; junk counts as 0.
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  EXPECT_EQ(chooseGpu(0, -1, 2), 1);
  EXPECT_EQ(chooseGpu(0, -1, 8), 3);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x1", 1);
  ::setenv("SLURM_LOCALID", "2", 1);
  EXPECT_EQ(chooseGpu(0, -1, 8), 2);
  ::unsetenv("SLURM_LOCALID");
  EXPECT_EQ(chooseGpu(1, -1, 8), 1);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(chooseGpu(2, -1, 8), 2);
}

TEST(Device, CudaDeviceOrAClearError) {
  auto dev = createDevice(ops::DeviceKind::kCuda, 0, DeviceOptions{});
  if (!dev) {
    const std::string m = dev.status().message();
#ifdef DTC_HAVE_CUDA
    EXPECT_EQ(m.rfind("runs on cuda:0 but no CUDA device is visible (cudaGetDeviceCount: ", 0), 0u)
        << m;
#else
    EXPECT_EQ(m, "runs on cuda:0 but this dtc-run was built without CUDA (DTC_ENABLE_CUDA=OFF)");
#endif
    return;
  }
  // A machine with a GPU: the device works (tests/gpu covers it in depth).
  Device &d = **dev;
  EXPECT_EQ(d.kind(), ops::DeviceKind::kCuda);
  EXPECT_EQ(d.name().rfind("cuda:", 0), 0u);
  ASSERT_TRUE(d.allocateArena(4096, 256).isOk());
  std::vector<float> v(100, 2.5f), back(100, 0.0f);
  ASSERT_TRUE(d.upload(256, v.data(), 400).isOk());
  ASSERT_TRUE(d.download(256, back.data(), 400).isOk());
  EXPECT_EQ(back, v);
}

} // namespace
} // namespace dtc::rt
