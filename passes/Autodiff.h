// Reverse-mode automatic differentiation over a whole graph (DESIGN.md section 5), as a
// function for tests and other passes; the `autodiff` pass (Passes.h) calls it for the training
// loss and the trained parameters.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Status.h"

#include <functional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace dtc::passes {

/// Appends to `graph` the backward nodes (phase kBackward) computing d(sum of loss)/d(w) for
/// each w in `wrt`, and returns the gradient values in the same order (nullptr where the loss
/// does not depend on w). `loss` is any float value (a scalar for training); its gradient seed is
/// ones. Shapes must be static. Values used several times accumulate their gradients (Add);
/// integer and bool values carry none. Gradient rules come from each op's OpDef::gradient.
/// Errors: a differentiable path through an op without a rule ("node 'x' (Op): no gradient
/// rule; the loss depends on 'w' through it: w -> a (Conv) -> x (Op)"), a rule that leaves a
/// needed input without a gradient, or one whose gradient has the wrong type.
/// Values in `stop` carry no gradient (torch.no_grad: running statistics a step computes, which
/// a pipeline's next micro-batch reads).
/// A parameter (an initializer in `wrt`) read only by inputs whose rule gives no gradient (a
/// Resize's scales that an exporter stored as an initializer) gets a null gradient and a warning
/// naming the node; one also read where a gradient flows is an error, as above. When `constants`
/// is given, such parameters are appended to it. `seed` (an f32[] value, loss scaling's scale),
/// when given, replaces the ones of the loss's gradient seed (every gradient is then scaled by
/// it).
Expected<std::vector<ir::Value *>>
buildGradients(ir::Graph &graph, ir::Value *loss, const std::vector<ir::Value *> &wrt,
               Diagnostics &diags, const std::unordered_set<const ir::Value *> &stop = {},
               std::vector<const ir::Value *> *constants = nullptr, ir::Value *seed = nullptr);

/// The --freeze matcher: compiles `pattern` (the ECMAScript-style syntax the README documents)
/// into a predicate that is true when the pattern matches anywhere in a name (a search, as
/// std::regex_search). Matching is LLVM's POSIX extended regular expression engine (llvm::Regex,
/// a state-set simulation: no recursion on the name, so any name length is safe). The
/// ECMAScript forms without an ERE equivalent are translated: \d \w \s (and \D \W \S) become
/// POSIX classes, a lazy quantifier (*? +? ?? {m,n}?) matches as its greedy form (the same names
/// match). Refused with an error naming the construct: (?...) groups (non-capturing, lookahead),
/// back-references, \b \B, and a backslash inside a bracket expression other than \d \w \s.
Expected<std::function<bool(std::string_view)>> compileFreezePattern(const std::string &pattern);

} // namespace dtc::passes
