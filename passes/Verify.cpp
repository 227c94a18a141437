// verify: the IR verifier as a pass, for explicit --passes lists.
#include "compiler/ir/Verifier.h"
#include "passes/Passes.h"

namespace dtc::passes {
namespace {

class VerifyPass : public Pass {
public:
  std::string name() const override { return "verify"; }
  std::string description() const override { return "check the IR's structural invariants"; }
  Status run(ir::Graph &graph, PassContext &) override { return ir::verifyGraph(graph); }
};

} // namespace

std::unique_ptr<Pass> createVerifyPass() { return std::make_unique<VerifyPass>(); }

} // namespace dtc::passes
