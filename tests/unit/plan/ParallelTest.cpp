// Tests of compiler/plan/Parallel.h: parallelFor (each index once, the lowest failing index's
// error whatever the schedule, indices not yet started skipped after a failure, the calling
// thread alone for n <= 1 or maxThreads <= 1, the other threads' stacks), compileThreads
// (DTC_COMPILE_THREADS) and compileThreadStackBytes.
#include "compiler/plan/Parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <string>
#include <thread>
#include <vector>

namespace dtc::plan {
namespace {

using namespace std::chrono_literals;

/// Waits (up to `limit`) until `flag` is set; true when it was.
bool waitFor(const std::atomic<bool> &flag, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > end)
      return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(ParallelForTest, ZeroIndicesCallsNothing) {
  for (unsigned threads : {0u, 1u, 4u}) {
    int calls = 0;
    Status s = parallelFor(0, threads, [&](size_t) {
      ++calls;
      return Status::ok();
    });
    EXPECT_TRUE(s.isOk()) << s.message();
    EXPECT_EQ(calls, 0);
  }
}

TEST(ParallelForTest, EachIndexExactlyOnce) {
  for (unsigned threads : {0u, 1u, 2u, 3u, 8u}) {
    for (size_t n : {size_t{1}, size_t{2}, size_t{7}, size_t{1000}}) {
      std::vector<std::atomic<int>> seen(n);
      Status s = parallelFor(n, threads, [&](size_t i) {
        seen[i].fetch_add(1);
        return Status::ok();
      });
      ASSERT_TRUE(s.isOk()) << s.message();
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(seen[i].load(), 1)
            << "index " << i << " of " << n << ", " << threads << " threads";
    }
  }
}

TEST(ParallelForTest, OneThreadRunsInOrderOnTheCaller) {
  const std::thread::id caller = std::this_thread::get_id();
  for (unsigned threads : {0u, 1u}) {
    std::vector<size_t> order;
    bool elsewhere = false;
    Status s = parallelFor(5, threads, [&](size_t i) {
      elsewhere |= std::this_thread::get_id() != caller;
      order.push_back(i);
      return Status::ok();
    });
    ASSERT_TRUE(s.isOk());
    EXPECT_FALSE(elsewhere) << threads << " threads";
    EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
  }
  // One index: no pool either.
  bool elsewhere = true;
  ASSERT_TRUE(parallelFor(1, 8, [&](size_t) {
                elsewhere = std::this_thread::get_id() != caller;
                return Status::ok();
              }).isOk());
  EXPECT_FALSE(elsewhere);
}

TEST(ParallelForTest, SeveralThreadsRunAtOnce) {
  // Two indices that each wait for the other: only concurrent runs let both see the other.
  std::atomic<bool> started[2] = {false, false};
  std::atomic<int> met{0};
  Status s = parallelFor(2, 2, [&](size_t i) {
    started[i].store(true);
    if (waitFor(started[1 - i], 5000ms))
      met.fetch_add(1);
    return Status::ok();
  });
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(met.load(), 2);
}

TEST(ParallelForTest, OtherThreadsHaveTheStackOfCompileThreadStackBytes) {
  // Two indices that wait for each other run on two threads: the caller and one started by
  // parallelFor, whose stack must be compileThreadStackBytes() (glibc may round it up to pages).
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> started[2] = {false, false};
  std::mutex mu;
  std::vector<size_t> otherStacks;
  Status s = parallelFor(2, 2, [&](size_t i) {
    started[i].store(true);
    waitFor(started[1 - i], 5000ms);
    if (std::this_thread::get_id() == caller)
      return Status::ok();
    pthread_attr_t attr;
    size_t bytes = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstacksize(&attr, &bytes);
      pthread_attr_destroy(&attr);
    }
    std::lock_guard<std::mutex> lock(mu);
    otherStacks.push_back(bytes);
    return Status::ok();
  });
  ASSERT_TRUE(s.isOk());
  ASSERT_EQ(otherStacks.size(), 1u);
  EXPECT_GE(otherStacks[0], compileThreadStackBytes());
  EXPECT_LT(otherStacks[0], compileThreadStackBytes() + (1u << 20));
}

TEST(CompileThreadStackTest, FollowsTheProcessStackLimit) {
  const uint64_t mib = uint64_t{1} << 20;
  EXPECT_EQ(compileThreadStackBytes(std::nullopt), 256 * mib); // ulimit -s unlimited
  EXPECT_EQ(compileThreadStackBytes(8 * mib), 8 * mib);        // the usual 8 MiB
  EXPECT_EQ(compileThreadStackBytes(64 * mib), 64 * mib);
  EXPECT_EQ(compileThreadStackBytes(1 * mib), 8 * mib);            // never below 8 MiB
  EXPECT_EQ(compileThreadStackBytes(16 * 1024 * mib), 1024 * mib); // nor above 1 GiB
}

TEST(ParallelForTest, ErrorOfTheLowestFailingIndex) {
  // Indices 3 and 7 fail. With several threads, index 3 holds its failure back until index 7 has
  // failed (or 2 s passed, when index 7 was skipped): 7's error comes first in time, and 3's is
  // still the one returned.
  for (unsigned threads : {1u, 2u, 4u}) {
    for (int round = 0; round < 5; ++round) {
      std::atomic<bool> sevenFailed{false};
      Status s = parallelFor(20, threads, [&](size_t i) {
        if (i == 7) {
          sevenFailed.store(true);
          return Status::error("index 7", "failed");
        }
        if (i == 3) {
          if (threads > 1)
            waitFor(sevenFailed, 2000ms);
          return Status::error("index 3", "failed");
        }
        return Status::ok();
      });
      ASSERT_FALSE(s.isOk());
      EXPECT_EQ(s.message(), "index 3: failed") << threads << " threads, round " << round;
    }
  }
}

TEST(ParallelForTest, IndicesNotStartedAreSkippedAfterAFailure) {
  // One thread: the indices after the failing one never run.
  std::vector<int> calls(100, 0);
  Status s = parallelFor(calls.size(), 1, [&](size_t i) {
    ++calls[i];
    return i == 5 ? Status::error("index 5", "failed") : Status::ok();
  });
  EXPECT_EQ(s.message(), "index 5: failed");
  for (size_t i = 0; i < calls.size(); ++i)
    EXPECT_EQ(calls[i], i <= 5 ? 1 : 0) << "index " << i;

  // Several threads: index 0 fails at once while the others take 1 ms each; the other threads
  // stop taking indices once they see the failure, so far fewer than all run.
  std::atomic<size_t> ran{0};
  const size_t n = 2000;
  s = parallelFor(n, 4, [&](size_t i) {
    ran.fetch_add(1);
    if (i == 0)
      return Status::error("index 0", "failed");
    std::this_thread::sleep_for(1ms);
    return Status::ok();
  });
  EXPECT_EQ(s.message(), "index 0: failed");
  EXPECT_LT(ran.load(), n / 2);
}

/// Sets DTC_COMPILE_THREADS for one scope (unset: `value` null) and restores it.
class ScopedThreadsEnv {
public:
  explicit ScopedThreadsEnv(const char *value) {
    if (const char *old = std::getenv("DTC_COMPILE_THREADS"))
      old_ = std::make_unique<std::string>(old);
    if (value)
      setenv("DTC_COMPILE_THREADS", value, 1);
    else
      unsetenv("DTC_COMPILE_THREADS");
  }
  ~ScopedThreadsEnv() {
    if (old_)
      setenv("DTC_COMPILE_THREADS", old_->c_str(), 1);
    else
      unsetenv("DTC_COMPILE_THREADS");
  }

private:
  std::unique_ptr<std::string> old_;
};

TEST(CompileThreadsTest, ReadsThePositiveIntegerOfTheEnvironment) {
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  {
    ScopedThreadsEnv env(nullptr);
    EXPECT_EQ(compileThreads(), hardware);
  }
  {
    ScopedThreadsEnv env("1");
    EXPECT_EQ(compileThreads(), 1u);
  }
  {
    ScopedThreadsEnv env("3");
    EXPECT_EQ(compileThreads(), 3u);
  }
  {
    ScopedThreadsEnv env("100000"); // capped
    EXPECT_EQ(compileThreads(), 256u);
  }
  for (const char *bad : {"", "0", "-2", "two", "4x"}) {
    ScopedThreadsEnv env(bad);
    EXPECT_EQ(compileThreads(), hardware) << "'" << bad << "'";
  }
}

} // namespace
} // namespace dtc::plan
