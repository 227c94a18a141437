// Sharded checkpoints: shards and manifests round trip bit for bit; the shard checksums, the
// manifest's checksum and its structure (bad JSON, missing keys, wrong types, file names outside
// the folder) are checked; the newest complete checkpoint of a folder is found; leftovers of
// interrupted writes (temporaries, shards without a manifest) are cleaned up.
#include "TrainingTestUtil.h"

#include "runtime/Checkpoint.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace dtc::rt::test {
namespace {

CheckpointMeta sampleMeta(int64_t step = 12) {
  CheckpointMeta m;
  m.step = step;
  m.epoch = 2;
  m.stepInEpoch = 4;
  m.seed = 0xffffffffffffffffULL; // full uint64 range survives JSON
  m.shuffle = false;
  m.samples = 40;
  m.planFingerprint = "abc123";
  m.epochLossSum = 0.1 + 0.2;
  m.epochSteps = 4;
  m.epochCorrect = 30;
  m.epochCounted = 32;
  return m;
}

std::vector<HostArray> stage0() {
  return {f32("w", {2, 2}, {1, 2, 3, 4}), f32("w.momentum", {2, 2}, {0.5f, -0.5f, 0, 1})};
}
std::vector<HostArray> stage1() {
  return {f32("v", {2, 2}, {5, 6, 7, 8}), f32("v.momentum", {2, 2}, {1, 1, 1, 1})};
}

/// Writes a two-shard checkpoint of `meta.step` into `dir` and returns its manifest path.
std::string writeTwoShards(const std::string &dir, const CheckpointMeta &meta) {
  Manifest mf;
  mf.meta = meta;
  for (int p : {1, 0}) { // any order: the manifest sorts them
    Expected<ShardRef> ref = writeShard(dir, meta, p, p == 0 ? stage0() : stage1());
    EXPECT_TRUE(ref.hasValue()) << ref.status().message();
    mf.shards.push_back(*ref);
  }
  EXPECT_TRUE(writeManifest(dir, mf).isOk());
  return (std::filesystem::path(dir) / manifestFileName(meta.step)).string();
}

std::string readText(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeText(const std::string &path, const std::string &text) { std::ofstream(path) << text; }

TEST(CheckpointTest, RoundTrip) {
  TempDir dir;
  EXPECT_EQ(manifestFileName(12), "ckpt-00000012.manifest.json");
  EXPECT_EQ(shardFileName(12, 3), "ckpt-00000012.shard-3.npz");
  const std::string path = writeTwoShards(dir.path.string(), sampleMeta());
  Expected<Manifest> mf = readManifest(path, std::string("abc123"));
  ASSERT_TRUE(mf.hasValue()) << mf.status().message();
  const CheckpointMeta &m = mf->meta;
  EXPECT_EQ(m.step, 12);
  EXPECT_EQ(m.epoch, 2);
  EXPECT_EQ(m.stepInEpoch, 4);
  EXPECT_EQ(m.seed, 0xffffffffffffffffULL);
  EXPECT_FALSE(m.shuffle);
  EXPECT_EQ(m.samples, 40);
  EXPECT_EQ(m.epochLossSum, 0.1 + 0.2); // bit-exact double
  EXPECT_EQ(m.epochCorrect, 30);
  EXPECT_EQ(m.epochCounted, 32);
  ASSERT_EQ(mf->shards.size(), 2u);
  EXPECT_EQ(mf->shards[0].program, 0);
  EXPECT_EQ(mf->shards[0].file, "ckpt-00000012.shard-0.npz");
  EXPECT_EQ(mf->shards[1].file, "ckpt-00000012.shard-1.npz");
  EXPECT_EQ(mf->shards[1].bytes, std::filesystem::file_size(dir / "ckpt-00000012.shard-1.npz"));
  Expected<std::vector<HostArray>> s1 = readShard(*mf, 1);
  ASSERT_TRUE(s1.hasValue()) << s1.status().message();
  ASSERT_EQ(s1->size(), 2u); // "__meta__" is not returned
  EXPECT_EQ((*s1)[0].name, "v");
  EXPECT_EQ(values((*s1)[0]), (std::vector<float>{5, 6, 7, 8}));
  // Each shard holds its own program's arrays only.
  Expected<std::vector<HostArray>> s0 = readShard(*mf, 0);
  ASSERT_TRUE(s0.hasValue()) << s0.status().message();
  EXPECT_EQ((*s0)[1].name, "w.momentum");
  EXPECT_EQ(values((*s0)[1]), (std::vector<float>{0.5f, -0.5f, 0, 1}));
  EXPECT_EQ(readShard(*mf, 2).status().message(),
            path + ": names no shard of program 2 (the plan's program 2 has no saved state)");
  // Nothing but the three files.
  int files = 0;
  for ([[maybe_unused]] const auto &e : std::filesystem::directory_iterator(dir.path))
    ++files;
  EXPECT_EQ(files, 3);
  EXPECT_EQ(readManifest(path, std::string("other-plan-fingerprint")).status().message(),
            path + ": checkpoint of another plan (fingerprint abc123..., this plan's is "
                   "other-plan-finge...)");
}

TEST(CheckpointTest, ShardChecksums) {
  TempDir dir;
  const std::string path = writeTwoShards(dir.path.string(), sampleMeta());
  const std::string shard0 = dir / "ckpt-00000012.shard-0.npz";
  const std::string shard1 = dir / "ckpt-00000012.shard-1.npz";
  Manifest mf = *readManifest(path, std::nullopt);
  // One parameter byte changed, the shard's meta (and so its stored checksum) and size kept.
  std::vector<HostArray> arrays = *readArrays(shard0);
  for (HostArray &a : arrays)
    if (a.name == "w")
      a.bytes[1] ^= 0x40;
  ASSERT_TRUE(writeNpz(shard0, arrays).isOk());
  Status s = readShard(mf, 0).status();
  EXPECT_EQ(s.message().rfind(shard0 +
                                  ": corrupt checkpoint shard: its SHA-256 checksum does "
                                  "not match its contents (shard of program 0 of checkpoint " +
                                  path + ", step 12)",
                              0),
            0u)
      << s.message();
  // A whole shard whose checksum is not the one the manifest records (another run's step 12).
  CheckpointMeta other = sampleMeta();
  std::vector<HostArray> changed = stage0();
  changed[0].bytes[0] ^= 1;
  ASSERT_TRUE(writeShard(dir.path.string(), other, 0, changed).hasValue());
  s = readShard(mf, 0).status();
  EXPECT_NE(s.message().find("does not match the one its manifest records"), std::string::npos)
      << s.message();
  // The shard of another program in its place (same size, another program recorded).
  std::filesystem::copy_file(shard1, shard0, std::filesystem::copy_options::overwrite_existing);
  mf.shards[0].bytes = mf.shards[1].bytes;
  s = readShard(mf, 0).status();
  EXPECT_NE(s.message().find("corrupt checkpoint shard: it holds step 12 of program 1"),
            std::string::npos)
      << s.message();
  // Truncated: the size the manifest records.
  std::filesystem::resize_file(shard1, mf.shards[1].bytes / 2);
  s = readShard(mf, 1).status();
  EXPECT_EQ(s.message().rfind(
                shard1 + ": corrupt checkpoint shard: " + std::to_string(mf.shards[1].bytes / 2) +
                    " bytes, the manifest records " + std::to_string(mf.shards[1].bytes),
                0),
            0u)
      << s.message();
  // Missing, and an .npz that is not a shard.
  std::filesystem::remove(shard1);
  s = readShard(mf, 1).status();
  EXPECT_EQ(s.message().rfind(shard1 + ": is missing (shard of program 1 of checkpoint " + path, 0),
            0u)
      << s.message();
  ASSERT_TRUE(writeNpz(shard1, {f32("v", {1}, {1})}).isOk());
  mf.shards[1].bytes = std::filesystem::file_size(shard1);
  EXPECT_NE(readShard(mf, 1).status().message().find("not a dtc checkpoint shard (no '__meta__'"),
            std::string::npos);
  // A FIFO in a shard's place is refused, never opened blocking.
  std::filesystem::remove(shard1);
  ASSERT_EQ(mkfifo(shard1.c_str(), 0600), 0);
  EXPECT_NE(readShard(mf, 1).status().message().find("is not a regular file"), std::string::npos);
}

TEST(CheckpointTest, ManifestRefusals) {
  TempDir dir;
  const std::string path = writeTwoShards(dir.path.string(), sampleMeta());
  const nlohmann::json good = nlohmann::json::parse(readText(path));
  auto parse = [&](const nlohmann::json &j) { return parseManifest(j.dump(1), "m.json").status(); };
  auto refused = [&](const nlohmann::json &j, const std::string &needle) {
    Status s = parse(j);
    EXPECT_FALSE(s.isOk()) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_EQ(s.message().rfind("m.json: ", 0), 0u) << s.message();
  };
  ASSERT_TRUE(parse(good).isOk()) << parse(good).message();
  EXPECT_EQ(parseManifest("{\"format\": \"dtc-checkpoint\", ", "m.json").status().message(),
            "m.json: corrupt checkpoint manifest: not valid JSON");
  EXPECT_EQ(parseManifest("[1, 2]", "m.json").status().message(),
            "m.json: not a dtc checkpoint manifest (no \"format\": \"dtc-checkpoint\")");
  for (const char *key : {"version", "step", "epoch", "seed", "plan_fingerprint", "epoch_loss_sum",
                          "shards", "sha256"}) {
    nlohmann::json j = good;
    j.erase(key);
    refused(j, std::string("missing key '") + key + "'");
  }
  nlohmann::json j = good;
  j["version"] = 1;
  refused(j, "checkpoint format version 1, this dtc-run reads version 2");
  j = good;
  j["step"] = "12";
  refused(j, "key 'step' is not an integer");
  j = good;
  j["shuffle"] = 0;
  refused(j, "key 'shuffle' is not true or false");
  j = good;
  j["seed"] = -1;
  refused(j, "key 'seed' is not a non-negative integer");
  j = good;
  j["shards"] = nlohmann::json::array();
  refused(j, "key 'shards' is not a non-empty list");
  j = good;
  j["shards"][1].erase("sha256");
  refused(j, "shard 1: missing key 'sha256'");
  j = good;
  j["shards"][1]["program"] = 0;
  refused(j, "shard 1: program 0 is listed twice");
  j = good;
  j["shards"][0]["program"] = -1;
  refused(j, "shard 0: program -1 out of range");
  j = good;
  j["shards"][0]["sha256"] = "ABC";
  refused(j, "shard 0: key 'sha256' is not 64 lowercase hex digits");
  // File names outside the folder, with "..", or not a shard's.
  for (const char *file : {"../ckpt-00000012.shard-0.npz", "/etc/passwd",
                           "sub/ckpt-00000012.shard-0.npz", "..\\ckpt-00000012.shard-0.npz"}) {
    j = good;
    j["shards"][0]["file"] = file;
    refused(j, "shard 0: file '" + std::string(file) +
                   "' is a path, not a file name in the "
                   "checkpoint folder");
  }
  j = good;
  j["shards"][0]["file"] = "ckpt-00000012.shard-0.npz..";
  refused(j, "contains '..'");
  j = good;
  j["shards"][0]["file"] = "notes.txt";
  refused(j, "is not a shard file name (ckpt-<step>.shard-<program>.npz)");
  // The manifest's own checksum: a changed step or shard checksum is caught.
  j = good;
  j["step"] = 13;
  refused(j, "corrupt checkpoint manifest: its SHA-256 checksum does not match its contents");
  j = good;
  j["shards"][0]["sha256"] = std::string(64, 'a');
  refused(j, "corrupt checkpoint manifest: its SHA-256 checksum does not match its contents");
  // readManifest on a file: the same, naming the file.
  writeText(path, "not json");
  EXPECT_EQ(readManifest(path, std::nullopt).status().message(),
            path + ": corrupt checkpoint manifest: not valid JSON");
}

TEST(CheckpointTest, NewestCheckpoint) {
  TempDir dir;
  const std::string d = dir.path.string();
  EXPECT_EQ(newestCheckpoint(dir / "nope").status().message(),
            dir / "nope" + ": checkpoint folder does not exist (nothing to resume)");
  EXPECT_EQ(newestCheckpoint(d).status().message(),
            d + ": no checkpoint (ckpt-<step>.manifest.json) to resume from");
  writeText(dir / "ckpt-00000005.npz", "old");
  EXPECT_NE(newestCheckpoint(d).status().message().find(
                "ckpt-00000005.npz is a one-file checkpoint of an earlier dtc-run"),
            std::string::npos);
  for (int64_t step : {9, 100, 20})
    writeTwoShards(d, sampleMeta(step));
  // Shards of a later step without a manifest (a write cut short) and temporaries are ignored.
  ASSERT_TRUE(writeShard(d, sampleMeta(200), 0, stage0()).hasValue());
  writeText(dir / "ckpt-00000300.manifest.json.tmp.Ab3xYz", "partial");
  writeText(dir / "notes.txt", "x");
  EXPECT_EQ(*newestCheckpoint(d), dir / "ckpt-00000100.manifest.json");
  // Chosen by the recorded step: a copy named like a later checkpoint holding step 9 loses.
  std::filesystem::copy_file(dir / "ckpt-00000009.manifest.json", dir / "ckpt-999.manifest.json");
  EXPECT_EQ(*newestCheckpoint(d), dir / "ckpt-00000100.manifest.json");
  // An equal copy of the newest one: the higher name wins.
  std::filesystem::copy_file(dir / "ckpt-00000100.manifest.json", dir / "ckpt-101.manifest.json");
  EXPECT_EQ(*newestCheckpoint(d), dir / "ckpt-101.manifest.json");
  // Two manifests recording step 100 with different contents: refused.
  Manifest mf = *readManifest(dir / "ckpt-00000100.manifest.json", std::nullopt);
  mf.meta.epochLossSum = 1;
  writeText(dir / "ckpt-101.manifest.json", serializeManifest(mf));
  Expected<std::string> tie = newestCheckpoint(d);
  ASSERT_FALSE(tie);
  EXPECT_NE(tie.status().message().find("both record step 100 with different contents"),
            std::string::npos)
      << tie.status().message();
  std::filesystem::remove(dir / "ckpt-101.manifest.json");
  // A file named like a manifest that is not one, and a FIFO named like one.
  writeText(dir / "ckpt-3.manifest.json", "not json");
  EXPECT_EQ(newestCheckpoint(d).status().message(),
            dir / "ckpt-3.manifest.json" + ": corrupt checkpoint manifest: not valid JSON");
  std::filesystem::remove(dir / "ckpt-3.manifest.json");
  ASSERT_EQ(mkfifo((dir / "ckpt-4.manifest.json").c_str(), 0600), 0);
  EXPECT_NE(newestCheckpoint(d).status().message().find(
                "is named like a checkpoint manifest but is not a regular file"),
            std::string::npos);
}

TEST(CheckpointTest, RemoveStaleFiles) {
  TempDir dir;
  const std::string d = dir.path.string();
  EXPECT_TRUE(removeStaleCheckpointFiles(dir / "missing").isOk());
  writeTwoShards(d, sampleMeta(4));
  ASSERT_TRUE(writeShard(d, sampleMeta(6), 0, stage0()).hasValue()); // no manifest
  ASSERT_TRUE(writeShard(d, sampleMeta(6), 1, stage1()).hasValue());
  for (const char *name :
       {"ckpt-00000006.shard-1.npz.tmp", "ckpt-00000006.shard-1.npz.tmp.Ab3xYz",
        "ckpt-00000006.manifest.json.tmp.q1W2e3", "ckpt-00000007.npz.tmp", "notes.tmp",
        "ckpt-00000007.npz.tmp.toolongname", "ckpt-00000006.shard-1.npz.bak"})
    writeText(dir / name, "x");
  // An unreadable manifest: shards are left alone (newestCheckpoint names the problem).
  writeText(dir / "ckpt-00000005.manifest.json", "torn");
  ASSERT_TRUE(removeStaleCheckpointFiles(d).isOk());
  EXPECT_TRUE(std::filesystem::exists(dir / "ckpt-00000006.shard-0.npz"));
  EXPECT_FALSE(std::filesystem::exists(dir / "ckpt-00000006.shard-1.npz.tmp"));
  EXPECT_FALSE(std::filesystem::exists(dir / "ckpt-00000006.manifest.json.tmp.q1W2e3"));
  EXPECT_FALSE(std::filesystem::exists(dir / "ckpt-00000007.npz.tmp"));
  std::filesystem::remove(dir / "ckpt-00000005.manifest.json");
  ASSERT_TRUE(removeStaleCheckpointFiles(d).isOk());
  std::vector<std::string> left;
  for (const auto &e : std::filesystem::directory_iterator(dir.path))
    left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left,
            (std::vector<std::string>{"ckpt-00000004.manifest.json", "ckpt-00000004.shard-0.npz",
                                      "ckpt-00000004.shard-1.npz", "ckpt-00000006.shard-1.npz.bak",
                                      "ckpt-00000007.npz.tmp.toolongname", "notes.tmp"}));
  EXPECT_TRUE(readShard(*readManifest(dir / "ckpt-00000004.manifest.json", std::nullopt), 1));
}

} // namespace
} // namespace dtc::rt::test
