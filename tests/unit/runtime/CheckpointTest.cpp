// Checkpoint files: round trip, the checksum catching changed bytes, fingerprint mismatch, and
// finding the newest checkpoint of a folder.
#include "TrainingTestUtil.h"

#include "runtime/Checkpoint.h"

#include <gtest/gtest.h>

#include <fstream>

namespace dtc::rt::test {
namespace {

Checkpoint sample() {
  Checkpoint c;
  c.meta.step = 12;
  c.meta.epoch = 2;
  c.meta.stepInEpoch = 4;
  c.meta.seed = 0xffffffffffffffffULL; // full uint64 range survives JSON
  c.meta.shuffle = false;
  c.meta.samples = 40;
  c.meta.planFingerprint = "abc123";
  c.meta.epochLossSum = 0.1 + 0.2;
  c.meta.epochSteps = 4;
  c.meta.epochCorrect = 30;
  c.meta.epochCounted = 32;
  c.arrays = {f32("w", {2, 2}, {1, 2, 3, 4}), f32("w.momentum", {2}, {0.5f, -0.5f})};
  return c;
}

TEST(CheckpointTest, RoundTrip) {
  TempDir dir;
  const std::string path = checkpointPath(dir.path.string(), 12);
  EXPECT_EQ(path, dir / "ckpt-00000012.npz");
  ASSERT_TRUE(writeCheckpoint(path, sample()).isOk());
  auto c = readCheckpoint(path, std::string("abc123"));
  ASSERT_TRUE(c.hasValue()) << c.status().message();
  EXPECT_EQ(c->meta.step, 12);
  EXPECT_EQ(c->meta.epoch, 2);
  EXPECT_EQ(c->meta.stepInEpoch, 4);
  EXPECT_EQ(c->meta.seed, 0xffffffffffffffffULL);
  EXPECT_FALSE(c->meta.shuffle);
  EXPECT_EQ(c->meta.samples, 40);
  EXPECT_EQ(c->meta.epochLossSum, 0.1 + 0.2); // bit-exact double
  EXPECT_EQ(c->meta.epochCorrect, 30);
  EXPECT_EQ(c->meta.epochCounted, 32);
  ASSERT_EQ(c->arrays.size(), 2u);
  EXPECT_EQ(values(c->arrays[0]), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(c->arrays[1].name, "w.momentum");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(CheckpointTest, ChecksumAndFingerprint) {
  TempDir dir;
  const std::string path = dir / "ckpt-00000012.npz";
  ASSERT_TRUE(writeCheckpoint(path, sample()).isOk());
  EXPECT_EQ(readCheckpoint(path, std::string("other-plan-fingerprint")).status().message(),
            path + ": checkpoint of another plan (fingerprint abc123..., this plan's is "
                   "other-plan-finge...)");
  // Change one parameter byte but keep the meta (and so the stored checksum).
  auto arrays = *readArrays(path);
  arrays[0].bytes[1] ^= 0x40;
  ASSERT_TRUE(writeNpz(path, arrays).isOk());
  EXPECT_EQ(readCheckpoint(path, std::nullopt).status().message(),
            path + ": corrupt checkpoint: its SHA-256 checksum does not match its contents "
                   "(delete it to resume from an older checkpoint)");
  // A changed meta field (the step) is caught too.
  ASSERT_TRUE(writeCheckpoint(path, sample()).isOk());
  arrays = *readArrays(path);
  for (HostArray &a : arrays)
    if (a.name == "__meta__") {
      size_t at = a.bytes.find("\"step\": 12");
      ASSERT_NE(at, std::string::npos) << a.bytes;
      a.bytes.replace(at, 10, "\"step\": 13");
    }
  ASSERT_TRUE(writeNpz(path, arrays).isOk());
  EXPECT_NE(readCheckpoint(path, std::nullopt).status().message().find("corrupt checkpoint"),
            std::string::npos);
  // Truncated file, and an .npz that is not a checkpoint.
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  EXPECT_FALSE(readCheckpoint(path, std::nullopt).hasValue());
  ASSERT_TRUE(writeNpz(path, {f32("w", {1}, {1})}).isOk());
  EXPECT_EQ(readCheckpoint(path, std::nullopt).status().message(),
            path + ": not a dtc checkpoint (no '__meta__' array)");
}

TEST(CheckpointTest, NewestCheckpoint) {
  TempDir dir;
  EXPECT_EQ(newestCheckpoint(dir / "nope").status().message(),
            dir / "nope" + ": checkpoint folder does not exist (nothing to resume)");
  EXPECT_EQ(newestCheckpoint(dir.path.string()).status().message(),
            dir.path.string() + ": no checkpoint (ckpt-<step>.npz) to resume from");
  for (int64_t step : {9, 100, 20})
    ASSERT_TRUE(writeCheckpoint(checkpointPath(dir.path.string(), step), sample()).isOk());
  std::ofstream(dir / "ckpt-00000200.npz.tmp") << "partial";
  std::ofstream(dir / "notes.txt") << "x";
  EXPECT_EQ(*newestCheckpoint(dir.path.string()), dir / "ckpt-00000100.npz");
}

TEST(CheckpointTest, NewestCheckpointByRecordedStep) {
  TempDir dir;
  auto at = [&](int64_t step) {
    Checkpoint c = sample();
    c.meta.step = step;
    return c;
  };
  ASSERT_TRUE(writeCheckpoint(checkpointPath(dir.path.string(), 20), at(20)).isOk());
  // A copy named like a later checkpoint that holds step 5 does not win.
  ASSERT_TRUE(writeCheckpoint(dir / "ckpt-99.npz", at(5)).isOk());
  EXPECT_EQ(*newestCheckpoint(dir.path.string()), checkpointPath(dir.path.string(), 20));
  // Two checkpoints recording step 20 with different contents: refused.
  Checkpoint other = at(20);
  other.arrays[0] = f32("w", {2, 2}, {9, 9, 9, 9});
  ASSERT_TRUE(writeCheckpoint(dir / "ckpt-7.npz", other).isOk());
  Expected<std::string> tie = newestCheckpoint(dir.path.string());
  ASSERT_FALSE(tie);
  EXPECT_NE(tie.status().message().find("both record step 20 with different contents"),
            std::string::npos)
      << tie.status().message();
  // A file named like a checkpoint that is not one.
  std::filesystem::remove(dir / "ckpt-7.npz");
  std::ofstream(dir / "ckpt-3.npz") << "not a zip";
  EXPECT_NE(newestCheckpoint(dir.path.string()).status().message().find(
                "is named like a checkpoint but its meta data cannot be read"),
            std::string::npos);
}

} // namespace
} // namespace dtc::rt::test
