// Checksums of the files a plan names (XXH3-128 from xxHash, whole-file or chunked on several
// threads) and of byte strings, and SHA-256 (llvm/Support/SHA256.h) for checkpoints.
#include "compiler/plan/Plan.h"

#include "compiler/plan/Parallel.h"
#include "compiler/support/FileIO.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace dtc::plan {
namespace {

/// xxHash's canonical 16 bytes of a 128-bit hash, as lowercase hex.
std::string canonicalHex(XXH128_hash_t hash) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, hash);
  return llvm::toHex(llvm::ArrayRef<uint8_t>(canonical.digest, sizeof canonical.digest),
                     /*LowerCase=*/true);
}

struct StateFree {
  void operator()(XXH3_state_t *s) const { XXH3_freeState(s); }
};
using State = std::unique_ptr<XXH3_state_t, StateFree>;

Expected<State> newState(const std::string &path) {
  State state(XXH3_createState());
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK)
    return Status::error(path, "cannot checksum: out of memory");
  return state;
}

Status cancelled(const std::string &path) { return Status::error(path, "checksum cancelled"); }

/// CHECKSUM_XXH3_128: the whole file through one streaming state.
Expected<std::string> wholeFileChecksum(const std::string &path, const std::string &what,
                                        uint64_t maxBytes, const std::atomic<bool> *cancel) {
  DTC_ASSIGN_OR_RETURN(State state, newState(path));
  DTC_RETURN_IF_ERROR(streamInputFile(path, what, maxBytes, [&](const char *data, size_t n) {
    if (cancel && cancel->load(std::memory_order_relaxed))
      return cancelled(path);
    XXH3_128bits_update(state.get(), data, n);
    return Status::ok();
  }));
  return canonicalHex(XXH3_128bits_digest(state.get()));
}

/// XXH3-128 of kChecksumChunkBytes zero bytes: the digest of every chunk that is wholly a hole.
const XXH128_canonical_t &zeroChunkDigest() {
  static const XXH128_canonical_t digest = [] {
    State state(XXH3_createState());
    XXH3_128bits_reset(state.get());
    static const char zeros[1 << 20] = {};
    for (uint64_t done = 0; done < kChecksumChunkBytes; done += sizeof zeros)
      XXH3_128bits_update(state.get(), zeros, sizeof zeros);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(state.get()));
    return c;
  }();
  return digest;
}

/// CHECKSUM_XXH3_128_CHUNKED: chunks hashed on up to `threads` threads, then their digests.
Expected<std::string> chunkedChecksum(const std::string &path, const std::string &what,
                                      uint64_t maxBytes, const std::atomic<bool> *cancel) {
  DTC_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path, what, maxBytes));
  const uint64_t size = file.size();
  const size_t chunks = static_cast<size_t>((size + kChecksumChunkBytes - 1) / kChecksumChunkBytes);
  std::vector<XXH128_canonical_t> digests(chunks);
  std::atomic<bool> failed{false};
  // Chunks stopped because another failed (their error says only "cancelled").
  std::vector<char> stopped(chunks, 0);
  auto hashChunk = [&](size_t i) -> Status {
    const uint64_t offset = i * kChecksumChunkBytes;
    const uint64_t length = std::min<uint64_t>(kChecksumChunkBytes, size - offset);
    if (length == kChecksumChunkBytes && file.isHole(offset, length)) {
      digests[i] = zeroChunkDigest();
      return Status::ok();
    }
    DTC_ASSIGN_OR_RETURN(State state, newState(path));
    DTC_RETURN_IF_ERROR(file.streamRange(offset, length, [&](const char *data, size_t n) {
      if (cancel && cancel->load(std::memory_order_relaxed))
        return cancelled(path);
      if (failed.load(std::memory_order_relaxed)) {
        stopped[i] = 1;
        return cancelled(path);
      }
      XXH3_128bits_update(state.get(), data, n);
      return Status::ok();
    }));
    XXH128_canonicalFromHash(&digests[i], XXH3_128bits_digest(state.get()));
    return Status::ok();
  };
  const unsigned threads = static_cast<unsigned>(
      std::min<size_t>({std::max(1u, std::thread::hardware_concurrency()), kMaxChecksumThreads}));
  // A failing chunk stops the others at their next block. The error reported is that of the
  // lowest chunk that failed on its own (a stopped chunk's says only "cancelled").
  std::vector<Status> errors(chunks);
  Status s = parallelFor(chunks, threads, [&](size_t i) {
    Status c = hashChunk(i);
    if (!c.isOk()) {
      errors[i] = c;
      failed.store(true);
    }
    return c;
  });
  if (!s.isOk()) {
    for (size_t i = 0; i < chunks; ++i)
      if (!errors[i].isOk() && !stopped[i])
        return errors[i];
    return s;
  }
  DTC_RETURN_IF_ERROR(file.checkUnchanged());
  DTC_ASSIGN_OR_RETURN(State root, newState(path));
  if (!digests.empty())
    XXH3_128bits_update(root.get(), digests.data(), digests.size() * sizeof digests[0]);
  uint8_t sizeBytes[8];
  for (int b = 0; b < 8; ++b)
    sizeBytes[b] = static_cast<uint8_t>(size >> (8 * b));
  XXH3_128bits_update(root.get(), sizeBytes, sizeof sizeBytes);
  return canonicalHex(XXH3_128bits_digest(root.get()));
}

} // namespace

std::string checksumAlgorithmName(ChecksumAlgorithm algorithm) {
  switch (algorithm) {
  case CHECKSUM_UNSPECIFIED:
    return "none";
  case CHECKSUM_XXH3_128:
    return "xxh3-128";
  case CHECKSUM_XXH3_128_CHUNKED:
    return "xxh3-128-chunked";
  default:
    return "algorithm(" + std::to_string(static_cast<int>(algorithm)) + ")";
  }
}

bool isKnownChecksumAlgorithm(ChecksumAlgorithm algorithm) {
  return algorithm == CHECKSUM_XXH3_128 || algorithm == CHECKSUM_XXH3_128_CHUNKED;
}

Expected<std::string> checksumFile(const std::string &path, const std::string &what,
                                   uint64_t maxBytes, ChecksumAlgorithm algorithm,
                                   const std::atomic<bool> *cancel) {
  switch (algorithm) {
  case CHECKSUM_XXH3_128:
    return wholeFileChecksum(path, what, maxBytes, cancel);
  case CHECKSUM_XXH3_128_CHUNKED:
    return chunkedChecksum(path, what, maxBytes, cancel);
  default:
    return Status::error(path, "cannot checksum: algorithm " + checksumAlgorithmName(algorithm) +
                                   " is not one this dtc knows");
  }
}

std::string checksumHex(const std::string &bytes) {
  return canonicalHex(XXH3_128bits(bytes.data(), bytes.size()));
}

std::string sha256Hex(const std::string &bytes) {
  llvm::SHA256 hasher;
  hasher.update(llvm::StringRef(bytes));
  return llvm::toHex(hasher.final(), /*LowerCase=*/true);
}

} // namespace dtc::plan
