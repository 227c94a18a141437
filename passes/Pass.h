// The pass interface (DESIGN.md section 5): a pass has a kebab-case name (used by
// `dtc-compile --passes`) and transforms a Graph in place, returning a Status.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Status.h"
#include "compiler/support/TrainingConfig.h"

#include <map>
#include <memory>
#include <string>

namespace dtc::passes {

/// Options and shared state handed to every pass of one compilation.
struct PassContext {
  Diagnostics diags;
  /// Free-form options by name (for example "batch-symbol" -> "N").
  std::map<std::string, std::string> options;
  /// Training passes only: the configuration they read (they record what they build in the
  /// graph's training roles, ir::Graph::training()). Null for inference compilations.
  TrainingConfig *training = nullptr;
};

class Pass {
public:
  virtual ~Pass() = default;
  /// Kebab-case name, unique among passes.
  virtual std::string name() const = 0;
  /// One line on what the pass does (for --help and --time-passes).
  virtual std::string description() const = 0;
  virtual Status run(ir::Graph &graph, PassContext &ctx) = 0;
};

} // namespace dtc::passes
