// parallelFor, compileThreads and compileThreadStackBytes (Parallel.h).
#include "compiler/plan/Parallel.h"

#include <llvm/Support/thread.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sys/resource.h>
#include <thread>
#include <utility>
#include <vector>

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

uint64_t compileThreadStackBytes(std::optional<uint64_t> limitBytes) {
  if (!limitBytes)
    return kCompileThreadStackUnlimited;
  return std::clamp(*limitBytes, kCompileThreadStackMin, kCompileThreadStackMax);
}

uint64_t compileThreadStackBytes() {
  rlimit rl{};
  if (getrlimit(RLIMIT_STACK, &rl) != 0)
    return kCompileThreadStackMin;
  return compileThreadStackBytes(rl.rlim_cur == RLIM_INFINITY
                                     ? std::nullopt
                                     : std::optional<uint64_t>(rl.rlim_cur));
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
  // The calling thread works beside threads - 1 others, whose stacks are as deep as its own
  // (llvm::ThreadPool's threads get glibc's default, only 2 MiB under `ulimit -s unlimited`).
  std::vector<llvm::thread> others;
  if (threads > 1) {
    const auto stack = static_cast<unsigned>(compileThreadStackBytes());
    others.reserve(threads - 1);
    for (unsigned t = 1; t < threads; ++t)
      others.emplace_back(llvm::Optional<unsigned>(stack), worker);
  }
  worker();
  for (llvm::thread &t : others)
    t.join();
  return firstError ? std::move(firstError->second) : Status::ok();
}

} // namespace dtc::plan
