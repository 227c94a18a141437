// ChecksumPrefetch: checksumFile on one background thread, results handed over under a mutex.
#include "compiler/plan/ChecksumPrefetch.h"

#include "compiler/plan/Plan.h"

namespace dtc::plan {

ChecksumPrefetch::ChecksumPrefetch(std::vector<File> files)
    : files_(std::move(files)), results_(files_.size()) {
  if (!files_.empty())
    thread_ = std::thread([this] { run(); });
}

ChecksumPrefetch::~ChecksumPrefetch() {
  cancel_.store(true, std::memory_order_relaxed);
  if (thread_.joinable())
    thread_.join();
}

void ChecksumPrefetch::run() {
  for (size_t i = 0; i < files_.size(); ++i) {
    Expected<std::string> sum =
        checksumFile(files_[i].path, files_[i].what, files_[i].maxBytes, kChecksumAlgorithm, &cancel_);
    std::lock_guard<std::mutex> lock(mu_);
    results_[i].emplace(std::move(sum));
    done_.notify_all();
  }
}

Expected<std::string> ChecksumPrefetch::get(const std::string &path, const std::string &what,
                                            uint64_t maxBytes) {
  for (size_t i = 0; i < files_.size(); ++i) {
    if (files_[i].path != path)
      continue;
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return results_[i].has_value(); });
    return *results_[i];
  }
  return checksumFile(path, what, maxBytes);
}

} // namespace dtc::plan
