// Central storage (DESIGN.md section 6, --strategy cs=N; TensorFlow's CentralStorageStrategy):
// one process, N devices. On CPU the devices are N executor threads, each with its own arena,
// computing the gradients of its B/N samples; the host keeps the parameters and optimizer state
// (the plan's one server program, run by a ServerCore in this process), reduces the devices'
// gradients to their mean and applies the update once per step; every device then copies the
// new parameters. The law holds: the update is dp=N's.
#pragma once

#include "compiler/plan/Plan.h"
#include "runtime/Trainer.h"

namespace dtc::rt::ps {

/// Trains a cs=N plan. Device 0 prints progress and writes the outputs (--log, --export,
/// --save-params); its reported loss and accuracy are those of its own B/N samples. The first
/// device to fail stops the others; its error is returned, naming it. Errors: a plan that is
/// not cs=N, checkpoints and --dump-gradients (not supported yet), and train()'s.
Status trainCentralStorage(const plan::Plan &plan, const TrainOptions &opts);

} // namespace dtc::rt::ps
