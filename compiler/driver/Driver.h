// The compile pipeline shared by dtc-compile and tests: import a model, run a pass list.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Status.h"

#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace dtc::driver {

struct CompileOptions {
  std::string modelPath;
  /// Import with each use of a constant-filled initializer its own copy (--untie-initializers).
  bool untieInitializers = false;
  /// Pass names to run in order; empty means the default pipeline.
  std::vector<std::string> passes;
  bool useDefaultPipeline = true;
  bool verifyEach = false;
  std::set<std::string> printAfter;
  bool timePasses = false;
  /// A forward-only compilation (dtc-compile --inference): canonicalize then turns
  /// BatchNormalization with training_mode=1 into normalization with the batch's statistics
  /// (passes/Canonicalize.cpp). A training compilation keeps the node for the training passes,
  /// which update its running statistics.
  bool inference = false;
  std::ostream *printStream = nullptr;
  std::ostream *timeStream = nullptr;
};

/// Imports `opts.modelPath` and runs the passes. Errors: "<file or node>: <what>"; an unknown
/// pass name is an error listing the known ones.
Expected<std::unique_ptr<ir::Graph>> compileModel(const CompileOptions &opts, Diagnostics &diags);

} // namespace dtc::driver
