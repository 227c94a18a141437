// Tests of the model checksums (compiler/plan/Plan.h: checksumFile, checksumHex, sha256Hex) and
// of ChecksumPrefetch, which computes them on a background thread during a compile.
#include "compiler/plan/ChecksumPrefetch.h"
#include "compiler/plan/Plan.h"
#include "tests/unit/plan/TempDirTest.h"

#include <gtest/gtest.h>
#include <llvm/ADT/StringExtras.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace dtc::plan {
namespace {

namespace fs = std::filesystem;

constexpr const char *kAbcSha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
/// XXH3-128 of "abc" and of no bytes (seed 0, canonical order: xxHash's sanity test vectors,
/// the same as `xxhsum -H2` prints).
constexpr const char *kAbcXxh = "06b05ab6733a618578af5f94892f3950";
constexpr const char *kEmptyXxh = "99aa06d3014798d86001c324468d497f";

/// CHECKSUM_XXH3_128_CHUNKED of `bytes` as plan.proto defines it, computed here from whole-string
/// XXH3-128s: each 64 MiB chunk's canonical digest, then the size as 8 little-endian bytes.
std::string chunkedReference(const std::string &bytes) {
  std::string digests;
  for (size_t off = 0; off < bytes.size(); off += kChecksumChunkBytes)
    digests += llvm::fromHex(checksumHex(bytes.substr(off, kChecksumChunkBytes)));
  for (int b = 0; b < 8; ++b)
    digests += static_cast<char>(static_cast<uint64_t>(bytes.size()) >> (8 * b));
  return checksumHex(digests);
}

/// A fresh temporary folder per test, removed afterwards.
class ChecksumFileTest : public test::TempDirTest {};

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(sha256Hex("abc"), kAbcSha);
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(ChecksumTest, KnownVectors) {
  EXPECT_EQ(checksumHex("abc"), kAbcXxh);
  EXPECT_EQ(checksumHex(""), kEmptyXxh);
  EXPECT_EQ(checksumAlgorithmName(CHECKSUM_XXH3_128), "xxh3-128");
  EXPECT_EQ(checksumAlgorithmName(CHECKSUM_XXH3_128_CHUNKED), "xxh3-128-chunked");
  EXPECT_EQ(checksumAlgorithmName(CHECKSUM_UNSPECIFIED), "none");
  EXPECT_EQ(checksumAlgorithmName(static_cast<ChecksumAlgorithm>(7)), "algorithm(7)");
}

TEST_F(ChecksumFileTest, ChecksumFileMatchesBytesAcrossChunks) {
  // 3 MiB + 7 bytes: spans several 1 MiB read chunks and a partial one.
  std::string bytes((3u << 20) + 7, '\0');
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>((i * 131) ^ (i >> 9));
  writeBytes(path("big.bin"), bytes);
  writeBytes(path("abc.txt"), "abc");
  writeBytes(path("empty.bin"), "");
  auto big = checksumFile(path("big.bin"), "", kMaxExternalDataBytes, CHECKSUM_XXH3_128);
  ASSERT_TRUE(big) << big.status().message();
  EXPECT_EQ(*big, checksumHex(bytes));
  EXPECT_NE(*big, checksumHex(bytes.substr(0, bytes.size() - 1)));
  auto abc = checksumFile(path("abc.txt"), "", kMaxExternalDataBytes, CHECKSUM_XXH3_128);
  ASSERT_TRUE(abc);
  EXPECT_EQ(*abc, kAbcXxh);
  auto empty = checksumFile(path("empty.bin"), "", kMaxExternalDataBytes, CHECKSUM_XXH3_128);
  ASSERT_TRUE(empty);
  EXPECT_EQ(*empty, kEmptyXxh);
  // The default, chunked form: one chunk here, so the digest of the digest and the size.
  EXPECT_EQ(*checksumFile(path("big.bin")), chunkedReference(bytes));
  EXPECT_EQ(*checksumFile(path("abc.txt")), chunkedReference("abc"));
  EXPECT_EQ(*checksumFile(path("empty.bin")), chunkedReference(""));
  EXPECT_NE(*checksumFile(path("abc.txt")), kAbcXxh);
}

// Several 64 MiB chunks, hashed on several threads, give the definition's digest whatever the
// order the threads finish in; one changed byte in a middle chunk changes it; holes (whole
// chunks, part of a chunk, the tail) hash as the zeros they read as.
TEST_F(ChecksumFileTest, ChunkedChecksumSpansChunksAndHoles) {
  const size_t chunk = static_cast<size_t>(kChecksumChunkBytes);
  std::string bytes(2 * chunk + 5, '\0');
  for (size_t i = 0; i < bytes.size(); i += 4093)
    bytes[i] = static_cast<char>(i * 131 + 7);
  writeBytes(path("dense.bin"), bytes);
  auto dense = checksumFile(path("dense.bin"));
  ASSERT_TRUE(dense) << dense.status().message();
  EXPECT_EQ(*dense, chunkedReference(bytes));
  std::string changed = bytes;
  changed[chunk + 100] ^= 1;
  writeBytes(path("changed.bin"), changed);
  EXPECT_NE(*checksumFile(path("changed.bin")), *dense);

  // Sparse: chunk 0 a hole, data in the middle of chunk 1 only, chunk 2 (5 bytes) a hole, and
  // chunk 3 (a whole chunk) a hole up to the end of the file.
  std::string sparseBytes(4 * chunk, '\0');
  const std::string data(3u << 20, 'd');
  sparseBytes.replace(chunk + (1u << 20), data.size(), data);
  {
    std::ofstream f(path("sparse.bin"), std::ios::binary);
    f.seekp(static_cast<std::streamoff>(chunk + (1u << 20)));
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  fs::resize_file(path("sparse.bin"), sparseBytes.size());
  auto sparse = checksumFile(path("sparse.bin"));
  ASSERT_TRUE(sparse) << sparse.status().message();
  EXPECT_EQ(*sparse, chunkedReference(sparseBytes));
  auto flat = checksumFile(path("sparse.bin"), "", kMaxExternalDataBytes, CHECKSUM_XXH3_128);
  ASSERT_TRUE(flat);
  EXPECT_EQ(*flat, checksumHex(sparseBytes));
}

TEST_F(ChecksumFileTest, ChecksumFileErrorsNameTheFile) {
  auto missing = checksumFile(path("missing.onnx"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().message(),
            path("missing.onnx") + ": cannot open: No such file or directory");
  auto folder = checksumFile(dir_.string());
  ASSERT_FALSE(folder);
  EXPECT_EQ(folder.status().message(), dir_.string() + ": is a directory, not a file");
}

// A sparse file hashes as its bytes (its holes as zeros), so a plan's checksum does not depend
// on how the weights file was written.
TEST_F(ChecksumFileTest, SparseFileHashesAsItsBytes) {
  const std::string dense(4u << 20, '\0');
  writeBytes(path("dense.bin"), dense);
  std::ofstream(path("sparse.bin")).close();
  fs::resize_file(path("sparse.bin"), dense.size());
  auto sparse = checksumFile(path("sparse.bin"));
  ASSERT_TRUE(sparse) << sparse.status().message();
  EXPECT_EQ(*sparse, chunkedReference(dense));
  EXPECT_EQ(*sparse, *checksumFile(path("dense.bin")));
}

// The background results are checksumFile's, errors included; a file not on the list is hashed
// on the caller's thread; a prefetch destroyed before anyone asks stops without waiting.
TEST_F(ChecksumFileTest, PrefetchGivesChecksumFilesResults) {
  writeBytes(path("abc.txt"), "abc");
  writeBytes(path("empty.bin"), "");
  writeBytes(path("big.bin"), std::string(3u << 20, 'x'));
  ChecksumPrefetch prefetch({{path("abc.txt"), "the model", 100},
                             {path("missing.bin"), "the model's external data", 100},
                             {path("big.bin"), "the model's external data", 10}});
  auto abc = prefetch.get(path("abc.txt"), "the model", 100);
  ASSERT_TRUE(abc);
  EXPECT_EQ(*abc, chunkedReference("abc"));
  auto missing = prefetch.get(path("missing.bin"), "the model's external data", 100);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().message(),
            path("missing.bin") + ": cannot open: No such file or directory");
  auto big = prefetch.get(path("big.bin"), "the model's external data", 10);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.status().message(), path("big.bin") + ": the model's external data is " +
                                        std::to_string(3u << 20) +
                                        " bytes, over the 10 byte limit");
  auto empty = prefetch.get(path("empty.bin"), "", 100); // not on the list
  ASSERT_TRUE(empty);
  EXPECT_EQ(*empty, chunkedReference(""));
  { ChecksumPrefetch unused({{path("big.bin"), "", uint64_t{1} << 30}}); }
}

} // namespace
} // namespace dtc::plan
