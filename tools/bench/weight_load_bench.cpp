// Loading one rank's parameters (issue 15): the time and peak memory of reading every parameter
// buffer of a plan's rank from its model, the way dtc-run did before the weight reader (import
// the whole model, then take each initializer's bytes and slice the rank's shard) or through
// runtime/io/WeightReader (only the requested bytes). One mode per process, so that each peak
// RSS is its own:
//     dtc_weight_load_bench PLAN RANK import|reader    (the model is the one the plan names)
#include "compiler/ir/Sharding.h"
#include "compiler/onnx/Importer.h"
#include "compiler/plan/Plan.h"
#include "runtime/io/WeightReader.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

using namespace dtc;

namespace {

int fail(const Status &s) {
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  return 1;
}

std::vector<int64_t> wholeOf(const plan::Buffer &b) {
  if (b.has_shard())
    return {b.shard().whole_shape().begin(), b.shard().whole_shape().end()};
  return {b.shape().begin(), b.shape().end()};
}

/// A sum of the bytes, so that no copy can be left out.
uint64_t digest(const char *p, size_t n) {
  uint64_t h = 0;
  for (size_t i = 0; i < n; i += 4096)
    h += static_cast<unsigned char>(p[i]);
  return h;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 4 || (std::strcmp(argv[3], "import") != 0 && std::strcmp(argv[3], "reader") != 0)) {
    std::fprintf(stderr, "usage: %s PLAN RANK import|reader\n", argv[0]);
    return 2;
  }
  const bool import = std::strcmp(argv[3], "import") == 0;
  auto plan = plan::readPlanFile(argv[1]);
  if (!plan)
    return fail(plan.status());
  const int rank = std::atoi(argv[2]);
  if (rank < 0 || rank >= plan->world_size())
    return fail(Status::error(argv[1], "no rank " + std::string(argv[2])));
  const plan::RankProgram &rp = plan::programOf(*plan, rank);
  const int64_t tp = plan->ranks(rank).tp();
  const std::string model =
      (std::filesystem::path(argv[1]).parent_path() / plan->model().path()).string();
  const bool untie = plan->model().untie_initializers();

  const auto start = std::chrono::steady_clock::now();
  uint64_t bytes = 0, sum = 0;
  int params = 0;
  if (import) {
    Diagnostics diags;
    auto graph = onnxio::importModelFile(model, diags, {untie});
    if (!graph)
      return fail(graph.status());
    for (const plan::Buffer &b : rp.buffers()) {
      if (b.kind() != plan::BUFFER_PARAMETER)
        continue;
      const ir::Value *v = (*graph)->findValue(b.source());
      if (!v || !v->initializer())
        return fail(Status::error(b.source(), "not in the model"));
      auto all = v->initializer()->bytes();
      if (!all)
        return fail(all.status());
      const std::vector<int64_t> whole = wholeOf(b);
      std::string part;
      if (b.has_shard() && b.shard().group() == "ps") {
        const uint64_t row = (*all)->size() / static_cast<uint64_t>(whole[0]);
        part = (*all)->substr(row * static_cast<uint64_t>(b.shard().begin()), b.size_bytes());
      } else if (b.has_shard()) {
        part = ir::sliceShard(
            **all, whole, ir::dtypeSize(static_cast<ir::DType>(b.dtype())),
            ir::Sharding::split(b.shard().axis(), b.shard().parts(), b.shard().blocks()), tp);
      } else {
        part = **all;
      }
      bytes += part.size();
      sum += digest(part.data(), part.size());
      ++params;
    }
  } else {
    rt::WeightReader::Options o;
    o.untieInitializers = untie;
    auto reader = rt::WeightReader::open(model, o);
    if (!reader)
      return fail(reader.status());
    for (const plan::Buffer &b : rp.buffers()) {
      if (b.kind() != plan::BUFFER_PARAMETER)
        continue;
      const std::vector<int64_t> whole = wholeOf(b);
      rt::WeightRequest req{b.source(), static_cast<ir::DType>(b.dtype()), whole, std::nullopt};
      if (b.has_shard() && b.shard().group() == "ps") {
        req.slice = rt::WeightSlice{0, b.shard().begin(), b.shape(0), 1};
      } else if (b.has_shard()) {
        req.slice = rt::WeightSlice::tensorParallel(b.shard().axis(),
                                                    whole[static_cast<size_t>(b.shard().axis())],
                                                    b.shard().parts(), b.shard().blocks(), tp);
      }
      std::string part(b.size_bytes(), '\0');
      Status s = (*reader)->readInto(req, part.data(), part.size());
      if (!s)
        return fail(s);
      bytes += part.size();
      sum += digest(part.data(), part.size());
      ++params;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  std::printf("%s rank %d: %d parameters, %.1f MiB loaded in %.3f s, peak RSS %.1f MiB "
              "(digest %llu)\n",
              argv[3], rank, params, static_cast<double>(bytes) / (1 << 20), seconds,
              static_cast<double>(ru.ru_maxrss) / 1024, static_cast<unsigned long long>(sum));
  return 0;
}
