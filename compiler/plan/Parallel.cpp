// parallelFor and compileThreads (Parallel.h).
#include "compiler/plan/Parallel.h"

#include <llvm/Support/ThreadPool.h>
#include <llvm/Support/Threading.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

namespace dtc::plan {

unsigned compileThreads() {
  if (const char *e = std::getenv("DTC_COMPILE_THREADS")) {
    char *end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (end != e && *end == '\0' && v > 0)
      return static_cast<unsigned>(std::min<long>(v, 256));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

Status parallelFor(size_t n, unsigned maxThreads, const std::function<Status(size_t)> &fn) {
  std::mutex mu;
  std::optional<std::pair<size_t, Status>> firstError; // the lowest index's error
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto worker = [&] {
    for (size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) {
      Status s = fn(i);
      if (s.isOk())
        continue;
      std::lock_guard<std::mutex> lock(mu);
      if (!firstError || i < firstError->first)
        firstError.emplace(i, std::move(s));
      failed.store(true);
    }
  };
  const unsigned threads = static_cast<unsigned>(std::min<size_t>(n, std::max(1u, maxThreads)));
  if (threads <= 1) {
    worker();
  } else {
    llvm::ThreadPool pool(llvm::hardware_concurrency(threads));
    for (unsigned t = 0; t < threads; ++t)
      pool.async(worker);
    pool.wait();
  }
  return firstError ? std::move(firstError->second) : Status::ok();
}

} // namespace dtc::plan
