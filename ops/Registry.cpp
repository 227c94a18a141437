// The operator registry, built once from ops/Ops.def.
#include "ops/OpDef.h"

#include <algorithm>

namespace dtc::ops {

#define DTC_OP(Name) OpDef define##Name();
#include "ops/Ops.def"

namespace {
struct Registry {
  std::vector<OpDef> defs;
  std::vector<const OpDef *> pointers;
  std::map<std::pair<std::string, std::string>, const OpDef *> byName;

  Registry() {
#define DTC_OP(Name) defs.push_back(define##Name());
#include "ops/Ops.def"
    for (const OpDef &d : defs) {
      pointers.push_back(&d);
      byName[{d.domain, d.name}] = &d;
    }
  }
};

const Registry &registry() {
  static const Registry r;
  return r;
}
} // namespace

const OpDef *lookupOp(const std::string &domain, const std::string &opType) {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = registry().byName.find({d, opType});
  return it == registry().byName.end() ? nullptr : it->second;
}

const std::vector<const OpDef *> &allOps() { return registry().pointers; }

std::string supportedOpsText() {
  std::vector<std::string> names;
  for (const OpDef *d : allOps())
    if (d->domain.empty())
      names.push_back(d->name);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

} // namespace dtc::ops
