// autodiff: reverse-mode differentiation of the training loss with respect to every trained
// parameter. Walks the forward nodes in reverse order, sums the gradients of values used
// several times, and calls each op's gradient rule (ops/<family>/<Op>.cpp, OpDef::gradient).
#include "passes/Autodiff.h"

#include "ops/OpDef.h"
#include "passes/Passes.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Regex.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace dtc::passes {
namespace {

/// "w -> conv1 (Conv) -> relu1 (Relu)": a chain of nodes from one of `sources` to `target`'s
/// inputs, through values in `varying`.
std::string pathTo(const ir::Node &target, const std::unordered_set<const ir::Value *> &sources,
                   const std::unordered_set<const ir::Value *> &varying) {
  // Walk backwards from the target's inputs to a source, remembering the chain.
  std::vector<const ir::Node *> chain;
  const ir::Node *cur = &target;
  std::unordered_set<const ir::Node *> seen;
  while (cur && seen.insert(cur).second) {
    chain.push_back(cur);
    const ir::Value *next = nullptr;
    for (const ir::Value *in : cur->inputs())
      if (in && varying.count(in)) {
        next = in;
        if (sources.count(in))
          break;
      }
    if (!next)
      break;
    if (sources.count(next)) {
      std::string out = "'" + next->name() + "'";
      for (auto it = chain.rbegin(); it != chain.rend(); ++it)
        out += " -> " + (*it)->name() + " (" + (*it)->opType() + ")";
      return out;
    }
    cur = next->producer();
  }
  return "'" + target.name() + "'";
}

} // namespace

namespace {

/// The index of the first static dimension of size 0 of `v`'s shape, or -1.
int zeroSizedDim(const ir::Value *v) {
  if (!v || !v->shape().hasRank())
    return -1;
  for (size_t d = 0; d < v->shape().rank(); ++d)
    if (v->shape()[d].isStatic() && v->shape()[d].value() == 0)
      return static_cast<int>(d);
  return -1;
}

} // namespace

Expected<std::vector<ir::Value *>>
buildGradients(ir::Graph &graph, ir::Value *loss, const std::vector<ir::Value *> &wrt,
               Diagnostics &diags, const std::unordered_set<const ir::Value *> &stop,
               std::vector<const ir::Value *> *constants, ir::Value *seedValue) {
  if (!loss || !ir::isFloat(loss->dtype()) || !loss->shape().isStatic())
    return Status::error("autodiff", "the loss '" + (loss ? loss->name() : std::string("?")) +
                                         "' must be a float tensor with a static shape");
  const std::vector<ir::Node *> forward = graph.nodes();

  // Values that depend on a wrt value (through float values), and values the loss depends on.
  std::unordered_set<const ir::Value *> sources(wrt.begin(), wrt.end());
  std::unordered_set<const ir::Value *> varying(wrt.begin(), wrt.end());
  for (const ir::Node *n : forward) {
    bool any = false;
    for (const ir::Value *in : n->inputs())
      any = any || (in && varying.count(in));
    if (any)
      for (const ir::Value *out : n->outputs())
        if (out && ir::isFloat(out->dtype()) && !stop.count(out))
          varying.insert(out);
  }
  std::unordered_set<const ir::Value *> useful{loss};
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    bool any = false;
    for (const ir::Value *out : (*it)->outputs())
      any = any || (out && useful.count(out));
    if (any)
      for (const ir::Value *in : (*it)->inputs())
        if (in)
          useful.insert(in);
  }
  auto needs = [&](const ir::Value *v) {
    return v && ir::isFloat(v->dtype()) && varying.count(v) && useful.count(v);
  };

  // Gradient contributions per value, summed when first read.
  std::unordered_map<const ir::Value *, std::vector<ir::Value *>> contributions;
  auto total = [&](const ir::Value *v) -> Expected<ir::Value *> {
    auto it = contributions.find(v);
    if (it == contributions.end() || it->second.empty())
      return static_cast<ir::Value *>(nullptr);
    std::vector<ir::Value *> &parts = it->second;
    // Pipelines: sum in micro-batch order (the order the schedule computes the parts), so each
    // part is added as soon as it is ready. The sum runs on the stage of the value's producer
    // (its consumers' stages send their parts there), or for a parameter on its consumers'.
    auto microBatchOf = [](const ir::Value *p) {
      return p->producer() ? p->producer()->microBatch() : -1;
    };
    // Per-step parts (-1: a gradient received once the whole pipeline is done, a tied weight's
    // other stage) come last, so that the micro-batch parts are added while they arrive.
    auto order = [&](const ir::Value *p) {
      const int m = microBatchOf(p);
      return m < 0 ? std::numeric_limits<int>::max() : m;
    };
    std::stable_sort(parts.begin(), parts.end(),
                     [&](const ir::Value *a, const ir::Value *b) { return order(a) < order(b); });
    // Parts all computed on one stage are summed there (one transfer of the sum); parts of
    // several stages meet on the producer's.
    int stage = v->producer() ? v->producer()->stage() : -1;
    if (!v->producer())
      for (const ir::Use &u : v->uses())
        stage = std::max(stage, u.node->stage());
    auto stageOf = [](const ir::Value *p) { return p->producer() ? p->producer()->stage() : -1; };
    if (std::all_of(parts.begin(), parts.end(),
                    [&](const ir::Value *p) { return stageOf(p) == stageOf(parts[0]); }) &&
        stageOf(parts[0]) >= 0)
      stage = stageOf(parts[0]);
    ir::Value *sum = parts[0];
    for (size_t i = 1; i < parts.size(); ++i) {
      // Named after the micro-batch whose part it adds, so that a pipeline stage's slots differ
      // only in that name (plan compaction stores one slot and the others' differences).
      // (A micro-batch's own value already carries it.)
      const int partMb = microBatchOf(parts[i]);
      const bool perStep = !v->producer() || v->producer()->microBatch() != partMb;
      const std::string name =
          graph.uniqueName(v->name() + "/grad_sum" +
                           (perStep && partMb > 0 ? "/microbatch" + std::to_string(partMb) : ""));
      ir::Node *add = graph.addNode("Add", {sum, parts[i]}, {name}, "", name);
      add->setPhase(ir::Phase::kBackward);
      add->setStage(stage);
      add->setMicroBatch(microBatchOf(sum) == microBatchOf(parts[i]) ? microBatchOf(sum) : -1);
      DTC_RETURN_IF_ERROR(ops::inferNode(*add, diags));
      sum = add->output(0);
    }
    parts = {sum};
    return sum;
  };

  if (needs(loss) || sources.count(loss)) {
    const std::string name = graph.uniqueName(loss->name() + "/grad_seed");
    std::vector<int64_t> dims = loss->shape().staticSizes();
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    ir::Value *seed = graph.addConstant(
        name,
        ir::TensorData::fromFloats(name, dims, std::vector<float>(static_cast<size_t>(n), 1.f)));
    if (seedValue) {
      // Loss scaling: ones * scale (broadcast to the loss's shape).
      const std::string sname = graph.uniqueName(name + "_scaled");
      ir::Node *mul = graph.addNode("Mul", {seed, seedValue}, {sname}, "", sname);
      mul->setPhase(ir::Phase::kBackward);
      mul->setStage(loss->producer() ? loss->producer()->stage() : -1);
      DTC_RETURN_IF_ERROR(ops::inferNode(*mul, diags));
      seed = mul->output(0);
    }
    if (loss->dtype() != ir::DType::kFloat32) {
      const std::string cname = graph.uniqueName(name + "_cast");
      ir::Node *cast = graph.addNode("Cast", {seed}, {cname}, "", cname);
      cast->setAttr("to", ir::Attribute(static_cast<int64_t>(loss->dtype())));
      cast->setPhase(ir::Phase::kBackward);
      cast->setStage(loss->producer() ? loss->producer()->stage() : -1);
      DTC_RETURN_IF_ERROR(ops::inferNode(*cast, diags));
      seed = cast->output(0);
    }
    contributions[loss].push_back(seed);
  }

  // A 0-sized tensor on the way to the loss (a Gemm with 0 output features, a Conv with 0
  // filters) has nothing to train, and the gradient rules' internal nodes would fail on it
  // with names the user never wrote: name the first such node of the model, in forward order.
  for (const ir::Node *n : forward) {
    for (size_t i = 0; i < n->numInputs() + n->numOutputs(); ++i) {
      const bool isInput = i < n->numInputs();
      const size_t k = isInput ? i : i - n->numInputs();
      const ir::Value *v = isInput ? n->input(k) : n->output(k);
      const int dim = needs(v) ? zeroSizedDim(v) : -1;
      if (dim < 0)
        continue;
      return Status::error(n->where(),
                           std::string(isInput ? "input " : "output ") + std::to_string(k) + " '" +
                               v->name() + "' is " + v->type().str() + ": dimension " +
                               std::to_string(dim) +
                               " is 0, so the loss depends on an empty tensor and there is "
                               "nothing to train (a layer with 0 features?); fix the model's "
                               "shapes");
    }
  }

  // Trained initializers read by an input without a gradient: (value, node, input index).
  std::vector<std::tuple<ir::Value *, const ir::Node *, size_t>> nonDifferentiableUses;
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    ir::Node *n = *it;
    std::vector<bool> needInput(n->numInputs(), false);
    bool anyNeeded = false;
    for (size_t i = 0; i < n->numInputs(); ++i) {
      needInput[i] = needs(n->input(i));
      anyNeeded = anyNeeded || needInput[i];
    }
    if (!anyNeeded)
      continue;
    std::vector<ir::Value *> outGrads(n->numOutputs(), nullptr);
    bool anyGrad = false;
    for (size_t o = 0; o < n->numOutputs(); ++o) {
      if (!n->output(o))
        continue;
      DTC_ASSIGN_OR_RETURN(outGrads[o], total(n->output(o)));
      anyGrad = anyGrad || outGrads[o];
    }
    if (!anyGrad)
      continue;
    const ops::OpDef *def = ops::lookupOp(n->domain(), n->opType());
    if (!def || !def->gradient)
      return Status::error(n->where(), "no gradient rule; the loss depends on " +
                                           pathTo(*n, sources, varying) + " through it");
    ops::GradientContext gctx(graph, *n, outGrads, needInput, diags);
    DTC_RETURN_IF_ERROR(def->gradient(gctx));
    for (size_t i = 0; i < n->numInputs(); ++i) {
      if (!needInput[i])
        continue;
      ir::Value *g = gctx.inputGrad(i);
      ir::Value *in = n->input(i);
      if (!g && sources.count(in) && in->isParameter()) {
        // A trained initializer read directly by an input without a gradient (a Resize's
        // scales or roi that tf2onnx stores as initializers): that use does not train it. It
        // must have no other, differentiable use either (checked below), or its gradient would
        // silently miss a part.
        nonDifferentiableUses.emplace_back(in, n, i);
        continue;
      }
      if (!g)
        return Status::error(n->where(), "no gradient with respect to input " + std::to_string(i) +
                                             " ('" + in->name() + "'); the loss depends on " +
                                             pathTo(*n, sources, varying) + " through it");
      if (g->type() != in->type())
        return Status::error(n->where(), "gradient rule gave " + g->type().str() + " for input " +
                                             std::to_string(i) + " ('" + in->name() +
                                             "'), which is " + in->type().str());
      contributions[in].push_back(g);
    }
  }

  for (const auto &[param, n, i] : nonDifferentiableUses) {
    if (!contributions[param].empty())
      return Status::error(n->where(), "no gradient with respect to input " + std::to_string(i) +
                                           " ('" + param->name() +
                                           "'), which other nodes train; the loss depends on " +
                                           pathTo(*n, sources, varying) + " through it");
    diags.warning("parameter '" + param->name() + "'",
                  "read only where no gradient flows (input " + std::to_string(i) + " of " +
                      n->where() + "): a constant stored as an initializer, not trained (--freeze "
                      "it to silence this)");
    if (constants)
      constants->push_back(param);
  }

  std::vector<ir::Value *> grads;
  for (ir::Value *w : wrt) {
    DTC_ASSIGN_OR_RETURN(ir::Value * g, total(w));
    grads.push_back(g);
  }
  return grads;
}

namespace {

/// The ERE form of an ECMAScript-style pattern (see compileFreezePattern), or an error.
Expected<std::string> toExtendedRegex(const std::string &pattern) {
  auto refuse = [&](const std::string &what) -> Status {
    return Status::error("--freeze '" + pattern + "'",
                         what + " is not supported (--freeze uses POSIX extended regular "
                                "expressions, with \\d \\w \\s; see the README)");
  };
  std::string out;
  bool inBracket = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (inBracket) {
      // "[:alpha:]", "[.x.]" and "[=x=]" pass as they are.
      if (c == '[' && i + 1 < pattern.size() &&
          (pattern[i + 1] == ':' || pattern[i + 1] == '.' || pattern[i + 1] == '=')) {
        size_t close = pattern.find(std::string(1, pattern[i + 1]) + "]", i + 2);
        if (close == std::string::npos)
          return refuse("an unterminated '[" + std::string(1, pattern[i + 1]) + "' class");
        out.append(pattern, i, close + 2 - i);
        i = close + 1;
        continue;
      }
      if (c == '\\') {
        if (i + 1 >= pattern.size())
          return refuse("a trailing backslash");
        const char e = pattern[++i];
        if (e == 'd')
          out += "[:digit:]";
        else if (e == 'w')
          out += "[:alnum:]_";
        else if (e == 's')
          out += "[:space:]";
        else if (std::string_view("]\\^-[").find(e) == std::string_view::npos)
          out += e; // "[\.]" means '.', as POSIX "[.]"
        else
          return refuse(std::string("'\\") + e + "' inside a bracket expression");
        continue;
      }
      out += c;
      if (c == ']')
        inBracket = false; // a leading ']' was taken with the '['
      continue;
    }
    switch (c) {
    case '[':
      inBracket = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^')
        out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']')
        out += pattern[++i]; // a leading ']' is a literal
      break;
    case '(':
      if (i + 1 < pattern.size() && pattern[i + 1] == '?')
        return refuse("a '(?' group (non-capturing or lookaround)");
      out += c;
      break;
    case '*':
    case '+':
    case '?':
    case '}':
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '?')
        ++i; // lazy: matches the same names as greedy
      break;
    case '\\': {
      if (i + 1 >= pattern.size())
        return refuse("a trailing backslash");
      const char e = pattern[++i];
      switch (e) {
      case 'd':
        out += "[[:digit:]]";
        break;
      case 'D':
        out += "[^[:digit:]]";
        break;
      case 'w':
        out += "[[:alnum:]_]";
        break;
      case 'W':
        out += "[^[:alnum:]_]";
        break;
      case 's':
        out += "[[:space:]]";
        break;
      case 'S':
        out += "[^[:space:]]";
        break;
      default:
        if (std::isalnum(static_cast<unsigned char>(e)))
          return refuse(std::string("'\\") + e + "'");
        out += '\\';
        out += e; // an escaped special character: \. \( \* ...
      }
      break;
    }
    default:
      out += c;
    }
  }
  if (inBracket)
    return refuse("an unterminated '['");
  return out;
}

} // namespace

Expected<std::function<bool(std::string_view)>> compileFreezePattern(const std::string &pattern) {
  DTC_ASSIGN_OR_RETURN(std::string ere, toExtendedRegex(pattern));
  auto re = std::make_shared<llvm::Regex>(ere, llvm::Regex::NoFlags);
  std::string why;
  if (!re->isValid(why))
    return Status::error("--freeze '" + pattern + "'", "is not a valid regular expression: " + why);
  return std::function<bool(std::string_view)>(
      [re](std::string_view name) { return re->match(llvm::StringRef(name.data(), name.size())); });
}

namespace {

class AutodiffPass : public Pass {
public:
  std::string name() const override { return "autodiff"; }
  std::string description() const override {
    return "append the backward graph: gradients of the loss for every trained parameter";
  }
  Status run(ir::Graph &graph, PassContext &ctx) override {
    if (!ctx.training || !graph.training().loss)
      return Status::error("autodiff", "needs a training compilation with a loss (attach-loss "
                                       "runs first)");
    ir::TrainingRoles &st = graph.training();
    std::function<bool(std::string_view)> freeze;
    if (!ctx.training->freeze.empty()) {
      DTC_ASSIGN_OR_RETURN(freeze, compileFreezePattern(ctx.training->freeze));
    }
    st.parameters.clear();
    for (ir::Value *v : graph.initializers()) {
      if (!v->isParameter() || !ir::isFloat(v->dtype()) || !v->hasUses())
        continue;
      if (freeze && freeze(v->name()))
        continue;
      // Statistics a BatchNormalization only reads in training mode are state, not weights.
      if (isStateOnly(*v, st))
        continue;
      st.parameters.push_back(v);
    }
    // New values of running statistics carry no gradient (they are state, updated outside the
    // differentiated computation, as under torch.no_grad).
    std::unordered_set<const ir::Value *> stop;
    for (const ir::StateUpdate &u : st.updates)
      stop.insert(u.next);
    // A pipeline's micro-batch k reads micro-batch k-1's: those carry none either.
    for (const ir::Node *n : graph.nodes())
      if (n->domain() == ir::kDtcDomain && n->opType() == "BatchNormTraining")
        for (size_t o = 1; o <= 2 && o < n->numOutputs(); ++o) // running mean and variance
          if (n->output(o))
            stop.insert(n->output(o));
    // The global max of vocabulary-parallel cross-entropy (an all-reduce max over tp) only
    // shifts the logits for stability: a constant for the gradient, as in Megatron-LM.
    for (const ir::Node *n : graph.nodes())
      if (n->domain() == ir::kDtcDomain && n->opType() == "AllReduce" &&
          n->attrString("op", "") == "max")
        for (const ir::Value *o : n->outputs())
          if (o)
            stop.insert(o);
    for (const ir::Value *p : st.parameters)
      warnIfMerged(*p, ctx.diags);
    std::vector<const ir::Value *> constants;
    ir::Value *scale = nullptr;
    DTC_ASSIGN_OR_RETURN(scale, lossScale(graph, *ctx.training, ctx.diags));
    DTC_ASSIGN_OR_RETURN(st.gradients, buildGradients(graph, st.loss, st.parameters, ctx.diags,
                                                      stop, &constants, scale));
    for (size_t i = 0; i < st.parameters.size(); ++i)
      if (!st.gradients[i] && std::find(constants.begin(), constants.end(),
                                        st.parameters[i]) == constants.end())
        ctx.diags.warning("parameter '" + st.parameters[i]->name() + "'",
                          "no gradient reaches it (the loss does not depend on it, or only through "
                          "integer or bool values); it is not trained");
    return Status::ok();
  }

private:
  /// Loss scaling (--loss-scale; Micikevicius et al. 2018, torch.cuda.amp.GradScaler): the
  /// value the backward pass starts from, named ir::kLossScaleValue, or nullptr when off. A
  /// constant scale is a constant; a dynamic one is init * 2^e with e the zero-initialized state
  /// ir::kLossScaleLog2, which the optimizer pass updates (and makes optimizer state). Created
  /// after the trained parameters are chosen, so e is never one of them.
  static Expected<ir::Value *> lossScale(ir::Graph &graph, const TrainingConfig &cfg,
                                         Diagnostics &diags) {
    const std::string mode = cfg.lossScaleMode();
    if (mode == "off")
      return nullptr;
    if (mode != "dynamic") {
      const float s = std::strtof(mode.c_str(), nullptr);
      return graph.addConstant(ir::kLossScaleValue,
                               ir::TensorData::fromFloats(ir::kLossScaleValue, {}, {s}));
    }
    ir::Value *e = graph.createValue(ir::kLossScaleLog2);
    graph.setInitializer(e, ir::TensorData::zeros(ir::kLossScaleLog2, ir::DType::kFloat32, {}),
                         /*isConstant=*/false);
    const std::string two = graph.uniqueName("dtc::loss_scale.two");
    const std::string init = graph.uniqueName("dtc::loss_scale.init");
    ir::Value *twoV = graph.addConstant(two, ir::TensorData::fromFloats(two, {}, {2.f}));
    ir::Value *initV =
        graph.addConstant(init, ir::TensorData::fromFloats(init, {}, {cfg.lossScaleInit}));
    const std::string pw = graph.uniqueName("dtc::loss_scale.pow2");
    ir::Node *pow = graph.addNode("Pow", {twoV, e}, {pw}, "", pw);
    ir::Node *mul = graph.addNode("Mul", {initV, pow->output(0)}, {ir::kLossScaleValue}, "",
                                  ir::kLossScaleValue);
    for (ir::Node *n : {pow, mul}) {
      n->setPhase(ir::Phase::kBackward);
      DTC_RETURN_IF_ERROR(ops::inferNode(*n, diags));
    }
    return mul->output(0);
  }

  /// Issue 12: torch.onnx.export's default optimizer merges initializers with equal values
  /// (every LayerNorm's ones, every zero bias) into one, which then trains as one tied
  /// parameter: a different model. The sign of a merge is one parameter in the same slot (op
  /// type and input position) of several nodes; an intentional tie (GPT-2's token embedding,
  /// read by Gather and by the output MatMul) fills different slots and is not reported. A Cast
  /// is looked through (--precision gives each use of a weight its own cast: the slots are
  /// those of the nodes the casts feed).
  static void warnIfMerged(const ir::Value &p, Diagnostics &diags) {
    std::map<std::pair<std::string, unsigned>, std::vector<const ir::Node *>> slots;
    for (const ir::Use &u : p.uses()) {
      if (u.node->microBatch() > 0) // a pipeline's copies for micro-batches 1.. are not ties
        continue;
      if (u.node->domain().empty() && u.node->opType() == "Cast" && u.node->numOutputs() == 1) {
        for (const ir::Use &c : u.node->output(0)->uses())
          if (c.node->microBatch() <= 0)
            slots[{c.node->opType(), c.inputIndex}].push_back(c.node);
        continue;
      }
      slots[{u.node->opType(), u.inputIndex}].push_back(u.node);
    }
    for (const auto &[slot, nodes] : slots) {
      if (nodes.size() < 2)
        continue;
      std::string names;
      for (size_t i = 0; i < nodes.size() && i < 4; ++i)
        names += (i ? ", '" : "'") + nodes[i]->name() + "'";
      if (nodes.size() > 4)
        names += " and " + std::to_string(nodes.size() - 4) + " more";
      diags.warning("parameter '" + p.name() + "'",
                    "feeds input " + std::to_string(slot.second) + " of " +
                        std::to_string(nodes.size()) + " " + slot.first + " nodes (" + names +
                        ") and is trained as one tied parameter; exporters that merge equal "
                        "initializers (torch.onnx.export's default optimizer) make this from "
                        "separate weights: to train them separately, re-export with "
                        "optimize=False, or compile with --untie-initializers (every use of a "
                        "constant-filled initializer gets its own copy)");
    }
  }

  static bool isStateOnly(const ir::Value &v, const ir::TrainingRoles &st) {
    for (const ir::StateUpdate &u : st.updates)
      if (u.state == &v)
        return true;
    return false;
  }
};

} // namespace

std::unique_ptr<Pass> createAutodiffPass() { return std::make_unique<AutodiffPass>(); }

} // namespace dtc::passes
