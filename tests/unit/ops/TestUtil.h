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

} // namespace dtc::test
