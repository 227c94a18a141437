// Device kinds and the target of each (ops/kernel/Target.h).
#include "ops/kernel/Target.h"

namespace dtc::ops {

const char *deviceKindName(DeviceKind kind) { return kind == DeviceKind::kCuda ? "cuda" : "cpu"; }

Expected<DeviceKind> parseDeviceKind(const std::string &name) {
  if (name == "cpu")
    return DeviceKind::kCpu;
  if (name == "cuda")
    return DeviceKind::kCuda;
  return Status::error("--device", "unknown device '" + name + "' (expected cpu or cuda)");
}

const Target &targetFor(DeviceKind kind) {
  return kind == DeviceKind::kCuda ? cudaTarget() : cpuTarget();
}

} // namespace dtc::ops
