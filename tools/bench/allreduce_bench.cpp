// All-reduce benchmark of the communicator (runtime/comm): `mpirun -n 2 dtc_allreduce_bench
// [reps]`. For 4 KiB to 64 MiB of f32 it times a raw blocking MPI_Allreduce (main thread, on a
// communicator of its own) against Communicator::allReduceAsync + wait on the same bytes,
// alternating, and prints medians, the overhead, the bus bandwidth (NCCL's busbw = bytes / t *
// 2 (n - 1) / n) and the CPU the communication used per wall second (the raw call spins).
#include "runtime/Trace.h"
#include "runtime/comm/Communicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

using namespace dtc;
using namespace dtc::rt;

namespace {

double cpuSeconds(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  int repsScale = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1;
  CommOptions opts;
  Tracer tracer(0); // the communication thread's own time per collective ("in thread")
  opts.tracer = &tracer;
  auto comm = Communicator::createMpi(opts);
  if (!comm) {
    std::fprintf(stderr, "error: %s\n", comm.status().message().c_str());
    return 1;
  }
  Communicator &c = **comm;
  // The raw calls run on this thread while the communication thread idles: that needs
  // MPI_THREAD_MULTIPLE (Open MPI 4 provides it).
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided != MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "error: the raw comparison needs MPI_THREAD_MULTIPLE\n");
    return 1;
  }
  MPI_Comm raw;
  MPI_Comm_dup(MPI_COMM_WORLD, &raw);
  const int n = c.size();
  if (c.rank() == 0) {
    std::printf("ranks %d; medians; cpu = CPU seconds of the communication per wall second\n", n);
    std::printf("%10s %10s %10s %10s %9s %10s %10s %8s %8s\n", "bytes", "raw us", "dtc us",
                "thread us", "overhead", "raw GB/s", "dtc GB/s", "raw cpu", "dtc cpu");
  }
  for (size_t bytes = 4096; bytes <= (size_t{64} << 20); bytes *= 4) {
    const size_t count = bytes / 4;
    std::vector<float> buf(count, 1.0f);
    int reps = (bytes >= (size_t{16} << 20)  ? 8
                : bytes >= (size_t{1} << 20) ? 20
                                             : 100) *
               repsScale;
    std::vector<double> rawT, dtcT, threadT;
    double rawCpu = 0, rawWall = 0, dtcCpu = 0, dtcWall = 0;
    for (int rep = -2; rep < reps; ++rep) {
      MPI_Barrier(raw);
      double c0 = cpuSeconds(CLOCK_THREAD_CPUTIME_ID);
      auto t0 = std::chrono::steady_clock::now();
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw);
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double cpu = cpuSeconds(CLOCK_THREAD_CPUTIME_ID) - c0;
      if (rep >= 0) {
        rawT.push_back(t);
        rawCpu += cpu;
        rawWall += t;
      }
      std::fill(buf.begin(), buf.end(), 1.0f);
      MPI_Barrier(raw);
      double p0 = cpuSeconds(CLOCK_PROCESS_CPUTIME_ID), m0 = cpuSeconds(CLOCK_THREAD_CPUTIME_ID);
      t0 = std::chrono::steady_clock::now();
      AllReduceRequest req;
      req.name = "bench";
      req.inputs = {buf.data()};
      req.outputs = {buf.data()};
      req.bytes = {bytes};
      Status s = c.wait(c.allReduceAsync(std::move(req)));
      t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      // The process's CPU minus this (waiting) thread's: the communication thread's.
      cpu =
          (cpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - p0) - (cpuSeconds(CLOCK_THREAD_CPUTIME_ID) - m0);
      if (!s.isOk()) {
        std::fprintf(stderr, "error: %s\n", s.message().c_str());
        c.abortJob(1);
      }
      if (buf[0] != static_cast<float>(n) || buf[count - 1] != static_cast<float>(n)) {
        std::fprintf(stderr, "error: wrong sum %g\n", buf[0]);
        c.abortJob(1);
      }
      if (rep >= 0) {
        threadT.push_back(1e-6 * static_cast<double>(tracer.snapshot().back().durationUs));
        dtcT.push_back(t);
        dtcCpu += cpu;
        dtcWall += t;
      }
    }
    double r = median(rawT), d = median(dtcT), th = median(threadT);
    double factor = 2.0 * (n - 1) / n;
    if (c.rank() == 0)
      std::printf("%10zu %10.1f %10.1f %10.1f %8.1f%% %10.2f %10.2f %7.0f%% %7.0f%%\n", bytes,
                  r * 1e6, d * 1e6, th * 1e6, (d / r - 1) * 100, bytes / r * factor / 1e9,
                  bytes / d * factor / 1e9, 100 * rawCpu / rawWall, 100 * dtcCpu / dtcWall);
  }
  MPI_Comm_free(&raw);
  return 0;
}
