// parallelFor, compileThreads and compileThreadStackBytes (Parallel.h).
#include "compiler/plan/Parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <pthread.h>
#include <sys/resource.h>
#include <thread>
#include <utility>
#include <vector>

namespace dtc::plan {

namespace {

void *runWork(void *work) {
  (*static_cast<std::function<void()> *>(work))();
  return nullptr;
}

} // namespace

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
  return compileThreadStackBytes(
      rl.rlim_cur == RLIM_INFINITY ? std::nullopt : std::optional<uint64_t>(rl.rlim_cur));
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
  // (glibc's default is only 2 MiB under `ulimit -s unlimited`). A thread that cannot be started
  // (an address-space limit, too many threads) is done without: the others take its indices.
  std::function<void()> work = worker;
  std::vector<pthread_t> others;
  if (threads > 1) {
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) == 0) {
      if (pthread_attr_setstacksize(&attr, static_cast<size_t>(compileThreadStackBytes())) == 0)
        for (unsigned t = 1; t < threads; ++t) {
          pthread_t th;
          if (pthread_create(&th, &attr, runWork, &work) != 0)
            break;
          others.push_back(th);
        }
      pthread_attr_destroy(&attr);
    }
  }
  work();
  for (pthread_t th : others)
    pthread_join(th, nullptr);
  return firstError ? std::move(firstError->second) : Status::ok();
}

} // namespace dtc::plan
