// The device mesh: --strategy parsing, rank <-> coordinates (tp fastest, then dp, then pp) and
// the communicator groups along each axis.
#include "compiler/support/Mesh.h"

#include <gtest/gtest.h>

namespace dtc {
namespace {

TEST(MeshTest, SingleAndDataParallel) {
  Expected<Mesh> single = parseMesh("single");
  ASSERT_TRUE(single);
  EXPECT_TRUE(single->single);
  EXPECT_EQ(single->worldSize(), 1);
  EXPECT_EQ(single->text(), "single");
  Expected<Mesh> dp = parseMesh("dp=4");
  ASSERT_TRUE(dp);
  EXPECT_FALSE(dp->single);
  EXPECT_EQ(dp->worldSize(), 4);
  EXPECT_EQ(dp->text(), "dp=4");
  EXPECT_EQ(dp->groups(MeshAxis::kDp), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}}));
  EXPECT_EQ(parseMesh("dp=1")->text(), "dp=1");
}

TEST(MeshTest, LayoutTpFastestThenDpThenPp) {
  Expected<Mesh> m = parseMesh("pp=2,tp=2,dp=3");
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->worldSize(), 12);
  EXPECT_EQ(m->microbatches, 2); // default: one per stage
  EXPECT_EQ(m->text(), "dp=3,pp=2,tp=2,microbatches=2,schedule=1f1b");
  for (int64_t r = 0; r < 12; ++r)
    EXPECT_EQ(m->rankOf(m->coordOf(r)), r);
  // rank = tp + 2 * (dp + 3 * pp)
  EXPECT_EQ(m->coordOf(7), (MeshCoord{/*dp=*/0, /*pp=*/1, /*tp=*/1}));
  EXPECT_EQ(m->coordOf(5), (MeshCoord{/*dp=*/2, /*pp=*/0, /*tp=*/1}));
  EXPECT_EQ(m->groupOf(7, MeshAxis::kTp), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(m->groupOf(7, MeshAxis::kDp), (std::vector<int64_t>{7, 9, 11}));
  EXPECT_EQ(m->groupOf(7, MeshAxis::kPp), (std::vector<int64_t>{1, 7}));
  // Every rank is in exactly one group of each axis.
  for (MeshAxis a : {MeshAxis::kDp, MeshAxis::kPp, MeshAxis::kTp}) {
    std::vector<int> seen(12, 0);
    for (const auto &g : m->groups(a))
      for (int64_t r : g)
        ++seen[static_cast<size_t>(r)];
    EXPECT_EQ(seen, std::vector<int>(12, 1)) << meshAxisName(a);
  }
  EXPECT_EQ(m->groups(MeshAxis::kPp).size(), 6u);
}

TEST(MeshTest, PipelineOptions) {
  Expected<Mesh> m = parseMesh("pp=4,microbatches=8,schedule=gpipe");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->microbatches, 8);
  EXPECT_EQ(m->schedule, PipelineSchedule::kGPipe);
  EXPECT_EQ(m->text(), "pp=4,microbatches=8,schedule=gpipe");
  EXPECT_EQ(m->stages(), 4);
  // Interleaved: two chunks per rank unless virtual-stages says otherwise.
  m = parseMesh("pp=2,microbatches=4,schedule=interleaved");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->virtualStages, 2);
  EXPECT_EQ(m->stages(), 4);
  EXPECT_EQ(m->text(), "pp=2,microbatches=4,schedule=interleaved,virtual-stages=2");
  m = parseMesh("dp=2,pp=4,microbatches=8,schedule=interleaved,virtual-stages=3");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->stages(), 12);
  EXPECT_EQ(m->worldSize(), 8);
}

TEST(MeshTest, BadStrategiesNameTheItem) {
  struct Case {
    const char *strategy, *message;
  } cases[] = {
      {"", "--strategy: is empty"},
      {"dp=0", "dp needs an integer in [1, 65536], got '0'"},
      {"dp=2x", "dp needs an integer in [1, 65536], got '2x'"},
      {"dp=", "dp needs an integer"},
      {"dp=2,dp=2", "'dp' is given twice"},
      {"xx=2", "unknown key 'xx'"},
      {"dp", "'dp' is not KEY=VALUE"},
      {"dp=2,", "'' is not KEY=VALUE"},
      {"dp=2,microbatches=4", "microbatches is a pipeline option"},
      {"dp=2,schedule=gpipe", "schedule is a pipeline option"},
      {"pp=2,schedule=zb", "unknown schedule 'zb' (known: gpipe, 1f1b, zb-h1, interleaved)"},
      {"pp=2,microbatches=3,schedule=interleaved",
       "schedule=interleaved needs microbatches to be a multiple of pp=2, got 3"},
      {"pp=2,virtual-stages=2", "virtual-stages is an option of schedule=interleaved"},
      {"pp=2,schedule=interleaved,virtual-stages=1",
       "virtual-stages needs an integer in [2, 64], got '1'"},
      {"dp=1024,pp=1024", "the mesh has 1048576 ranks; at most 65536"},
  };
  for (const Case &c : cases) {
    Expected<Mesh> m = parseMesh(c.strategy);
    ASSERT_FALSE(m) << c.strategy;
    EXPECT_NE(m.status().message().find(c.message), std::string::npos)
        << c.strategy << ": " << m.status().message();
    EXPECT_EQ(m.status().message().rfind("--strategy", 0), 0u) << m.status().message();
  }
}

} // namespace
} // namespace dtc
