// Pass manager: runs passes, verifies, prints, times.
#include "passes/PassManager.h"

#include "compiler/ir/Printer.h"
#include "compiler/ir/Verifier.h"

#include <chrono>
#include <cstdio>
#include <iostream>

namespace dtc::passes {

Status PassManager::run(ir::Graph &graph, PassContext &ctx) {
  std::vector<std::pair<std::string, double>> times;
  for (auto &pass : passes_) {
    auto start = std::chrono::steady_clock::now();
    DTC_RETURN_IF_ERROR(pass->run(graph, ctx));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                          start)
                    .count();
    times.emplace_back(pass->name(), ms);
    if (options_.verifyEach) {
      Status s = ir::verifyGraph(graph);
      if (!s.isOk())
        return Status::error("after pass '" + pass->name() + "': " + s.message());
    }
    if (options_.printAfter.count("all") || options_.printAfter.count(pass->name())) {
      std::ostream &os = options_.printStream ? *options_.printStream : std::cout;
      os << "// ----- IR after " << pass->name() << " -----\n";
      ir::printGraph(graph, os);
    }
  }
  if (options_.timePasses) {
    std::ostream &os = options_.timeStream ? *options_.timeStream : std::cerr;
    double total = 0;
    for (auto &[name, ms] : times)
      total += ms;
    os << "===-- pass execution times --===\n";
    char line[160];
    for (auto &[name, ms] : times) {
      std::snprintf(line, sizeof line, "  %10.3f ms  %5.1f%%  %s\n", ms,
                    total > 0 ? 100.0 * ms / total : 0.0, name.c_str());
      os << line;
    }
    std::snprintf(line, sizeof line, "  %10.3f ms  100.0%%  total\n", total);
    os << line;
  }
  return Status::ok();
}

} // namespace dtc::passes
