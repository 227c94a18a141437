// Deterministic textual form of the IR, used by `dtc-compile --emit ir` and lit tests.
// Values print as %name with their type; attributes sorted by name; annotations only when set.
//
//   graph main opset(ai.onnx=13)
//     input %x : f32[N,784]
//     param %w : f32[128,784]
//     %h : f32[N,128] = Gemm "fc1" (%x, %w, _) {transB=1}
//     output %h
//     training {                      (training graphs: the roles of compiler/ir/Training.h)
//       loss %loss
//       parameter %w gradient %w.grad state (%w.momentum)
//       update %w <- %w/updated
//       optimizer-begin "w/SGD"
//     }
#pragma once

#include "compiler/ir/Graph.h"

#include <ostream>
#include <string>

namespace dtc::ir {

void printGraph(const Graph &g, std::ostream &os);
/// The `training { ... }` block of printGraph (nothing for empty roles).
void printTraining(const TrainingRoles &t, std::ostream &os);
std::string printGraph(const Graph &g);
/// Graphviz dot: one box per node, edges labelled with value names and types.
void printDot(const Graph &g, std::ostream &os);
/// A human summary: source model, inputs, outputs, parameter count and bytes, node count per
/// operator type.
void printSummary(const Graph &g, std::ostream &os);
/// One node in the same form as printGraph (no indentation, no newline).
std::string printNode(const Node &n);

} // namespace dtc::ir
