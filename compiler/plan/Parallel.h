// Independent pieces of compile work on several threads (llvm::ThreadPool): the programs of a
// pipeline's stages, the compaction of a plan's programs, the chunks of a checksum.
#pragma once

#include "compiler/support/Status.h"

#include <cstddef>
#include <functional>

namespace dtc::plan {

/// Threads for compile work: DTC_COMPILE_THREADS when it is a positive integer (capped at 256;
/// 1: the pipeline stages, the compaction and the tp classes on the calling thread, as before
/// this existed), else the hardware's thread count. The model checksums (chunkedChecksum,
/// ChecksumPrefetch) do not read it.
unsigned compileThreads();

/// Runs fn(0), ..., fn(n - 1) on up to min(n, maxThreads) threads (the calling thread alone when
/// that is 1), each index once, in no particular order; fn must be safe to run concurrently for
/// different indices. Returns the error of the lowest index whose fn failed, so the message does
/// not depend on the schedule; once one fails, the indices not yet started are skipped.
Status parallelFor(size_t n, unsigned maxThreads, const std::function<Status(size_t)> &fn);

} // namespace dtc::plan
