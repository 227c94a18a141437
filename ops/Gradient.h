// The gradient facet of an operator (DESIGN.md section 4): a GradFn, kept in the op's own file
// in ops/, emits the backward nodes of one forward node. The autodiff pass (passes/Autodiff.cpp)
// walks the graph in reverse, sums the gradients of values used several times, and calls the
// rule of every node that lies on a path from a trained parameter to the loss.
//
// Conventions every rule follows (tested by finite differences, tests/unit/training):
// - shapes are static when autodiff runs (training plans bind every dim first);
// - a rule sets the gradient of each input it is asked for (needsGrad) and may skip the others;
//   integer and bool inputs never need one;
// - broadcasting is undone by sumToShape (ReduceSum over the broadcast axes, then Reshape);
// - ties: MaxPool sends the gradient to the first maximal element of the window, ReduceMax
//   splits it evenly among tied maxima (as PyTorch's amax); Where sends zero to the unselected
//   branch; Relu and Abs give 0 at 0 and Sqrt +inf at 0, as PyTorch does; each rule's comment
//   states its convention and the formula's source.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Status.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dtc::ops {

/// What a gradient rule sees: the forward node, the gradients of its outputs, which inputs need
/// a gradient, and helpers that append backward nodes (phase kBackward) to the graph.
class GradientContext {
public:
  GradientContext(ir::Graph &graph, ir::Node &node, std::vector<ir::Value *> outputGrads,
                  std::vector<bool> needsGrad, Diagnostics &diags);

  ir::Graph &graph() { return graph_; }
  ir::Node &node() { return node_; }
  /// Forward input / output i (nullptr when an optional one is omitted).
  ir::Value *input(size_t i) const { return node_.input(i); }
  ir::Value *output(size_t i) const { return node_.output(i); }
  /// Gradient of the loss with respect to output i (same dtype and shape), or nullptr when output
  /// i does not reach the loss (its gradient is zero).
  ir::Value *outputGrad(size_t i) const { return i < outputGrads_.size() ? outputGrads_[i] : nullptr; }
  /// Whether input i lies on a path from a trained parameter (its gradient is wanted).
  bool needsGrad(size_t i) const { return i < needsGrad_.size() && needsGrad_[i]; }
  /// Records the gradient of input i; its dtype and shape must equal the input's (checked by the
  /// autodiff pass, which names the node on a mismatch).
  void setInputGrad(size_t i, ir::Value *grad);
  ir::Value *inputGrad(size_t i) const { return i < inputGrads_.size() ? inputGrads_[i] : nullptr; }

  /// Appends a backward node `op` (domain "" = ONNX, or "ai.dtc") after every node so far, named
  /// after the forward node, and infers its outputs' types with the op's definition (the op must
  /// be registered in ops/Ops.def). Errors name the forward node and the emitted op.
  Expected<std::vector<ir::Value *>> emit(const std::string &op,
                                          const std::vector<ir::Value *> &inputs,
                                          size_t numOutputs,
                                          const std::map<std::string, ir::Attribute> &attrs = {},
                                          const std::string &domain = "");
  /// emit() for a node with one output.
  Expected<ir::Value *> emit1(const std::string &op, const std::vector<ir::Value *> &inputs,
                              const std::map<std::string, ir::Attribute> &attrs = {},
                              const std::string &domain = "");
  /// A new f32 constant (scalar when dims is empty; every element = value).
  ir::Value *constantF32(float value, const std::vector<int64_t> &dims = {});
  /// A new f32 constant with the given elements and dims.
  ir::Value *constantF32s(const std::vector<float> &values, const std::vector<int64_t> &dims);
  /// A new 1-D int64 constant (shapes, axes).
  ir::Value *constantI64s(const std::vector<int64_t> &values);
  /// Undoes multidirectional broadcasting (ONNX Broadcasting.md): sums `grad`, whose shape is
  /// the broadcast result, over the axes that `target` broadcast along, and reshapes to `target`.
  /// Returns `grad` itself when the shapes are equal.
  Expected<ir::Value *> sumToShape(ir::Value *grad, const ir::Shape &target);
  /// grad reshaped to `shape` (static sizes); `grad` itself when equal.
  Expected<ir::Value *> reshapeTo(ir::Value *grad, const std::vector<int64_t> &shape);

  /// "node 'x' (Op): <what>".
  Status error(const std::string &what) const { return Status::error(node_.where(), what); }
  Diagnostics &diags() { return diags_; }

private:
  ir::Graph &graph_;
  ir::Node &node_;
  std::vector<ir::Value *> outputGrads_;
  std::vector<bool> needsGrad_;
  std::vector<ir::Value *> inputGrads_;
  Diagnostics &diags_;
};

/// A gradient rule. Absent (empty std::function) means the op has no rule: a differentiable path
/// through it is an error naming the node and the parameter.
using GradFn = std::function<Status(GradientContext &)>;

/// Infers the output types of one node from its op's definition (type constraints, then the
/// infer function). Used for nodes made after shape inference ran (backward, optimizer).
Status inferNode(ir::Node &node, Diagnostics &diags);

} // namespace dtc::ops
