// Finite-difference gradient checking for one operator: builds a one-node graph, a loss
// L = sum_o sum(Y_o * R_o) with fixed random R_o, differentiates it with the autodiff pass,
// lowers it to a plan and runs it on the CPU kernels, and compares every checked gradient
// element with the central difference (L(x+h) - L(x-h)) / 2h computed with the same plan.
#pragma once

#include "compiler/ir/Attribute.h"
#include "compiler/ir/Graph.h"
#include "compiler/ir/Types.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dtc::test {

struct GradInput {
  std::string name;
  std::vector<int64_t> shape;
  ir::DType dtype = ir::DType::kFloat32;
  /// f32 contents; uniform random in [lo, hi] when empty.
  std::vector<float> values;
  /// int64 / bool contents (indices, axes, shapes, masks).
  std::vector<int64_t> ints;
  /// Checked against finite differences (f32 inputs only).
  bool differentiable = true;
  /// An initializer constant (shapes, axes, fixed operands) instead of a graph input.
  bool constant = false;
  float lo = -1.0f;
  float hi = 1.0f;

  /// An f32 graph input (random in [-1, 1] unless values are given), checked.
  static GradInput f32(std::string name, std::vector<int64_t> shape,
                       std::vector<float> values = {}) {
    GradInput g;
    g.name = std::move(name);
    g.shape = std::move(shape);
    g.values = std::move(values);
    return g;
  }
  /// An int64 constant (axes, shapes, indices) unless asInput() is called.
  static GradInput i64(std::string name, std::vector<int64_t> shape, std::vector<int64_t> ints) {
    GradInput g;
    g.name = std::move(name);
    g.shape = std::move(shape);
    g.dtype = ir::DType::kInt64;
    g.ints = std::move(ints);
    g.constant = true;
    g.differentiable = false;
    return g;
  }
  /// A bool graph input (masks, conditions).
  static GradInput boolean(std::string name, std::vector<int64_t> shape, std::vector<int64_t> ints) {
    GradInput g = i64(std::move(name), std::move(shape), std::move(ints));
    g.dtype = ir::DType::kBool;
    g.constant = false;
    return g;
  }
  /// An omitted optional input.
  static GradInput omitted() { return GradInput{}; }
  GradInput &fixed() { differentiable = false; return *this; }
  GradInput &asConstant() { constant = true; differentiable = false; return *this; }
  GradInput &asInput() { constant = false; return *this; }
  GradInput &range(float l, float h) { lo = l; hi = h; return *this; }
};

struct GradCheckOptions {
  /// Central-difference step (f32 arithmetic: 1e-2 keeps rounding error small).
  double step = 1e-2;
  /// |analytic - numeric| <= atol + rtol * |numeric| for every checked element.
  double atol = 2e-3;
  double rtol = 2e-2;
  /// Elements checked per input (evenly spread; all when the input is smaller).
  int64_t maxElements = 48;
  uint32_t seed = 1;
  /// Outputs that enter the loss (default: every float output).
  std::vector<size_t> lossOutputs;
  /// Lower with channels-last layouts where kernels take them (exercises the layout paths).
  bool channelsLast = false;
};

/// n values with |x| uniform in [lo, hi] and a random sign from `seed` (test data away from the
/// kinks at 0 of Relu, Abs, PRelu, ...).
std::vector<float> awayFromZero(size_t n, uint32_t seed = 7, float lo = 0.1f, float hi = 1.0f);

/// n distinct values 0.05 apart in a scrambled order, in [-1, 1): no two elements closer than the
/// finite-difference step (the maximum or minimum of a slice does not switch between x + h and
/// x - h).
std::vector<float> distinct(int64_t n);

/// Returns "" when every checked gradient matches, else a description of the first failure
/// (an autodiff, lowering or kernel error, or "input 'x' element 3: analytic 0.5 numeric 0.7").
std::string gradCheck(const std::string &op, const std::vector<GradInput> &inputs,
                      const std::map<std::string, ir::Attribute> &attrs, size_t numOutputs = 1,
                      const GradCheckOptions &opts = {}, const std::string &domain = "");

/// gradCheck on a whole graph (for example an imported model after shape inference): `inputs`
/// name its graph inputs (static f32 inputs are checked); the loss is built from the values
/// named `outputs`, which replace the graph's outputs. `label` prefixes failure messages.
std::string gradCheckGraph(ir::Graph &g, const std::vector<std::string> &outputs,
                           const std::vector<GradInput> &inputs, const GradCheckOptions &opts = {},
                           const std::string &label = "graph");

} // namespace dtc::test
