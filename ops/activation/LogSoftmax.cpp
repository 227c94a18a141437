// LogSoftmax: x - log(sum(exp(x))) along one axis (opset 13 form, axis default -1). The
// pre-13 forms (versions 1 and 11, which flatten the input to 2-D at `axis`, default 1) are
// rewritten into that form by softmaxFamilyDef's normalization (ops/activation/Activation.cpp).
#include "ops/activation/Activation.h"

namespace dtc::ops {

OpDef defineLogSoftmax() { return softmaxFamilyDef("LogSoftmax"); }

} // namespace dtc::ops
