// Tests of reading a plan as one rank does (compiler/plan/Plan.h: splitPlan, parseProgram,
// readPlanForRank) and of the file fingerprint: the header is split from the programs without
// parsing them, a rank parses its own program in full and the others as summaries (no
// instructions), validation still catches what a summary holds, and the fingerprint is the
// same from the file and from the plan in memory.
#include "compiler/plan/Plan.h"
#include "tests/unit/plan/PlanTestUtil.h"
#include "tests/unit/plan/TempDirTest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace dtc::plan {
namespace {

namespace fs = std::filesystem;
using test::makePlan;

/// makePlan's program run by rank 0, and a second program (the same with another arena layout)
/// run by rank 1: two ranks with programs of their own, as pipeline stages have.
Plan twoProgramPlan() {
  Plan plan = makePlan();
  plan.set_world_size(2);
  RankInfo *r1 = plan.add_ranks();
  *r1 = plan.ranks(0);
  r1->set_rank(1);
  r1->set_program(1);
  RankProgram *p1 = plan.add_programs();
  *p1 = plan.programs(0);
  p1->clear_ranks();
  p1->add_ranks(1);
  p1->mutable_buffers(4)->set_offset(0); // y reuses x's bytes: another program
  p1->set_arena_bytes(256);
  return plan;
}

class PlanReadTest : public test::TempDirTest {};

TEST_F(PlanReadTest, SplitKeepsProgramsAsBytes) {
  const Plan plan = twoProgramPlan();
  ASSERT_TRUE(validatePlan(plan, "two.dtc").isOk());
  auto bytes = serializePlan(plan, "two.dtc");
  ASSERT_TRUE(bytes) << bytes.status().message();
  auto file = splitPlan(*bytes, "two.dtc");
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->header.programs_size(), 0);
  EXPECT_EQ(file->header.ranks_size(), 2);
  EXPECT_EQ(file->header.producer(), "dtc-compile test");
  ASSERT_EQ(file->programs.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const auto [offset, length] = file->programs[static_cast<size_t>(i)];
    EXPECT_EQ(file->bytes.substr(offset, length), plan.programs(i).SerializeAsString());
    auto p = parseProgram(*file, i, "two.dtc");
    ASSERT_TRUE(p) << p.status().message();
    EXPECT_EQ(p->SerializeAsString(), plan.programs(i).SerializeAsString());
  }
  auto missing = parseProgram(*file, 2, "two.dtc");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().message(), "two.dtc: program 2: is not one of the plan's 2");
  // The whole parse is the split one with every program parsed.
  auto whole = parsePlan(*bytes, "two.dtc");
  ASSERT_TRUE(whole) << whole.status().message();
  EXPECT_EQ(whole->SerializeAsString(), plan.SerializeAsString());
}

TEST_F(PlanReadTest, BytesThatAreNoPlanAreErrors) {
  auto bytes = serializePlan(twoProgramPlan(), "p");
  ASSERT_TRUE(bytes);
  // Cut inside a program, and a stray zero tag.
  for (const std::string &bad :
       {bytes->substr(0, bytes->size() - 7), *bytes + std::string("\x00\x01", 2)}) {
    auto r = splitPlan(bad, "bad.dtc");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.status().message(), "bad.dtc: not a dtc plan (cannot parse)");
  }
  // A programs field (13) that is a varint is an unknown field, as protobuf's own parse of the
  // whole plan makes it: the file reads with its two programs.
  auto unknown = splitPlan(*bytes + std::string("\x68\x01", 2), "u.dtc");
  ASSERT_TRUE(unknown) << unknown.status().message();
  EXPECT_EQ(unknown->programs.size(), 2u);
  // A program marked as a summary (a reader's in-memory form) is refused in a file.
  Plan marked = twoProgramPlan();
  marked.mutable_programs(1)->set_summary(true);
  auto r = parsePlan(marked.SerializeAsString(), "marked.dtc");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            "marked.dtc: program 1: is marked as a summary, which no plan file holds");
  // ... and never written.
  Status w = writePlanFile(marked, path("marked.dtc"));
  ASSERT_FALSE(w.isOk());
  EXPECT_NE(w.message().find("program 1 is a summary"), std::string::npos) << w.message();
  EXPECT_FALSE(fs::exists(path("marked.dtc")));
}

TEST_F(PlanReadTest, EachRankParsesItsOwnProgramOnly) {
  const Plan plan = twoProgramPlan();
  ASSERT_TRUE(writePlanFile(plan, path("two.dtc")).isOk());
  for (int rank : {0, 1}) {
    SCOPED_TRACE(rank);
    std::string fp;
    auto r = readPlanForRank(path("two.dtc"), rank, &fp);
    ASSERT_TRUE(r) << r.status().message();
    EXPECT_EQ(fp, fingerprint(plan));
    ASSERT_EQ(r->programs_size(), 2);
    const RankProgram &own = r->programs(rank);
    const RankProgram &other = r->programs(1 - rank);
    EXPECT_FALSE(own.summary());
    EXPECT_EQ(own.SerializeAsString(), plan.programs(rank).SerializeAsString());
    EXPECT_TRUE(other.summary());
    EXPECT_EQ(other.instructions_size(), 0);
    // Everything but the instructions is there.
    RankProgram want = plan.programs(1 - rank);
    want.clear_instructions();
    want.set_summary(true);
    EXPECT_EQ(other.SerializeAsString(), want.SerializeAsString());
    EXPECT_TRUE(validatePlan(*r, "two.dtc").isOk());
    // Header fields as they were.
    Plan header = *r;
    header.clear_programs();
    Plan wantHeader = plan;
    wantHeader.clear_programs();
    EXPECT_EQ(header.SerializeAsString(), wantHeader.SerializeAsString());
  }
  // A rank outside the table, and plans with a parameter host, read every program in full.
  auto all = readPlanForRank(path("two.dtc"), 5);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->SerializeAsString(), plan.SerializeAsString());
}

TEST_F(PlanReadTest, SummariesAreStillValidated) {
  Plan plan = twoProgramPlan();
  plan.mutable_programs(1)->mutable_buffers(4)->set_offset(4096); // outside program 1's arena
  ASSERT_TRUE(writePlanFile(plan, path("bad.dtc")).isOk());
  auto r = readPlanForRank(path("bad.dtc"), 0);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_TRUE(r->programs(1).summary());
  Status s = validatePlan(*r, "bad.dtc");
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message().rfind(
                "plan bad.dtc: program 1: buffer %4 'y': ends at byte 4120, past the arena", 0),
            0u)
      << s.message();
  // A summary that holds instructions is not one a reader made.
  Plan forged = *r;
  *forged.mutable_programs(1)->add_instructions() = plan.programs(1).instructions(0);
  plan.mutable_programs(1)->mutable_buffers(4)->set_offset(0);
  *forged.mutable_programs(1)->mutable_buffers(4) = plan.programs(1).buffers(4);
  Status f = validatePlan(forged, "forged.dtc");
  ASSERT_FALSE(f.isOk());
  EXPECT_EQ(f.message(), "plan forged.dtc: program 1: a summary holds no instructions");
}

TEST_F(PlanReadTest, FingerprintIsTheFilesWhereverItLies) {
  const Plan plan = twoProgramPlan();
  ASSERT_TRUE(writePlanFile(plan, path("a.dtc")).isOk());
  fs::create_directories(path("elsewhere"));
  Plan moved = plan;
  moved.mutable_model()->set_path("../models/mlp.onnx"); // compiled from another folder
  ASSERT_TRUE(writePlanFile(moved, path("elsewhere/b.dtc")).isOk());
  std::string fa, fb;
  ASSERT_TRUE(readPlanForRank(path("a.dtc"), 0, &fa));
  ASSERT_TRUE(readPlanForRank(path("elsewhere/b.dtc"), 1, &fb));
  EXPECT_EQ(fa.size(), 32u);
  EXPECT_EQ(fa, fb);
  EXPECT_EQ(fa, fingerprint(plan));
  EXPECT_EQ(fa, fingerprint(moved));
  // Any change to another rank's program, to a shared constant or to the header changes it.
  std::vector<Plan> edits(4, plan);
  edits[0].mutable_programs(1)->mutable_instructions(1)->mutable_copy()->set_src(0);
  edits[1].add_constants("0123456789");
  edits[2].mutable_ranks(1)->mutable_device()->set_index(1);
  edits[3].mutable_programs(0)->mutable_buffers(1)->set_source("fc.bias");
  std::set<std::string> seen = {fa};
  for (size_t i = 0; i < edits.size(); ++i) {
    const std::string p = path("edit" + std::to_string(i) + ".dtc");
    ASSERT_TRUE(writePlanFile(edits[i], p).isOk());
    std::string f;
    ASSERT_TRUE(readPlanForRank(p, 0, &f));
    EXPECT_EQ(f, fingerprint(edits[i])) << "edit " << i;
    EXPECT_TRUE(seen.insert(f).second) << "edit " << i;
  }
}

} // namespace
} // namespace dtc::plan
