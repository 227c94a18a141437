// Binding of symbolic dims to sizes before the training passes and lowering (bindDims in
// Passes.h): every symbol of the graph's types replaced, then canonicalize re-run so shape
// computations fold.
#include "passes/Passes.h"

#include <optional>
#include <set>

namespace dtc::passes {

namespace {

/// The size of `d` with every symbol replaced; nullopt when a symbol is unbound or on overflow.
std::optional<int64_t> evaluateDim(const ir::Dim &d, const std::map<std::string, int64_t> &dims) {
  if (d.isUnknown())
    return std::nullopt;
  int64_t v = d.coefficient();
  for (const std::string &s : d.symbols()) {
    auto it = dims.find(s);
    if (it == dims.end() || __builtin_mul_overflow(v, it->second, &v))
      return std::nullopt;
  }
  return v;
}

void substituteType(ir::TensorType &t, const std::map<std::string, int64_t> &dims) {
  if (!t.shape.hasRank())
    return;
  for (ir::Dim &d : t.shape.dims())
    if (d.isSymbolic())
      if (std::optional<int64_t> v = evaluateDim(d, dims))
        d = ir::Dim::fixed(*v);
}

} // namespace

Status bindDims(ir::Graph &graph, std::map<std::string, int64_t> &dims,
                std::optional<int64_t> batchSize, Diagnostics &diags) {
  for (const auto &[name, size] : dims)
    if (size < 1)
      return Status::error("--dim " + name, "size must be at least 1, got " + std::to_string(size));
  if (batchSize && *batchSize < 1)
    return Status::error("--batch-size",
                         "must be at least 1, got " + std::to_string(*batchSize));
  std::set<std::string> symbols;
  for (ir::Value *in : graph.inputs())
    if (in->shape().hasRank())
      for (const ir::Dim &d : in->shape().dims())
        symbols.insert(d.symbols().begin(), d.symbols().end());
  for (const auto &[name, size] : dims)
    if (!symbols.count(name)) {
      std::string known;
      for (const std::string &sym : symbols)
        known += (known.empty() ? "" : ", ") + sym;
      return Status::error("--dim " + name,
                           "the model's inputs have no symbolic dim '" + name +
                               "' (their symbols: " + (known.empty() ? "none" : known) + ")");
    }
  for (ir::Value *in : graph.inputs()) {
    const ir::Shape &s = in->shape();
    if (!s.hasRank() || s.rank() == 0 || !batchSize)
      continue;
    const ir::Dim &lead = s[0];
    if (!lead.isSymbolic() || lead.coefficient() != 1 || lead.symbols().size() != 1)
      continue;
    const std::string &sym = lead.symbols()[0];
    auto it = dims.find(sym);
    if (it == dims.end())
      dims[sym] = *batchSize;
    else if (it->second != *batchSize)
      return Status::error("--batch-size " + std::to_string(*batchSize),
                           "input '" + in->name() + "' has the batch dim '" + sym +
                               "', which --dim " + sym + "=" + std::to_string(it->second) +
                               " binds to another size");
  }
  for (ir::Value *in : graph.inputs()) {
    const ir::Shape &s = in->shape();
    if (!s.hasRank())
      return Status::error("input '" + in->name() + "'",
                           "rank unknown; the plan needs static shapes (declare the input's shape "
                           "in the model)");
    for (const ir::Dim &d : s.dims()) {
      if (d.isUnknown())
        return Status::error("input '" + in->name() + "'",
                             "shape " + s.str() +
                                 " has an unknown dim; the plan needs static shapes");
      for (const std::string &sym : d.symbols())
        if (!dims.count(sym))
          return Status::error("input '" + in->name() + "'",
                               "shape " + s.str() + " has the symbolic dim '" + sym +
                                   "'; bind it with --batch-size B or --dim " + sym + "=SIZE");
      if (!evaluateDim(d, dims))
        return Status::error("input '" + in->name() + "'",
                             "dim " + d.str() + " overflows int64 with the bound sizes");
    }
  }
  for (ir::Value *v : graph.values())
    substituteType(v->type(), dims);
  PassContext ctx;
  ctx.options["no-batch-warnings"] = "1"; // given by the canonicalize run before binding
  Status s = createCanonicalizePass()->run(graph, ctx);
  for (const Diagnostic &d : ctx.diags.items())
    if (d.severity == Severity::kWarning)
      diags.warning("", d.message);
  return s;
}

} // namespace dtc::passes
