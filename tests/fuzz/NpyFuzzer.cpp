// libFuzzer target for the array-file readers: the input bytes are parsed as a .npy file
// (parseNpy) and as a .npz archive from memory (readNpzFromMemory: libzip, member checks, .npy
// parsing). Neither may crash; every array they accept must survive serializeNpy + parseNpy.
#include "runtime/io/Npy.h"
#include "runtime/io/NpzInternal.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

/// Aborts (a finding) unless `a` re-serializes to a file that parses back to the same array.
void checkRoundTrip(const dtc::rt::HostArray &a) {
  if (a.numElements() < 0 ||
      a.bytes.size() != static_cast<uint64_t>(a.numElements() * dtc::ir::dtypeSize(a.dtype))) {
    std::fprintf(stderr, "accepted array with inconsistent size\n");
    std::abort();
  }
  auto again = dtc::rt::parseNpy(dtc::rt::serializeNpy(a), "again");
  if (!again || again->dtype != a.dtype || again->shape != a.shape || again->bytes != a.bytes) {
    std::fprintf(stderr, "round trip failed: %s\n", again.status().message().c_str());
    std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  auto npy = dtc::rt::parseNpy(bytes, "fuzz.npy");
  if (npy)
    checkRoundTrip(*npy);
  auto npz = dtc::rt::readNpzFromMemory(bytes, "fuzz.npz");
  if (npz)
    for (const dtc::rt::HostArray &a : *npz)
      checkRoundTrip(a);
  return 0;
}
