// Runs a list of passes with optional verification, printing and timing after each.
#pragma once

#include "passes/Pass.h"

#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace dtc::passes {

struct PassManagerOptions {
  bool verifyEach = false;          ///< run the verifier after every pass
  std::set<std::string> printAfter; ///< pass names, or "all"
  bool timePasses = false;          ///< report wall time per pass
  std::ostream *printStream = nullptr; ///< where --print-after output goes
  std::ostream *timeStream = nullptr;  ///< where --time-passes output goes
};

class PassManager {
public:
  explicit PassManager(PassManagerOptions options) : options_(std::move(options)) {}
  void add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  /// Runs every pass in order; stops at the first error. With verifyEach, a verifier failure
  /// is reported as "after pass 'x': <problem>".
  Status run(ir::Graph &graph, PassContext &ctx);

private:
  PassManagerOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
};

} // namespace dtc::passes
