// Datasets: which arrays feed which input, shape/dtype/count errors, int32/int64 label
// conversion, the batch gather, and the deterministic per-epoch order.
#include "TrainingTestUtil.h"

#include "runtime/DataLoader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace dtc::rt::test {
namespace {

template <typename T>
HostArray ints(const std::string &name, std::vector<int64_t> shape, std::vector<T> v) {
  HostArray a;
  a.name = name;
  a.dtype = sizeof(T) == 8 ? ir::DType::kInt64 : ir::DType::kInt32;
  a.shape = std::move(shape);
  a.bytes.assign(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T));
  return a;
}

std::vector<DataInput> classifierInputs() {
  return {{"image", "image", ir::DType::kFloat32, {2, 3}},
          {"label", "label", ir::DType::kInt64, {2}}};
}

TEST(DataLoaderTest, InputsOfTheRegressionPlan) {
  TempDir dir;
  plan::Plan p = makeRegressionPlan(dir.path.string());
  auto inputs = dataInputsOf(p);
  ASSERT_TRUE(inputs.hasValue());
  ASSERT_EQ(inputs->size(), 2u); // x and label; dtc::lr/step/rng are fed by the runtime
  EXPECT_EQ((*inputs)[0].input, "x");
  EXPECT_EQ((*inputs)[0].array, "x");
  EXPECT_EQ((*inputs)[0].shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ((*inputs)[1].input, "label");
  // A data binding renames the array.
  plan::DataBinding *d = p.mutable_programs(0)->add_data_bindings();
  d->set_array("features");
  d->set_input("x");
  EXPECT_EQ((*dataInputsOf(p))[0].array, "features");
}

TEST(DataLoaderTest, BatchesAndLabelConversion) {
  TempDir dir;
  ASSERT_TRUE(
      writeNpz(dir / "d.npz",
               {f32("image", {5, 3}, {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32, 40, 41, 42}),
                ints<int32_t>("label", {5}, {0, 1, 2, 3, 4}), f32("unused", {1}, {0})})
          .isOk());
  auto ds = Dataset::load(dir / "d.npz", classifierInputs());
  ASSERT_TRUE(ds.hasValue()) << ds.status().message();
  EXPECT_EQ(ds->samples(), 5);
  std::vector<HostArray> b = ds->batch({4, 2, 0, 1, 3}, 1);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].name, "image");
  EXPECT_EQ(b[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values(b[0]), (std::vector<float>{20, 21, 22, 0, 1, 2}));
  EXPECT_EQ(b[1].dtype, ir::DType::kInt64); // int32 file array converted for the int64 input
  int64_t l[2];
  std::memcpy(l, b[1].bytes.data(), 16);
  EXPECT_EQ(l[0], 2);
  EXPECT_EQ(l[1], 0);
}

TEST(DataLoaderTest, Errors) {
  TempDir dir;
  auto load = [&](std::vector<HostArray> arrays,
                  std::vector<DataInput> inputs = classifierInputs()) {
    EXPECT_TRUE(writeNpz(dir / "d.npz", arrays).isOk());
    return Dataset::load(dir / "d.npz", inputs).status().message();
  };
  const std::string f = dir / "d.npz";
  EXPECT_EQ(load({f32("image", {4, 3}, std::vector<float>(12))}),
            f + ": array 'label': missing: the plan's input 'label' needs it (i64[] per sample); "
                "the file has image f32[4,3]");
  EXPECT_EQ(
      load({f32("image", {4, 3}, std::vector<float>(12)), ints<int64_t>("label", {3}, {0, 1, 2})}),
      f + ": arrays have different sample counts (axis 0): 'image' 4, 'label' 3");
  EXPECT_EQ(load({f32("image", {4, 2}, std::vector<float>(8)),
                  ints<int64_t>("label", {4}, {0, 1, 2, 3})}),
            f + ": array 'image': expected f32[3] per sample (array shape [N,3]), got f32[2] per "
                "sample (array f32[4,2])");
  EXPECT_EQ(load({ints<int32_t>("image", {4, 3}, std::vector<int32_t>(12)),
                  ints<int64_t>("label", {4}, {0, 1, 2, 3})}),
            f + ": array 'image': expected f32[3] per sample (array shape [N,3]), got i32[3] per "
                "sample (array i32[4,3])");
  EXPECT_EQ(load({f32("image", {1, 3}, std::vector<float>(3)), ints<int64_t>("label", {1}, {0})}),
            f + ": has 1 samples, fewer than one batch of 2");
  std::vector<DataInput> i32Label = classifierInputs();
  i32Label[1].dtype = ir::DType::kInt32;
  EXPECT_EQ(load({f32("image", {2, 3}, std::vector<float>(6)),
                  ints<int64_t>("label", {2}, {0, int64_t{1} << 40})},
                 i32Label),
            f + ": array 'label': value 1099511627776 at flat index 1 does not fit the input's "
                "int32");
  EXPECT_NE(Dataset::load(dir / "nope.npz", classifierInputs()).status().message().find("nope.npz"),
            std::string::npos);
}

TEST(DataLoaderTest, EpochOrderIsADeterministicPermutation) {
  std::vector<int64_t> plain = epochOrder(10, 7, 3, false);
  for (int64_t i = 0; i < 10; ++i)
    EXPECT_EQ(plain[i], i);
  std::vector<int64_t> a = epochOrder(1000, 7, 0, true);
  EXPECT_EQ(a, epochOrder(1000, 7, 0, true));
  EXPECT_NE(a, epochOrder(1000, 7, 1, true)); // another epoch
  EXPECT_NE(a, epochOrder(1000, 8, 0, true)); // another seed
  EXPECT_NE(a, plain);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i)
    EXPECT_EQ(sorted[i], i);
  // Pinned: the generator is specified (mt19937_64, seed_seq, rejection sampling), so this order
  // is the same everywhere. A change here changes every shuffled run.
  EXPECT_EQ(epochOrder(8, 0, 0, true), (std::vector<int64_t>{0, 7, 5, 6, 1, 3, 2, 4}));
  EXPECT_EQ(epochOrder(1, 5, 2, true), (std::vector<int64_t>{0}));
  EXPECT_TRUE(epochOrder(0, 5, 2, true).empty());
}

} // namespace
} // namespace dtc::rt::test
