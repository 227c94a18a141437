// Constant: a tensor given by exactly one value attribute. Forms: value (1), more types (9),
// sparse_value (11), value_float(s)/value_int(s)/value_string(s) (12), more types (13). The
// importer turns Constant nodes into initializers; this definition checks and infers them.
#include "ops/OpDef.h"
#include "ops/Sharding.h"

namespace dtc::ops {
namespace {

const char *const kValueAttrs[] = {"value",     "sparse_value", "value_float",  "value_floats",
                                   "value_int", "value_ints",   "value_string", "value_strings"};

/// The single value attribute's name; error unless exactly one is present.
Expected<std::string> valueAttr(const ir::Node &node) {
  std::string found;
  int count = 0;
  for (const char *name : kValueAttrs)
    if (node.hasAttr(name)) {
      found = name;
      ++count;
    }
  if (count != 1)
    return Status::error(node.where(), "Constant needs exactly one value attribute (value, "
                                       "sparse_value, value_float(s), value_int(s), "
                                       "value_string(s)); got " +
                                           std::to_string(count));
  if (found == "sparse_value")
    return Status::error(node.where(), "sparse_value constants are not supported");
  return found;
}

} // namespace

OpDef defineConstant() {
  OpDef d;
  d.name = "Constant";
  d.version(1).out("output", "T").attr("value", ir::AttrKind::kTensor, true).type("T", kAllTypes);
  d.version(9);
  d.version(11).attr("value", ir::AttrKind::kTensor).attr("sparse_value", ir::AttrKind::kTensor);
  d.version(12)
      .attr("value_float", ir::AttrKind::kFloat)
      .attr("value_floats", ir::AttrKind::kFloats)
      .attr("value_int", ir::AttrKind::kInt)
      .attr("value_ints", ir::AttrKind::kInts)
      .attr("value_string", ir::AttrKind::kString)
      .attr("value_strings", ir::AttrKind::kStrings);
  d.version(13);
  d.normalize = [](ir::Node &node, NormalizeContext &) -> Status {
    return valueAttr(node).status();
  };
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Node &node = ctx.node();
    DTC_ASSIGN_OR_RETURN(std::string name, valueAttr(node));
    const ir::Attribute &a = *node.attr(name);
    if (name == "value") {
      const ir::TensorData &t = *a.t();
      ctx.setOutputDType(0, t.dtype());
      ctx.setOutputShape(0, ir::Shape::ofStatic(t.dims()));
      if (ir::isInteger(t.dtype()) && t.dims().size() <= 1 && t.numElements() <= 1024) {
        DTC_ASSIGN_OR_RETURN(std::vector<int64_t> ints, t.toInt64s());
        std::vector<ir::Dim> dims;
        for (int64_t x : ints)
          dims.push_back(ir::Dim::fixed(x));
        ctx.setShapeValue(0, std::move(dims));
      }
    } else if (name == "value_float" || name == "value_int" || name == "value_string") {
      ctx.setOutputDType(0, name == "value_float" ? ir::DType::kFloat32
                            : name == "value_int" ? ir::DType::kInt64
                                                  : ir::DType::kString);
      ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>{}));
      if (name == "value_int")
        ctx.setShapeValue(0, {ir::Dim::fixed(a.i())});
    } else {
      int64_t n = name == "value_floats" ? static_cast<int64_t>(a.floats().size())
                  : name == "value_ints" ? static_cast<int64_t>(a.ints().size())
                                         : static_cast<int64_t>(a.strings().size());
      ctx.setOutputDType(0, name == "value_floats" ? ir::DType::kFloat32
                            : name == "value_ints" ? ir::DType::kInt64
                                                   : ir::DType::kString);
      ctx.setOutputShape(0, ir::Shape::ofStatic({n}));
      if (name == "value_ints") {
        std::vector<ir::Dim> dims;
        for (int64_t x : a.ints())
          dims.push_back(ir::Dim::fixed(x));
        ctx.setShapeValue(0, std::move(dims));
      }
    }
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::Node &node = ctx.node();
    DTC_ASSIGN_OR_RETURN(std::string name, valueAttr(node));
    const ir::Attribute &a = *node.attr(name);
    const std::string &out = node.output(0)->name();
    if (name == "value")
      return std::vector<ir::TensorDataPtr>{a.t()};
    if (name == "value_float")
      return std::vector<ir::TensorDataPtr>{ir::TensorData::fromFloats(out, {}, {a.f()})};
    if (name == "value_floats")
      return std::vector<ir::TensorDataPtr>{
          ir::TensorData::fromFloats(out, {static_cast<int64_t>(a.floats().size())}, a.floats())};
    if (name == "value_int")
      return std::vector<ir::TensorDataPtr>{ir::TensorData::fromInt64s(out, {}, {a.i()})};
    if (name == "value_ints")
      return std::vector<ir::TensorDataPtr>{
          ir::TensorData::fromInt64s(out, {static_cast<int64_t>(a.ints().size())}, a.ints())};
    return ctx.error("cannot fold string constants");
  };
  // Writes its value (import turns Constant nodes into initializers).
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
