// The targets the lowering queries (ops/kernel/Target.h): the CPU target answers as the CPU
// kernel table does; the CUDA target's table only names operators dtc defines and the CPU runs
// (the CPU check proves a spec consistent before the CUDA check adds its limits), and its
// answers need no GPU.
#include "ops/kernel/Target.h"
#include "tests/unit/cpu/KernelTestUtil.h"

#include "ops/OpDef.h"

#include <algorithm>
#include <set>

namespace dtc::ops::cpu::test {
namespace {

TEST(Targets, DeviceKinds) {
  EXPECT_EQ(*parseDeviceKind("cpu"), DeviceKind::kCpu);
  EXPECT_EQ(*parseDeviceKind("cuda"), DeviceKind::kCuda);
  EXPECT_EQ(parseDeviceKind("tpu").status().message(),
            "--device: unknown device 'tpu' (expected cpu or cuda)");
  EXPECT_EQ(&targetFor(DeviceKind::kCpu), &cpuTarget());
  EXPECT_EQ(&targetFor(DeviceKind::kCuda), &cudaTarget());
  EXPECT_STREQ(cpuTarget().name(), "cpu");
  EXPECT_STREQ(cudaTarget().name(), "cuda");
}

TEST(Targets, CpuTargetIsTheCpuKernelTable) {
  const Target &t = cpuTarget();
  EXPECT_EQ(t.alignment(), 64u);
  EXPECT_EQ(t.kernelOpNames(), kernelOpNames());
  EXPECT_TRUE(t.hasKernel("ai.dtc", "FusedConv"));
  EXPECT_TRUE(t.prefersChannelsLast("Conv"));
  EXPECT_FALSE(t.prefersChannelsLast("Relu"));
  EXPECT_TRUE(t.isViewOp("", "Flatten"));
  KernelSpec relu = makeSpec("Relu", {f32({4})}, {f32({4})});
  EXPECT_EQ(t.inPlaceInput(relu), inPlaceInput(relu));
  KernelSpec bad = makeSpec("Relu", {{ir::DType::kFloat64, {2}}}, {{ir::DType::kFloat64, {2}}});
  EXPECT_EQ(t.checkKernel(bad).message(), checkKernel(bad).message());
}

// The CUDA column of the completeness check: every op with a CUDA kernel is an operator dtc
// defines (ops/Ops.def) or a plan-only op, and has a CPU kernel (whose check the CUDA target
// runs first). The ops without one are compile-time errors for --device cuda.
TEST(Targets, CudaTableNamesDefinedOpsWithCpuKernels) {
  const Target &t = cudaTarget();
  EXPECT_EQ(t.alignment(), 256u);
  std::vector<std::string> names = t.kernelOpNames();
  EXPECT_FALSE(names.empty());
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size())
      << "an op is listed twice in ops/cuda/Kernels*.def";
  const std::vector<std::string> cpuNames = kernelOpNames();
  std::set<std::string> defined;
  for (const OpDef *d : allOps())
    defined.insert(d->name);
  for (const std::string &op : names) {
    EXPECT_TRUE(defined.count(op) || op == "FusedConv" || op == "Reorder") << op;
    EXPECT_NE(std::find(cpuNames.begin(), cpuNames.end(), op), cpuNames.end())
        << op << " has a CUDA kernel but no CPU kernel";
  }
  for (const char *view : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    EXPECT_TRUE(t.isViewOp("", view)) << view;
}

TEST(Targets, CudaTargetChecks) {
  const Target &t = cudaTarget();
  // Unknown to the CUDA table: named as such.
  EXPECT_EQ(t.checkKernel(makeSpec("NoSuchOp", {f32({1})}, {f32({1})})).message(),
            "node 'n0' (NoSuchOp): no CUDA kernel for op 'NoSuchOp' (--device cuda)");
  // Channels-last operands are refused before anything else.
  KernelSpec view = makeSpec("Reshape", {f32({1, 2, 3, 4}), i64({2})}, {f32({6, 4})});
  EXPECT_TRUE(t.checkKernel(view).isOk()) << t.checkKernel(view).message();
  view.inputs[0].layout = Layout::kChannelsLast;
  EXPECT_EQ(t.checkKernel(view).message(),
            "node 'n0' (Reshape): input 0 is channels-last; the CUDA kernels take row-major "
            "operands only");
  // The CPU's consistency check runs first: a view whose sizes differ is refused by it.
  KernelSpec bad = makeSpec("Reshape", {f32({2, 3}), i64({2})}, {f32({4, 2})});
  EXPECT_FALSE(t.checkKernel(bad).isOk());
  EXPECT_EQ(t.inPlaceInput(bad), -1);
}

} // namespace
} // namespace dtc::ops::cpu::test
