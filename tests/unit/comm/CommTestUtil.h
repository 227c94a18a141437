// What the communicator's test files share (one binary, dtc_comm_tests; CommTest.cpp's main
// creates the job's communicator): the communicator, this rank and the world size, and a
// request of a kind.
#pragma once

#include "runtime/comm/Communicator.h"

#include <string>

namespace dtc::rt::commtest {

extern Communicator *gComm;
inline int rankOf() { return gComm->rank(); }
inline int sizeOf() { return gComm->size(); }

inline CommRequest request(CommKind kind, const std::string &name, int group = 0) {
  CommRequest r;
  r.kind = kind;
  r.name = name;
  r.group = group;
  return r;
}

} // namespace dtc::rt::commtest
