// Structural checks of a Graph, run after every pass under --verify-each and in tests: every
// input defined before use, use lists consistent with inputs, unique names, no dangling values.
#pragma once

#include "compiler/ir/Graph.h"

namespace dtc::ir {

/// Ok, or an error naming the first offending node or value.
Status verifyGraph(const Graph &g);

} // namespace dtc::ir
