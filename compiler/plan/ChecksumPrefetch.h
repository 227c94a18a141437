// Model checksums computed on a background thread while the rest of the compile runs: hashing a
// large model's external data (GPT-2-XL: 5.8 GiB) is I/O and hash bound and needs nothing the
// passes or lowering produce, so dtc-compile starts it right after import.
#pragma once

#include "compiler/support/Status.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dtc::plan {

/// Checksums (checksumFile by kChecksumAlgorithm, lowercase hex) of a list of files, hashed in list order
/// on one thread started by the constructor. get() waits for a listed file's result; a file not
/// on the list is hashed on the caller's thread. The destructor stops the thread at its next
/// 1 MiB chunk (an early compile error does not wait for gigabytes of hashing) and joins it.
/// A file changed between the prefetch and the plan's write is not noticed here, as with any
/// checksum taken before the write; dtc-run checks the files again when it loads them.
class ChecksumPrefetch {
public:
  struct File {
    std::string path;
    /// Names the file in errors ("the model's external data").
    std::string what;
    uint64_t maxBytes = 0;
  };

  explicit ChecksumPrefetch(std::vector<File> files);
  ~ChecksumPrefetch();
  ChecksumPrefetch(const ChecksumPrefetch &) = delete;
  ChecksumPrefetch &operator=(const ChecksumPrefetch &) = delete;

  /// The checksum of `path` (or checksumFile's error for it): the background result when
  /// `path` is on the list (compared as given), else computed now with `what` and `maxBytes`.
  Expected<std::string> get(const std::string &path, const std::string &what, uint64_t maxBytes);

private:
  void run();

  std::vector<File> files_;
  std::vector<std::optional<Expected<std::string>>> results_;
  std::mutex mu_;
  std::condition_variable done_;
  std::atomic<bool> cancel_{false};
  std::thread thread_;
};

} // namespace dtc::plan
