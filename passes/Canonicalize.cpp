// STUB canonicalize (to be written).
#include "passes/Passes.h"

namespace dtc::passes {
namespace {
class CanonicalizePass : public Pass {
public:
  std::string name() const override { return "canonicalize"; }
  std::string description() const override { return "constant folding and cleanup"; }
  Status run(ir::Graph &, PassContext &) override { return Status::ok(); }
};
} // namespace
std::unique_ptr<Pass> createCanonicalizePass() { return std::make_unique<CanonicalizePass>(); }
} // namespace dtc::passes
