// Test helpers: ONNX text -> IR, pass runs.
#include "tests/unit/ops/TestUtil.h"

#include "compiler/onnx/Importer.h"
#include "passes/Passes.h"

#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

namespace dtc::test {

Expected<std::unique_ptr<ir::Graph>> importText(const std::string &text, Diagnostics *diags) {
  onnx::ModelProto model;
  onnx::OnnxParser parser(text.c_str());
  auto status = parser.Parse(model);
  if (!status.IsOK())
    return Status::error("<text>", "parse error: " + status.ErrorMessage());
  Diagnostics local;
  return onnxio::importModelProto(model, ".", "<text>", diags ? *diags : local);
}

Expected<std::unique_ptr<ir::Graph>> compileText(const std::string &text,
                                                 const std::vector<std::string> &passNames,
                                                 Diagnostics *diags) {
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> g, importText(text, diags));
  passes::PassContext ctx;
  for (const std::string &name : passNames) {
    std::unique_ptr<passes::Pass> p = passes::createPassByName(name);
    if (!p)
      return Status::error("unknown pass " + name);
    DTC_RETURN_IF_ERROR(p->run(*g, ctx));
  }
  if (diags)
    for (const Diagnostic &d : ctx.diags.items())
      diags->warning("", d.message);
  return g;
}

std::string typeOf(const ir::Graph &g, const std::string &name) {
  const ir::Value *v = g.findValue(name);
  return v ? v->type().str() : "<missing>";
}

} // namespace dtc::test
