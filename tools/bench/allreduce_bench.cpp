// Communication benchmark of the communicator (runtime/comm): `mpirun -n 2 dtc_allreduce_bench
// [reps-scale] [kinds] [max-bytes] [min-bytes]`. For 4 KiB to 64 MiB (or min-bytes to
// max-bytes, sizes growing 4x) it times raw blocking MPI calls (main thread, on a communicator
// of its own) against the communicator's blocking form (run: submit + wait on the calling
// thread), its asynchronous form (submit, then wait) and the asynchronous form of a persistent
// request (CommRequest::persistent, as the executor submits its per-step collectives) on the
// same bytes, interleaved in an order shuffled every repetition, and prints medians, bus
// bandwidths (NCCL's busbw) and the ratios raw time / dtc time (of the medians, and "best": of
// the fastest repetitions, robust against a loaded machine). kinds: a comma-separated subset of
// allreduce,allgather,reducescatter,broadcast,sendrecv. tools/bench/allreduce_runs.py repeats
// it and prints medians and minima of the ratios over the runs.
#include "runtime/Trace.h"
#include "runtime/comm/Communicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace dtc;
using namespace dtc::rt;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Kind {
  const char *name;
  CommKind kind;
  /// Bus-bandwidth factor (NCCL's): bytes moved per rank relative to `bytes` / time.
  double factor;
};

} // namespace

int main(int argc, char **argv) {
  const int repsScale = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1;
  const std::string only =
      argc > 2 ? argv[2] : "allreduce,allgather,reducescatter,broadcast,sendrecv";
  const size_t maxBytes =
      argc > 3 ? static_cast<size_t>(std::strtoull(argv[3], nullptr, 10)) : size_t{64} << 20;
  const size_t minBytes =
      argc > 4 ? std::max<size_t>(4096, std::strtoull(argv[4], nullptr, 10)) : size_t{4096};
  CommOptions opts;
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
  const int n = c.size(), me = c.rank();
  const double nn = n;
  const std::vector<Kind> kinds = {
      {"allreduce", CommKind::kAllReduce, 2 * (nn - 1) / nn},
      {"allgather", CommKind::kAllGather, (nn - 1) / nn},
      {"reducescatter", CommKind::kReduceScatter, (nn - 1) / nn},
      {"broadcast", CommKind::kBroadcast, 1},
      {"sendrecv", CommKind::kSend, 1},
  };
  if (me == 0) {
    std::printf(
        "ranks %d; medians of interleaved repetitions; bytes: the all-reduced buffer, the "
        "gathered or scattered total, the broadcast buffer, each direction of the "
        "exchange; GB/s: bus bandwidth; ratio: raw time / dtc time (1 = as fast as raw "
        "MPI); dtc = blocking form (run), async = submit then wait, persist = the same with a "
        "persistent request (the executor's)\n",
        n);
    std::printf("%-13s %10s %9s %9s %9s %9s %9s %9s %7s %7s %7s %7s\n", "kind", "bytes", "raw us",
                "dtc us", "async us", "pers. us", "raw GB/s", "pers GB/s", "ratio", "async",
                "persist", "best");
  }
  const int peer = me ^ 1;
  for (const Kind &k : kinds) {
    if (only.find(k.name) == std::string::npos)
      continue;
    if (k.kind == CommKind::kSend && (n % 2 != 0))
      continue; // pairs of ranks exchange
    for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
      const size_t count = bytes / 4; // f32 elements
      const size_t per = bytes / static_cast<size_t>(n);
      std::vector<float> a(count, 1.0f), b(count, 0.0f);
      const int reps = (bytes >= (size_t{16} << 20)  ? 15
                        : bytes >= (size_t{1} << 20) ? 40
                                                     : 400) *
                       repsScale;
      auto rawOp = [&] {
        switch (k.kind) {
        case CommKind::kAllReduce:
          MPI_Allreduce(MPI_IN_PLACE, a.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw);
          break;
        case CommKind::kAllGather:
          MPI_Allgather(a.data(), static_cast<int>(per), MPI_BYTE, b.data(), static_cast<int>(per),
                        MPI_BYTE, raw);
          break;
        case CommKind::kReduceScatter:
          MPI_Reduce_scatter_block(a.data(), b.data(), static_cast<int>(per / 4), MPI_FLOAT,
                                   MPI_SUM, raw);
          break;
        case CommKind::kBroadcast:
          MPI_Bcast(a.data(), static_cast<int>(bytes), MPI_BYTE, 0, raw);
          break;
        default:
          MPI_Sendrecv(a.data(), static_cast<int>(bytes), MPI_BYTE, peer, 1, b.data(),
                       static_cast<int>(bytes), MPI_BYTE, peer, 1, raw, MPI_STATUS_IGNORE);
        }
      };
      auto request = [&](std::vector<CommRequest> &out) {
        out.clear();
        CommRequest r;
        r.kind = k.kind;
        r.name = k.name;
        switch (k.kind) {
        case CommKind::kAllReduce:
          r.inputs = {a.data()};
          r.outputs = {a.data()};
          r.bytes = {bytes};
          break;
        case CommKind::kAllGather:
          r.inputs = {a.data()};
          r.outputs = {b.data()};
          r.bytes = {per};
          break;
        case CommKind::kReduceScatter:
          r.inputs = {a.data()};
          r.outputs = {b.data()};
          r.bytes = {per};
          break;
        case CommKind::kBroadcast:
          r.peer = 0;
          r.inputs = {a.data()};
          r.outputs = {a.data()};
          r.bytes = {bytes};
          break;
        default: {
          CommRequest q = r;
          q.kind = CommKind::kRecv;
          q.peer = peer;
          q.tag = 1;
          q.outputs = {b.data()};
          q.bytes = {bytes};
          out.push_back(q);
          r.peer = peer;
          r.tag = 1;
          r.inputs = {a.data()};
          r.bytes = {bytes};
        }
        }
        out.push_back(r);
      };
      std::vector<double> rawT, dtcT, asyncT, persistT;
      std::vector<CommRequest> reqs;
      std::vector<uint64_t> handles;
      std::vector<int> forms = {-1, 0, 1, 2};
      for (int rep = -3; rep < reps; ++rep) {
        // The four forms (-1: raw MPI) in an order shuffled every repetition, alike on every
        // rank (seeded by the repetition): the time of a collective depends on the one before
        // it (measured: all-gathers of 64 KiB by whole messages took 12 us right after the raw
        // call, 25 us after another of dtc's, and the raw call after dtc's 25 us too), so
        // each form follows each other one equally often.
        std::minstd_rand shuffle(static_cast<unsigned>(rep + 3));
        std::shuffle(forms.begin(), forms.end(), shuffle);
        for (const int form : forms) {
          request(reqs);
          for (CommRequest &q : reqs)
            q.persistent = form == 2;
          MPI_Barrier(raw);
          const double t0 = now();
          Status s;
          if (form < 0) {
            rawOp();
          } else if (form == 0) {
            // The blocking form; an exchange posts its recv first.
            uint64_t h = reqs.size() > 1 ? c.submit(std::move(reqs[0])) : 0;
            s = c.run(std::move(reqs.back()));
            if (Status w = h ? c.wait(h) : Status::ok(); s.isOk())
              s = w;
          } else {
            handles.clear();
            for (CommRequest &r : reqs)
              handles.push_back(c.submit(std::move(r)));
            for (uint64_t h : handles)
              if (Status w = c.wait(h); s.isOk())
                s = w;
          }
          const double t = now() - t0;
          if (!s.isOk()) {
            std::fprintf(stderr, "error: %s\n", s.message().c_str());
            c.abortJob(1);
          }
          if (rep >= 0)
            (form < 0 ? rawT : form == 0 ? dtcT : form == 1 ? asyncT : persistT).push_back(t);
        }
        // Keep the all-reduced values bounded (powers of n would overflow after many reps).
        if (k.kind == CommKind::kAllReduce && rep % 16 == 0)
          std::fill(a.begin(), a.end(), 1.0f);
      }
      if (k.kind == CommKind::kAllReduce) {
        std::fill(a.begin(), a.end(), 1.0f);
        Status s = c.allReduce(a.data(), count, ir::DType::kFloat32, ReduceOp::kSum, "check");
        if (!s.isOk() || a[0] != nn || a[count - 1] != nn) {
          std::fprintf(stderr, "error: wrong sum %g\n", static_cast<double>(a[0]));
          c.abortJob(1);
        }
      }
      const double r = median(rawT), d = median(dtcT), as = median(asyncT), ps = median(persistT);
      // Best of each (fastest repetition): less sensitive to other processes on the machine.
      const double best =
          *std::min_element(rawT.begin(), rawT.end()) / *std::min_element(dtcT.begin(), dtcT.end());
      if (me == 0)
        std::printf("%-13s %10zu %9.1f %9.1f %9.1f %9.1f %9.2f %9.2f %7.2f %7.2f %7.2f %7.2f\n",
                    k.name, bytes, r * 1e6, d * 1e6, as * 1e6, ps * 1e6, bytes / r * k.factor / 1e9,
                    bytes / ps * k.factor / 1e9, r / d, r / as, r / ps, best);
      std::fflush(stdout);
    }
  }
  if (me == 0) {
    const CommStats st = c.stats();
    std::printf("persistent requests: %llu hits, %llu misses, %llu evictions; %llu wakes of the "
                "communication thread\n",
                static_cast<unsigned long long>(st.persistentHits),
                static_cast<unsigned long long>(st.persistentMisses),
                static_cast<unsigned long long>(st.persistentEvictions),
                static_cast<unsigned long long>(st.threadWakes));
  }
  MPI_Comm_free(&raw);
  return 0;
}
