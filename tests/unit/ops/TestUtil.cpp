// Test helpers: ONNX text -> IR, pass runs.
#include "tests/unit/ops/TestUtil.h"

#include "compiler/onnx/Importer.h"
#include "ops/OpDef.h"
#include "passes/Passes.h"

#include <cctype>

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

ir::TensorType ty(const std::string &dtype, const std::vector<std::string> &dims) {
  std::vector<ir::Dim> ds;
  for (const std::string &d : dims)
    ds.push_back(d == "?"                                         ? ir::Dim::unknown()
                 : std::isdigit(static_cast<unsigned char>(d[0])) ? ir::Dim::fixed(std::stoll(d))
                                                                  : ir::Dim::symbol(d));
  return ir::TensorType{*ir::dtypeFromName(dtype), ir::Shape(ds)};
}

std::string errorOf(const Status &s) { return s.isOk() ? "<ok>" : s.message(); }

OneOp::OneOp(int64_t opsetVersion) : opset(opsetVersion) { g->setOpset("", opset); }

ir::Value *OneOp::in(const std::string &name, ir::TensorType t) {
  ir::Value *v = g->createValue(name, std::move(t));
  g->addInput(v);
  return v;
}

ir::Value *OneOp::constant(const std::string &name, ir::TensorDataPtr data) {
  return g->addConstant(name, std::move(data));
}

ir::Value *OneOp::axes(std::vector<int64_t> values) {
  return g->addConstant(
      "axes", ir::TensorData::fromInt64s("axes", {static_cast<int64_t>(values.size())}, values));
}

ir::Node *OneOp::op(const std::string &type, std::vector<ir::Value *> inputs,
                    std::vector<std::string> outputs) {
  node = g->addNode(type, inputs, outputs, "", "n");
  for (ir::Value *o : node->outputs())
    g->addOutput(o);
  return node;
}

Status OneOp::normalize() {
  const ops::OpDef *def = ops::lookupOp("", node->opType());
  if (!def)
    return Status::error(node->where(), "no definition");
  const ops::OpVersion *v = def->versionFor(opset);
  if (!v)
    return Status::error(node->where(), "not in opset " + std::to_string(opset));
  DTC_RETURN_IF_ERROR(ops::checkForm(*node, *v, opset));
  if (def->normalize) {
    ops::NormalizeContext nctx(*g, opset, diags);
    DTC_RETURN_IF_ERROR(def->normalize(*node, nctx));
  }
  return Status::ok();
}

Status OneOp::infer() {
  for (ir::Node *n : g->nodes())
    for (ir::Value *o : n->outputs())
      o->setType({});
  passes::PassContext ctx;
  return passes::createPassByName("shape-inference")->run(*g, ctx);
}

Status OneOp::run() {
  DTC_RETURN_IF_ERROR(normalize());
  return infer();
}

std::string typeOf(const ir::Graph &g, const std::string &name) {
  const ir::Value *v = g.findValue(name);
  return v ? v->type().str() : "<missing>";
}

} // namespace dtc::test
