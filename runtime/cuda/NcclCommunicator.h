// The device communicator on NVIDIA GPUs (DESIGN.md section 8; runtime/DeviceComm.h): NCCL
// 2.28 communicators for the world and for each of the plan's groups (two each: one per
// direction of point-to-point traffic), bootstrapped by sending each group's ncclUniqueId
// through the host (MPI) communicator, with the collectives and send/recv on communication
// streams joined to the compute stream by CUDA events.
#pragma once

#include "compiler/support/Status.h"
#include "runtime/DeviceComm.h"
#include "runtime/comm/Communicator.h"

#include <memory>
#include <string>
#include <vector>

namespace dtc::ops::cuda {
class CudaContext;
}

namespace dtc::rt {

/// Makes the NCCL communicators of this rank on the GPU of `ctx` (ctx.device()): group 0 over
/// the world (group rank = world rank) and groups 1..n over `groups` (world-rank lists in
/// group-rank order: the lists the executor passes to host.createGroups(), which must have been
/// called with them, so that host group g is group g here). For each group that this rank is a
/// member of, the group's first member makes an ncclUniqueId and broadcasts it over the host
/// communicator's group (two ids: the group's communicator and, for groups of 2 or more, its
/// reverse one); the ncclCommInitRank calls then run in one ncclGroupStart/End. A rank
/// not in a group gets no communicator for it (requests on that group fail naming it). Blocking
/// and collective over the world: every rank calls it with the same lists. Requests run on two
/// communication streams (cudaStreamNonBlocking) of ctx.device(), each behind an event of the
/// compute stream; submit() and wait() never block the host. Per kind (CommRequest,
/// runtime/comm/Communicator.h):
/// - all-reduce: one ncclAllReduce per contiguous span of operands (nccl::allReduceSpans: the
///   spans depend on the buffers' relative layout, which must be the same on every member),
///   all in one ncclGroupStart/End; kMean is ncclAvg (floating types only), kMax ncclMax.
/// - all-gather, reduce-scatter, broadcast: ncclAllGather (in place when inputs[0] is
///   outputs[0] + groupRank * bytes[0]), ncclReduceScatter, ncclBroadcast (root: the world rank
///   `peer`, as its group rank).
/// - send/recv: ncclSend/ncclRecv to the peer's group rank. NCCL has no tags: the messages
///   between two ranks in one direction match in submission order (the tag is only
///   range-checked), and a recv must name the size of its send (NCCL cannot detect a mismatch:
///   the pair hangs or reads garbage, and poll() reports the timeout). An NCCL send blocks its
///   stream until the peer's recv runs, so messages to a higher group rank go on the group's
///   communicator and stream (with the collectives) and messages to a lower group rank on a
///   second, reverse communicator of the group with a stream of its own (nccl::onReverse): a
///   pipeline's activations (forward) and gradients (backward) never wait for each other
///   (GPipe, 1F1B). Within one direction, sends and recvs run in submission order, as blocking
///   MPI calls would: the ranks must submit them in an order that matches.
/// Element types (all-reduce, reduce-scatter): f32, f64, f16, bf16, i32, i64, u8, i8; the other
/// kinds move bytes whatever the dtype. CommRequest::persistent changes nothing (NCCL keeps no
/// per-request state to cache) and CommOptions::tracer is not used (the calls run on the GPU
/// after submit() returns: host timestamps would not show them). Errors name the rank, the
/// request and its group:
/// "rank 1: all-reduce 'bucket 0' on group dp: ..." (`groupNames`: optional names of groups
/// 1..n, the plan's axes; group 0 is "the world", an unnamed group "group 3"). A request named
/// CommOptions::failStartOf breaks the communicator as if its NCCL call had failed (tests). poll():
/// an asynchronous NCCL error of any communicator, or a request not complete
/// CommOptions::timeoutSeconds after its submission, aborts every communicator (ncclCommAbort) and
/// breaks this one: every later call returns that error. Destruction waits for the communication
/// streams (at most timeoutSeconds, then aborts) and destroys the communicators. Errors of
/// creation: a group list that differs from the host communicator's groups, CUDA or NCCL failures
/// (naming the call and the group), a member whose ncclGetUniqueId failed (every member of its
/// group reports it).
Expected<std::unique_ptr<DeviceCommunicator>>
createNcclCommunicator(Communicator &host, const std::vector<std::vector<int>> &groups,
                       ops::cuda::CudaContext &ctx, const CommOptions &opts,
                       const std::vector<std::string> &groupNames = {});

} // namespace dtc::rt
