// Collectives on device memory (DESIGN.md section 8): on a GPU the executor's all-reduces,
// all-gathers, reduce-scatters, broadcasts and send/recv run through NCCL on a communication
// stream instead of through MPI on host memory. The requests are the host communicator's
// (runtime/comm/Communicator.h: CommRequest, same group ids, same per-kind meaning), with device
// pointers; submission and waiting are stream-ordered, never a host block.
#pragma once

#include "compiler/support/Status.h"
#include "runtime/comm/Communicator.h"

#include <cstdint>

namespace dtc::rt {

class DeviceCommunicator {
public:
  virtual ~DeviceCommunicator() = default;
  /// Enqueues `request` on the communication stream behind everything enqueued so far on the
  /// compute stream (an event recorded on the compute stream, waited for by the communication
  /// stream) and returns a handle for wait(). Collectives must be submitted in the same order
  /// on every member of their group. A malformed request fails in wait(), naming it.
  virtual uint64_t submit(CommRequest request) = 0;
  /// Makes the compute stream wait for request `handle` (an event recorded on the
  /// communication stream after it): kernels enqueued afterwards see its outputs. Does not
  /// block the host. Errors: the request's own (malformed, an NCCL call that failed).
  virtual Status wait(uint64_t handle) = 0;
  /// wait() for every request submitted and not yet waited for; the first error.
  virtual Status waitAll() = 0;
  /// Asynchronous failures (ncclCommGetAsyncError: a lost peer, a timeout after
  /// CommOptions::timeoutSeconds with work still pending), naming the request; the device
  /// calls it while it synchronizes.
  virtual Status poll() = 0;
};

} // namespace dtc::rt
