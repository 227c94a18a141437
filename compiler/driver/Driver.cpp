// Import + pass pipeline.
#include "compiler/driver/Driver.h"

#include "compiler/ir/Verifier.h"
#include "compiler/onnx/Importer.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"

namespace dtc::driver {

Expected<std::unique_ptr<ir::Graph>> compileModel(const CompileOptions &opts, Diagnostics &diags) {
  std::vector<std::string> names = opts.useDefaultPipeline ? passes::defaultPipeline() : opts.passes;
  passes::PassManagerOptions pmOptions;
  pmOptions.verifyEach = opts.verifyEach;
  pmOptions.printAfter = opts.printAfter;
  pmOptions.timePasses = opts.timePasses;
  pmOptions.printStream = opts.printStream;
  pmOptions.timeStream = opts.timeStream;
  passes::PassManager pm(pmOptions);
  for (const std::string &n : names) {
    std::unique_ptr<passes::Pass> p = passes::createPassByName(n);
    if (!p) {
      std::string known;
      for (const std::string &k : passes::allPassNames())
        known += (known.empty() ? "" : ", ") + k;
      return Status::error("--passes", "unknown pass '" + n + "' (known: " + known + ")");
    }
    pm.add(std::move(p));
  }
  for (const std::string &n : opts.printAfter)
    if (n != "all" && !passes::createPassByName(n))
      return Status::error("--print-after", "unknown pass '" + n + "'");

  DTC_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> graph,
                       onnxio::importModelFile(opts.modelPath, diags,
                                               {/*untieInitializers=*/opts.untieInitializers}));
  if (opts.verifyEach) {
    Status s = ir::verifyGraph(*graph);
    if (!s.isOk())
      return Status::error("after import: " + s.message());
  }
  passes::PassContext ctx;
  if (opts.inference)
    ctx.options.emplace("inference", "1");
  Status s = pm.run(*graph, ctx);
  for (const Diagnostic &d : ctx.diags.items()) {
    if (d.severity == Severity::kWarning)
      diags.warning("", d.message);
    else
      diags.note("", d.message);
  }
  DTC_RETURN_IF_ERROR(s);
  return graph;
}

} // namespace dtc::driver
