// Tests of the plan library (compiler/plan/Plan.h): file round trips and read errors, the
// canonical text (golden), fingerprint sensitivity and checksum helpers on a small hand-built
// plan (validation: ValidateTest.cpp). DTC_WRITE_PLAN_SEEDS=<folder> also writes the fuzz seeds
// there.
#include "compiler/plan/Plan.h"
#include "runtime/Executor.h"
#include "tests/unit/plan/PlanTestUtil.h"
#include "tests/unit/plan/TempDirTest.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

namespace dtc::plan {
namespace {

namespace fs = std::filesystem;
using test::addBuffer;
using test::addSecondDpRank;
using test::floatBytes;
using test::kAbcSha;
using test::kAbcXxh;
using test::makePlan;

const char *kGolden = R"(plan v3 mode=inference world_size=1
model "models/mlp.onnx" checksum=xxh3-128:06b05ab6733a618578af5f94892f3950 size=5
bound N=2
hyperparameters batch_size=2
rank 0 device=cpu:0 program=0 dp=0 pp=0 tp=0 groups=[]
program 0 ranks=[0] arena=320 no_reuse=384 alignment=64
  buffer %0 "x" input f32[2,4] @0+32
  buffer %1 "w" param f32[3,4] @64+48 source="fc.weight"
  buffer %2 "b" constant f32[3] @128+12 data=[0.5, 1, -2]
  buffer %3 "/fc/Gemm_output_0" activation f32[2,3] @192+24
  buffer %4 "y" output f32[2,3] @256+24
  data "x" -> input "x" shard_axis=-1
  input "x" -> %0
  output "y" -> %4
  0: %3 = Gemm(%0, %1, %2) {alpha=1, beta=1, transB=1} node="/fc/Gemm"
  1: copy %3 -> %4
)";

/// A fresh temporary folder per test, removed afterwards.
class PlanFileTest : public test::TempDirTest {};

// A FIFO is refused without blocking (fopen would wait for a writer forever), and the size is
// bounded: checksumFile and readPlanFile read regular files of bounded size only.
TEST_F(PlanFileTest, FifosAndOversizedFilesAreRefused) {
  const std::string fifo = path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto sum = checksumFile(fifo, "the plan's model", kMaxModelFileBytes);
  ASSERT_FALSE(sum);
  EXPECT_EQ(sum.status().message(), fifo + ": the plan's model is not a regular file (a FIFO, "
                                           "device or socket); inputs must be regular files");
  auto read = readPlanFile(fifo);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.status().message(), fifo + ": the plan is not a regular file (a FIFO, device "
                                            "or socket); inputs must be regular files");
  writeBytes(path("abc.txt"), "abc");
  auto big = checksumFile(path("abc.txt"), "the model", 2);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.status().message(),
            path("abc.txt") + ": the model is 3 bytes, over the 2 byte limit");
  EXPECT_TRUE(checksumFile(path("abc.txt"), "the model", 3));
}

// --- files ---

TEST_F(PlanFileTest, WriteReadRoundTrip) {
  Plan plan = makePlan();
  ASSERT_TRUE(writePlanFile(plan, path("a.dtc")).isOk());
  EXPECT_FALSE(fs::exists(path("a.dtc.tmp")));
  auto read = readPlanFile(path("a.dtc"));
  ASSERT_TRUE(read) << read.status().message();
  EXPECT_EQ(read->SerializeAsString(), plan.SerializeAsString());
  EXPECT_EQ(read->producer(), "dtc-compile test");
  EXPECT_EQ(planText(*read), kGolden);
  EXPECT_EQ(fingerprint(*read), fingerprint(plan));
  // Overwriting replaces the file.
  plan.set_producer("second");
  ASSERT_TRUE(writePlanFile(plan, path("a.dtc")).isOk());
  auto again = readPlanFile(path("a.dtc"));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->producer(), "second");
}

TEST_F(PlanFileTest, OtherFormatVersionIsRejected) {
  Plan plan = makePlan();
  plan.set_format_version(7);
  ASSERT_TRUE(writePlanFile(plan, path("v7.dtc")).isOk());
  auto read = readPlanFile(path("v7.dtc"));
  ASSERT_FALSE(read);
  EXPECT_EQ(read.status().message(),
            path("v7.dtc") + ": plan format version 7, this dtc reads versions 3 and 4");
}

TEST_F(PlanFileTest, UnknownChecksumAlgorithmIsRejected) {
  Plan plan = makePlan();
  plan.mutable_model()->set_checksum_algorithm(static_cast<ChecksumAlgorithm>(3));
  ASSERT_TRUE(writePlanFile(plan, path("algo.dtc")).isOk());
  auto read = readPlanFile(path("algo.dtc"));
  ASSERT_FALSE(read);
  EXPECT_EQ(read.status().message(), path("algo.dtc") +
                                         ": model checksum: algorithm algorithm(3) is not one "
                                         "this dtc knows (xxh3-128, xxh3-128-chunked); recompile "
                                         "the plan");
  plan = makePlan();
  ExternalFile *x = plan.mutable_model()->add_external_data();
  x->set_location("w.bin");
  x->set_checksum(kAbcXxh);
  x->set_checksum_algorithm(static_cast<ChecksumAlgorithm>(9));
  ASSERT_TRUE(writePlanFile(plan, path("algo.dtc")).isOk());
  read = readPlanFile(path("algo.dtc"));
  ASSERT_FALSE(read);
  EXPECT_EQ(read.status().message(), path("algo.dtc") +
                                         ": external data 'w.bin' checksum: algorithm "
                                         "algorithm(9) is not one this dtc knows (xxh3-128, "
                                         "xxh3-128-chunked); recompile the plan");
  // Both known algorithms are accepted: plans written before the chunked form stay readable.
  x->set_checksum_algorithm(CHECKSUM_XXH3_128);
  ASSERT_TRUE(writePlanFile(plan, path("algo.dtc")).isOk());
  EXPECT_TRUE(readPlanFile(path("algo.dtc")));
  x->set_checksum_algorithm(CHECKSUM_XXH3_128_CHUNKED);
  ASSERT_TRUE(writePlanFile(plan, path("algo.dtc")).isOk());
  EXPECT_TRUE(readPlanFile(path("algo.dtc")));
}

TEST_F(PlanFileTest, GarbageIsNotAPlan) {
  writeBytes(path("junk.dtc"), std::string("\xff\xff\xff\xff garbage", 12));
  auto read = readPlanFile(path("junk.dtc"));
  ASSERT_FALSE(read);
  EXPECT_EQ(read.status().message(), path("junk.dtc") + ": not a dtc plan (cannot parse)");
  // Bytes that happen to parse as some protobuf but carry no version.
  auto other = parsePlan(std::string("\x12\x03"
                                     "abc",
                                     5),
                         "other.bin");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.status().message(), "other.bin: not a dtc plan (no format version)");
}

TEST_F(PlanFileTest, EmptyAndMissingFiles) {
  writeBytes(path("empty.dtc"), "");
  auto empty = readPlanFile(path("empty.dtc"));
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.status().message(), path("empty.dtc") + ": not a dtc plan (empty file)");
  auto missing = readPlanFile(path("nope.dtc"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().message(),
            path("nope.dtc") + ": cannot open: No such file or directory");
}

TEST_F(PlanFileTest, DirectoryPaths) {
  Status s = writePlanFile(makePlan(), dir_.string());
  EXPECT_EQ(s.message(), dir_.string() + ": is a directory");
  auto read = readPlanFile(dir_.string());
  ASSERT_FALSE(read);
  EXPECT_EQ(read.status().message(), dir_.string() + ": the plan is a directory, not a file");
}

TEST_F(PlanFileTest, FailedWriteLeavesNothing) {
  const std::string target = path("no/such/folder/p.dtc");
  Status s = writePlanFile(makePlan(), target);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(),
            target + ": cannot create " + target + ".tmp.XXXXXX: No such file or directory");
  // A file or symlink planted at the old fixed temporary name is never written through.
  fs::create_directory(path("p.dtc.tmp"));
  std::ofstream(path("victim")) << "keep";
  fs::create_symlink(path("victim"), path("q.dtc.tmp"));
  ASSERT_TRUE(writePlanFile(makePlan(), path("p.dtc")).isOk());
  ASSERT_TRUE(writePlanFile(makePlan(), path("q.dtc")).isOk());
  std::ifstream victim(path("victim"));
  std::string kept((std::istreambuf_iterator<char>(victim)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "keep");
  EXPECT_TRUE(fs::is_directory(path("p.dtc.tmp")));
  // A FIFO (or device) at the target is refused, never replaced by a regular file.
  ASSERT_EQ(::mkfifo(path("f.dtc").c_str(), 0600), 0);
  Status f = writePlanFile(makePlan(), path("f.dtc"));
  EXPECT_EQ(f.message(), path("f.dtc") + ": exists and is not a regular file (a device, FIFO or "
                                         "socket); refusing to replace it");
  EXPECT_TRUE(fs::is_fifo(path("f.dtc")));
}

// --- text and fingerprint ---

TEST(PlanTextTest, Golden) { EXPECT_EQ(planText(makePlan()), kGolden); }

TEST(PlanTextTest, RankFilterAndGroups) {
  Plan plan = makePlan();
  addSecondDpRank(plan);
  // A second program, run by rank 1 only.
  *plan.add_programs() = plan.programs(0);
  addBuffer(plan.mutable_programs(1), "extra", BUFFER_ACTIVATION, 1, {16}, 576, 64);
  plan.mutable_programs(1)->set_arena_bytes(640);
  plan.mutable_programs(0)->clear_ranks();
  plan.mutable_programs(0)->add_ranks(0);
  plan.mutable_programs(1)->clear_ranks();
  plan.mutable_programs(1)->add_ranks(1);
  plan.mutable_ranks(1)->set_program(1);
  EXPECT_TRUE(validatePlan(plan, "t").isOk()) << validatePlan(plan, "t").message();
  const std::string all = planText(plan);
  EXPECT_NE(all.find("group 0 dp [0, 1]\n"), std::string::npos) << all;
  EXPECT_NE(all.find("rank 0 device=cpu:0 program=0 dp=0 pp=0 tp=0 groups=[0]\n"),
            std::string::npos);
  EXPECT_NE(all.find("rank 1 device=cpu:0 program=1 "), std::string::npos);
  EXPECT_NE(all.find("program 0 ranks=[0] arena=320 "), std::string::npos);
  EXPECT_NE(all.find("program 1 ranks=[1] arena=640 "), std::string::npos);
  const std::string one = planText(plan, 1);
  EXPECT_EQ(one.find("rank 0 device"), std::string::npos);
  EXPECT_EQ(one.find("program 0 "), std::string::npos);
  EXPECT_NE(one.find("program 1 ranks=[1] arena=640 "), std::string::npos);
  EXPECT_NE(one.find("group 0 dp [0, 1]\n"), std::string::npos);
  EXPECT_EQ(planText(plan, 5).find("program "), std::string::npos);
  // Ranks sharing a program print it once.
  Plan shared = makePlan();
  addSecondDpRank(shared);
  const std::string text = planText(shared);
  EXPECT_NE(text.find("program 0 ranks=[0,1] "), std::string::npos) << text;
  EXPECT_EQ(text.find("program 1"), std::string::npos);
}

TEST(PlanTextTest, OddNamesCannotBreakLines) {
  Plan plan = makePlan();
  plan.mutable_programs(0)->mutable_buffers(0)->set_name("a\"b\\c\nd\x01\xff");
  plan.mutable_programs(0)->mutable_inputs(0)->set_name("caf\xc3\xa9");
  const std::string text = planText(plan);
  EXPECT_NE(text.find("  buffer %0 \"a\\\"b\\\\c\\nd\\x01\\xff\" input f32[2,4] @0+32\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  input \"caf\xc3\xa9\" -> %0\n"), std::string::npos) << text;
  // Same number of lines as the golden text: nothing broke a line.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'),
            std::count(kGolden, kGolden + std::strlen(kGolden), '\n'));
}

TEST(PlanTextTest, AttributesOptionalInputsAndConstants) {
  Plan plan = makePlan();
  RankProgram *r = plan.mutable_programs(0);
  KernelCall *k = r->add_instructions()->mutable_kernel();
  k->set_op("ConstantOfShape");
  k->set_domain("ai.dtc");
  k->add_inputs(0);
  k->add_inputs(-1);
  k->add_outputs(3);
  k->add_outputs(4);
  Attr *a = k->add_attributes();
  a->set_name("f");
  a->set_f(0.1f);
  a = k->add_attributes();
  a->set_name("s");
  a->set_s("say \"hi\"");
  a = k->add_attributes();
  a->set_name("ints");
  a->mutable_ints()->add_values(-1);
  a->mutable_ints()->add_values(3);
  a = k->add_attributes();
  a->set_name("fl");
  a->mutable_floats()->add_values(2.5f);
  a = k->add_attributes();
  a->set_name("ss");
  a->mutable_strings()->add_values("a");
  a->mutable_strings()->add_values("b");
  a = k->add_attributes();
  a->set_name("value");
  a->mutable_t()->set_dtype(1);
  a->mutable_t()->add_shape(1);
  a->mutable_t()->set_data(floatBytes({0}));
  r->add_instructions(); // empty instruction
  // A constant with more than 8 elements prints a hash prefix.
  Buffer *big = addBuffer(r, "big", BUFFER_CONSTANT, 7, {9}, 0, 72);
  big->set_data(std::string(72, '\0'));
  const std::string text = planText(plan);
  EXPECT_NE(text.find("  2: %3, %4 = ai.dtc::ConstantOfShape(%0, _) {f=0.100000001, "
                      "s=\"say \\\"hi\\\"\", ints=[-1, 3], fl=[2.5], ss=[\"a\", \"b\"], "
                      "value=f32[1] [0]}\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  3: <empty>\n"), std::string::npos);
  EXPECT_NE(text.find("  buffer %5 \"big\" constant i64[9] @0+72 data=xxh3:" +
                      checksumHex(std::string(72, '\0')).substr(0, 16) + "\n"),
            std::string::npos)
      << text;
}

TEST(PlanTextTest, InvalidPlansStillPrint) {
  Plan plan = makePlan();
  RankProgram *r = plan.mutable_programs(0);
  r->mutable_buffers(0)->set_dtype(99);
  r->mutable_buffers(0)->set_kind(static_cast<BufferKind>(42));
  r->mutable_buffers(2)->set_data("xyz"); // wrong size: hashed, not decoded
  plan.set_mode(static_cast<Mode>(9));
  const std::string text = planText(plan);
  EXPECT_NE(text.find("plan v3 mode=mode(9) world_size=1\n"), std::string::npos);
  EXPECT_NE(text.find("buffer %0 \"x\" kind(42) dtype(99)[2,4] @0+32\n"), std::string::npos);
  EXPECT_NE(text.find("data=xxh3:" + checksumHex("xyz").substr(0, 16)), std::string::npos);
  plan.mutable_model()->set_checksum_algorithm(static_cast<ChecksumAlgorithm>(7));
  EXPECT_NE(planText(plan).find(" checksum=algorithm(7):06b05ab6733a618578af5f94892f3950 "),
            std::string::npos);
  plan.mutable_model()->clear_checksum();
  plan.mutable_model()->clear_checksum_algorithm();
  EXPECT_NE(planText(plan).find(" checksum=none size=5\n"), std::string::npos);
}

TEST(FingerprintTest, StableForEqualPlans) {
  Plan a = makePlan();
  Plan b = makePlan();
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  EXPECT_EQ(fingerprint(a).size(), 32u);
  // The model's path does not count (the checksum identifies the model); everything else does.
  Plan moved = a;
  moved.mutable_model()->set_path("../elsewhere/model.onnx");
  EXPECT_EQ(fingerprint(moved), fingerprint(a));
  // It is the fingerprint of the file the plan is written as (PlanReadTest.cpp).
  auto bytes = serializePlan(a, "a");
  ASSERT_TRUE(bytes);
  auto file = splitPlan(*bytes, "a");
  ASSERT_TRUE(file);
  EXPECT_EQ(fingerprint(a), fingerprint(*file));
  // Map insertion order does not matter.
  (*a.mutable_bound_dims())["A"] = 1;
  (*a.mutable_bound_dims())["Z"] = 3;
  (*b.mutable_bound_dims())["Z"] = 3;
  (*b.mutable_bound_dims())["A"] = 1;
  EXPECT_EQ(fingerprint(a), fingerprint(b));
}

TEST(FingerprintTest, ChangesWithEveryField) {
  const std::string base = fingerprint(makePlan());
  std::vector<std::function<void(Plan &)>> edits = {
      [](Plan &p) {
        p.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->set_inputs(2, 1);
      },
      [](Plan &p) {
        p.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->set_op("MatMul");
      },
      [](Plan &p) {
        p.mutable_programs(0)
            ->mutable_instructions(0)
            ->mutable_kernel()
            ->mutable_attributes(0)
            ->set_f(1.0000001f);
      },
      [](Plan &p) { p.mutable_programs(0)->mutable_instructions(1)->mutable_copy()->set_dst(3); },
      [](Plan &p) { p.mutable_programs(0)->mutable_buffers(3)->set_offset(128); },
      [](Plan &p) { p.mutable_programs(0)->mutable_buffers(1)->set_source("fc.bias"); },
      [](Plan &p) { (*p.mutable_programs(0)->mutable_buffers(2)->mutable_data())[11] ^= 1; },
      [](Plan &p) { p.mutable_programs(0)->set_arena_bytes(321); },
      [](Plan &p) { p.mutable_model()->set_size_bytes(6); },
      [](Plan &p) { (*p.mutable_bound_dims())["N"] = 3; },
      [](Plan &p) { p.set_mode(MODE_TRAINING); },
  };
  std::set<std::string> seen = {base};
  for (size_t i = 0; i < edits.size(); ++i) {
    Plan p = makePlan();
    edits[i](p);
    EXPECT_TRUE(seen.insert(fingerprint(p)).second) << "edit " << i;
  }
  // A constant with 9 elements: one byte changes the hash prefix.
  Plan p1 = makePlan();
  Plan p2 = makePlan();
  for (Plan *p : {&p1, &p2})
    addBuffer(p->mutable_programs(0), "big", BUFFER_CONSTANT, 2, {9}, 0, 9)->set_data("123456789");
  (*p2.mutable_programs(0)->mutable_buffers(5)->mutable_data())[8] = 'x';
  EXPECT_NE(fingerprint(p1), fingerprint(p2));
}

} // namespace
} // namespace dtc::plan
