// The CUDA view kernels against the CPU ones (and the CUDA target's answers, which need no GPU).
#include "tests/gpu/GpuTestUtil.h"

#include "ops/kernel/Target.h"

namespace dtc::gputest {
namespace {

TEST(CudaTarget, AnswersWithoutAGpu) {
  const ops::Target &t = ops::cudaTarget();
  EXPECT_EQ(t.alignment(), 256u);
  EXPECT_TRUE(t.isViewOp("", "Reshape"));
  EXPECT_FALSE(t.prefersChannelsLast("Conv"));
  ops::KernelSpec spec = makeSpec("Reshape", {{2, 3}, {2}}, {{3, 2}});
  spec.inputs[1].dtype = ir::DType::kInt64;
  EXPECT_TRUE(t.checkKernel(spec).isOk()) << t.checkKernel(spec).message();
  spec.inputs[0].layout = ops::Layout::kChannelsLast;
  EXPECT_FALSE(t.checkKernel(spec).isOk());
  ops::KernelSpec none = makeSpec("NoSuchOp", {{2}}, {{2}});
  EXPECT_NE(t.checkKernel(none).message().find("no CUDA kernel for op 'NoSuchOp'"),
            std::string::npos);
}

TEST(CudaView, ReshapeCopiesWhenNotAliased) {
  ops::KernelSpec spec = makeSpec("Reshape", {{4, 6}, {2}}, {{6, 4}});
  spec.inputs[1].dtype = ir::DType::kInt64;
  Fill shape;
  int64_t dims[2] = {6, 4};
  shape.values.assign(reinterpret_cast<const char *>(dims), sizeof dims);
  expectCudaMatchesCpu(spec, {Fill{}, shape});
}

} // namespace
} // namespace dtc::gputest
