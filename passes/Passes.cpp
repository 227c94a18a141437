// Pass lookup by name and the default pipeline.
#include "passes/Passes.h"

namespace dtc::passes {

std::unique_ptr<Pass> createPassByName(const std::string &name) {
  if (name == "canonicalize")
    return createCanonicalizePass();
  if (name == "shape-inference")
    return createShapeInferencePass();
  if (name == "verify")
    return createVerifyPass();
  if (name == "training-mode")
    return createTrainingModePass();
  if (name == "attach-loss")
    return createAttachLossPass();
  if (name == "mixed-precision")
    return createMixedPrecisionPass();
  if (name == "autodiff")
    return createAutodiffPass();
  if (name == "optimizer")
    return createOptimizerPass();
  if (name == "data-parallel")
    return createDataParallelPass();
  if (name == "tensor-parallel")
    return createTensorParallelPass();
  if (name == "pipeline")
    return createPipelinePass();
  if (name == "pipeline-comm")
    return createPipelineCommPass();
  return nullptr;
}

std::vector<std::string> allPassNames() {
  return {"canonicalize",    "shape-inference", "training-mode",   "attach-loss",
          "tensor-parallel", "pipeline",        "mixed-precision", "autodiff",
          "data-parallel",   "optimizer",       "pipeline-comm",   "verify"};
}

// canonicalize re-infers shapes as it folds and ends with every type inferred, so a separate
// shape-inference pass would only repeat its last round.
std::vector<std::string> defaultPipeline() { return {"canonicalize"}; }

} // namespace dtc::passes
