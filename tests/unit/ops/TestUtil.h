// Helpers for unit tests: import a model written in ONNX text syntax and run passes on it.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Status.h"

#include <memory>
#include <string>
#include <vector>

namespace dtc::test {

/// Parses `text` (ONNX text syntax: `<ir_version: 8, opset_import: ["" : 13]> graph (...) {...}`)
/// with libonnx's parser and imports it (import errors are returned, parse errors too).
Expected<std::unique_ptr<ir::Graph>> importText(const std::string &text,
                                                Diagnostics *diags = nullptr);

/// importText, then runs the named passes in order (default: shape-inference).
Expected<std::unique_ptr<ir::Graph>>
compileText(const std::string &text, const std::vector<std::string> &passes = {"shape-inference"},
            Diagnostics *diags = nullptr);

/// Type of the value named `name` as text ("f32[N,3]"), or "<missing>".
std::string typeOf(const ir::Graph &g, const std::string &name);

/// A tensor type from a dtype name and dims written as text: "f32", {"N", "3", "?"} (symbols,
/// static sizes, unknown dims).
ir::TensorType ty(const std::string &dtype, const std::vector<std::string> &dims);

/// The message of an error, or "<ok>".
std::string errorOf(const Status &s);

/// A one-op graph at a given opset, driven as the importer and the shape-inference pass do:
/// in()/constant()/axes() create inputs, op() the node (named "n", outputs are graph outputs),
/// normalize() checks the form for the opset and rewrites it to the canonical form, infer()
/// runs shape inference.
struct OneOp {
  std::unique_ptr<ir::Graph> g = std::make_unique<ir::Graph>();
  ir::Node *node = nullptr;
  int64_t opset;
  Diagnostics diags;

  explicit OneOp(int64_t opsetVersion);
  ir::Value *in(const std::string &name, ir::TensorType t);
  ir::Value *constant(const std::string &name, ir::TensorDataPtr data);
  /// An i64[k] constant named "axes".
  ir::Value *axes(std::vector<int64_t> values);
  ir::Node *op(const std::string &type, std::vector<ir::Value *> inputs,
               std::vector<std::string> outputs = {"y"});
  Status normalize();
  /// Shape inference; output types from an earlier run are cleared first (else they would be
  /// merged as declared types).
  Status infer();
  Status run();
  std::string type(const std::string &name) const { return typeOf(*g, name); }
};

} // namespace dtc::test
