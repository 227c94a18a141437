// Independent pieces of compile work on several threads (POSIX threads with the stack depth of
// the main thread): the programs of a pipeline's stages, the compaction of a plan's programs,
// the classes of an uneven tensor-parallel split, the chunks of a checksum.
#pragma once

#include "compiler/support/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

namespace dtc::plan {

/// Threads for compile work: DTC_COMPILE_THREADS when it is a positive integer (capped at 256;
/// 1: the pipeline stages, the compaction and the tp classes on the calling thread, as before
/// this existed), else the hardware's thread count. The model checksums (chunkedChecksum,
/// ChecksumPrefetch) do not read it.
unsigned compileThreads();

/// Stack sizes of compile threads (bytes): at least 8 MiB, at most 1 GiB, and 256 MiB when the
/// stack is unlimited.
inline constexpr uint64_t kCompileThreadStackMin = uint64_t{8} << 20;
inline constexpr uint64_t kCompileThreadStackMax = uint64_t{1} << 30;
inline constexpr uint64_t kCompileThreadStackUnlimited = uint64_t{256} << 20;

/// The stack size (bytes) of each thread parallelFor starts, for a process stack limit of
/// `limitBytes` (RLIMIT_STACK's soft limit, which bounds the main thread; std::nullopt:
/// unlimited): the limit itself, clamped to [kCompileThreadStackMin, kCompileThreadStackMax], or
/// kCompileThreadStackUnlimited. A compile thread then recurses as deep as the main thread did
/// when the work ran there (the tensor-parallel pass's look-ahead recurses once per op of a chain
/// that keeps a split), where glibc's default for a new thread is the limit when it is finite but
/// only 2 MiB when it is unlimited (pthread_create(3)).
uint64_t compileThreadStackBytes(std::optional<uint64_t> limitBytes);
/// compileThreadStackBytes of this process's RLIMIT_STACK (getrlimit(2)).
uint64_t compileThreadStackBytes();

/// Runs fn(0), ..., fn(n - 1) on up to min(n, maxThreads) threads (the calling thread alone when
/// that is 1; else the calling thread and min(n, maxThreads) - 1 threads with
/// compileThreadStackBytes() of stack, fewer when the system refuses to start more), each index
/// once, in no particular order; fn must be safe to run concurrently for different indices. Returns
/// the error of the lowest index whose fn failed, so the message does not depend on the schedule
/// (every index below a failing one was started before it, and runs); once one fails, the indices
/// not yet started are skipped.
Status parallelFor(size_t n, unsigned maxThreads, const std::function<Status(size_t)> &fn);

} // namespace dtc::plan
