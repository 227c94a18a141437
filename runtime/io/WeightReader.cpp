// Lazy reads of initializers and their slices (see WeightReader.h): the parsed ModelProto is
// indexed by name; a request is checked with the importer's own checks and copied run by run
// (the contiguous byte ranges of the slice) out of raw_data, a typed field or an external file.
#include "runtime/io/WeightReader.h"

#include "compiler/onnx/ModelFile.h"
#include "compiler/onnx/TensorImport.h"
#include "compiler/onnx/UntieInitializers.h"

#include <onnx/onnx_pb.h>

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace dtc::rt {

// raw_data and external data are little-endian (onnx.proto, TensorProto.raw_data); the bytes
// are handed to kernels as they are.
static_assert(std::endian::native == std::endian::little,
              "the weight reader assumes a little-endian host, as ONNX's storage is");

namespace {

/// One contiguous range of a slice: `bytes` at byte `from` of the whole tensor go to byte `to`
/// of the slice.
struct Run {
  uint64_t from = 0, to = 0, bytes = 0;
};

/// The runs of `slice` of a dense row-major tensor of dims `dims` (checked), in order of `to`
/// (and of `from`).
std::vector<Run> runsOf(const std::vector<int64_t> &dims, uint64_t elemSize,
                        const std::optional<WeightSlice> &slice, uint64_t wholeBytes) {
  if (!slice)
    return wholeBytes ? std::vector<Run>{{0, 0, wholeBytes}} : std::vector<Run>{};
  uint64_t outer = 1, inner = elemSize;
  for (int64_t d = 0; d < slice->axis; ++d)
    outer *= static_cast<uint64_t>(dims[static_cast<size_t>(d)]);
  for (size_t d = static_cast<size_t>(slice->axis) + 1; d < dims.size(); ++d)
    inner *= static_cast<uint64_t>(dims[d]);
  const uint64_t n = static_cast<uint64_t>(dims[static_cast<size_t>(slice->axis)]);
  const uint64_t blocks = static_cast<uint64_t>(slice->blocks);
  const uint64_t block = n / blocks;
  const uint64_t len = static_cast<uint64_t>(slice->length) * inner;
  std::vector<Run> runs;
  if (len == 0 || inner == 0)
    return runs;
  runs.reserve(outer * blocks);
  uint64_t to = 0;
  for (uint64_t o = 0; o < outer; ++o)
    for (uint64_t k = 0; k < blocks; ++k) {
      const uint64_t row = k * block + static_cast<uint64_t>(slice->offset);
      // Consecutive runs that touch (a slice of a whole axis, blocks of one row) merge.
      const uint64_t from = (o * n + row) * inner;
      if (!runs.empty() && runs.back().from + runs.back().bytes == from)
        runs.back().bytes += len;
      else
        runs.push_back({from, to, len});
      to += len;
    }
  return runs;
}

std::string typeText(ir::DType dtype, const std::vector<int64_t> &dims) {
  return std::string(ir::dtypeName(dtype)) + onnxio::dimsText(dims);
}

/// Gaps up to this size between the runs of an external read are read through (one pread
/// instead of many), in chunks of at most kChunkBytes.
constexpr uint64_t kMaxGapBytes = 64 << 10;
constexpr uint64_t kChunkBytes = 16 << 20;

} // namespace

WeightReader::~WeightReader() {
  for (auto &[path, fd] : descriptors_)
    ::close(fd);
}

Expected<std::unique_ptr<WeightReader>> WeightReader::open(const std::string &path,
                                                           const Options &options) {
  std::unique_ptr<WeightReader> r(new WeightReader());
  r->path_ = path;
  r->modelDir_ = std::filesystem::path(path).parent_path().string();
  r->model_ = std::make_unique<onnx::ModelProto>();
  DTC_RETURN_IF_ERROR(onnxio::readModelFile(path, *r->model_));
  onnx::GraphProto &graph = *r->model_->mutable_graph();
  if (options.untieInitializers)
    DTC_RETURN_IF_ERROR(onnxio::untieInitializers(graph).status().withContext(path));
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const std::string &name = graph.initializer(i).name();
    if (name.empty())
      return Status::error(path, "graph initializer #" + std::to_string(i) + " has no name");
    if (!r->index_.emplace(name, i).second)
      return Status::error(path + ": tensor '" + name + "'", "two initializers have this name");
  }
  return r;
}

Expected<WeightInfo> WeightReader::info(const std::string &name) const {
  auto it = index_.find(name);
  if (it == index_.end())
    return Status::error(path_ + ": initializer '" + name + "'",
                         "not found among the model's initializers");
  auto src = onnxio::inspectTensor(model_->graph().initializer(it->second), name, modelDir_,
                                   &externalFiles_);
  if (!src)
    return src.status().withContext(path_);
  return WeightInfo{src->dtype, src->dims};
}

Expected<std::string> WeightReader::read(const WeightRequest &request) const {
  // The size is checked by readInto; compute it here from the request (checked there too).
  uint64_t bytes = ir::dtypeSize(request.dtype);
  for (size_t d = 0; d < request.shape.size(); ++d) {
    int64_t dim = request.shape[d];
    if (request.slice && static_cast<int64_t>(d) == request.slice->axis)
      dim = request.slice->blocks * request.slice->length;
    bytes *= dim < 0 ? 0 : static_cast<uint64_t>(dim);
  }
  std::string out(bytes, '\0');
  DTC_RETURN_IF_ERROR(readInto(request, out.data(), bytes));
  return out;
}

Status WeightReader::readInto(const WeightRequest &request, char *out, uint64_t outBytes) const {
  const std::string where = path_ + ": initializer '" + request.name + "'";
  auto it = index_.find(request.name);
  if (it == index_.end())
    return Status::error(where, "not found among the model's initializers");
  const onnx::TensorProto &t = model_->graph().initializer(it->second);
  auto inspected = onnxio::inspectTensor(t, request.name, modelDir_, &externalFiles_);
  if (!inspected)
    return inspected.status().withContext(path_);
  const onnxio::TensorSource &src = *inspected;
  if (src.dtype != request.dtype || src.dims != request.shape)
    return Status::error(where, "the model has " + typeText(src.dtype, src.dims) +
                                    ", the reader was asked for " +
                                    typeText(request.dtype, request.shape));
  const uint64_t elemSize = ir::dtypeSize(src.dtype);
  uint64_t want = static_cast<uint64_t>(src.byteSize);
  if (const std::optional<WeightSlice> &s = request.slice) {
    const int64_t rank = static_cast<int64_t>(src.dims.size());
    const std::string sliceText =
        "slice of axis " + std::to_string(s->axis) + " [" + std::to_string(s->offset) + ", " +
        std::to_string(s->offset + s->length) + ")" +
        (s->blocks > 1 ? " of " + std::to_string(s->blocks) + " blocks" : std::string());
    if (s->axis < 0 || s->axis >= rank)
      return Status::error(where, sliceText + ": the axis is out of range for " +
                                      typeText(src.dtype, src.dims));
    const int64_t n = src.dims[static_cast<size_t>(s->axis)];
    if (s->blocks < 1 || n % s->blocks != 0)
      return Status::error(where, sliceText + ": axis " + std::to_string(s->axis) + " of size " +
                                      std::to_string(n) + " does not divide into " +
                                      std::to_string(s->blocks) + " blocks");
    const int64_t block = n / s->blocks;
    if (s->offset < 0 || s->length < 0 || s->offset > block || s->length > block - s->offset)
      return Status::error(where,
                           sliceText + ": outside the " + std::to_string(block) + " elements of " +
                               (s->blocks > 1 ? "each block of " : std::string()) + "axis " +
                               std::to_string(s->axis) + " of " + typeText(src.dtype, src.dims));
    want = n == 0 ? 0
                  : want / static_cast<uint64_t>(n) * static_cast<uint64_t>(s->blocks) *
                        static_cast<uint64_t>(s->length);
  }
  if (want != outBytes)
    return Status::error(where, "the destination holds " + std::to_string(outBytes) +
                                    " bytes, the requested part " + std::to_string(want));
  const std::vector<Run> runs =
      runsOf(src.dims, elemSize, request.slice, static_cast<uint64_t>(src.byteSize));

  switch (src.storage) {
  case onnxio::TensorSource::Storage::kEmpty:
    return Status::ok(); // no elements
  case onnxio::TensorSource::Storage::kRaw:
    for (const Run &r : runs)
      std::memcpy(out + r.to, t.raw_data().data() + r.from, r.bytes);
    return Status::ok();
  case onnxio::TensorSource::Storage::kTyped:
    for (const Run &r : runs)
      onnxio::packTypedRange(t, src.dtype, static_cast<int64_t>(r.from / elemSize),
                             static_cast<int64_t>(r.bytes / elemSize), out + r.to);
    return Status::ok();
  case onnxio::TensorSource::Storage::kExternal:
    break;
  }

  const std::string file = "external data file '" + src.externalLocation + "'";
  auto opened = fileDescriptor(src.externalPath);
  if (!opened)
    return Status::error(where, "cannot open " + file + " ('" + src.externalPath +
                                    "'): " + opened.status().message());
  const int fd = *opened;
  // Reads [at, at + bytes) of the file into dst; a short read means the file shrank.
  auto preadAll = [&](char *dst, uint64_t at, uint64_t bytes) -> Status {
    const uint64_t start = static_cast<uint64_t>(src.externalOffset) + at;
    uint64_t done = 0;
    while (done < bytes) {
      const ssize_t got = ::pread(fd, dst + done, bytes - done, static_cast<off_t>(start + done));
      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0)
        return Status::error(where, "reading " + file + " ('" + src.externalPath +
                                        "') failed: " + std::strerror(errno));
      if (got == 0)
        return Status::error(where, file + " ('" + src.externalPath + "') ends at byte " +
                                        std::to_string(start + done) + ", before the tensor's " +
                                        "bytes [" + std::to_string(src.externalOffset) + ", " +
                                        std::to_string(src.externalOffset + src.byteSize) +
                                        "): it is truncated");
      done += static_cast<uint64_t>(got);
    }
    externalBytesRead_ += bytes;
    return Status::ok();
  };
  std::string bounce;
  for (size_t i = 0; i < runs.size();) {
    // Runs close together are read in one pread through a bounce buffer.
    size_t j = i + 1;
    while (j < runs.size() &&
           runs[j].from - (runs[j - 1].from + runs[j - 1].bytes) <= kMaxGapBytes &&
           runs[j].from + runs[j].bytes - runs[i].from <= kChunkBytes)
      ++j;
    if (j == i + 1) {
      DTC_RETURN_IF_ERROR(preadAll(out + runs[i].to, runs[i].from, runs[i].bytes));
    } else {
      const uint64_t span = runs[j - 1].from + runs[j - 1].bytes - runs[i].from;
      bounce.resize(span);
      DTC_RETURN_IF_ERROR(preadAll(bounce.data(), runs[i].from, span));
      for (size_t k = i; k < j; ++k)
        std::memcpy(out + runs[k].to, bounce.data() + (runs[k].from - runs[i].from), runs[k].bytes);
    }
    i = j;
  }
  return Status::ok();
}

Expected<int> WeightReader::fileDescriptor(const std::string &absolutePath) const {
  if (auto it = descriptors_.find(absolutePath); it != descriptors_.end())
    return it->second;
  int fd = ::open(absolutePath.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(std::strerror(errno));
  descriptors_.emplace(absolutePath, fd);
  return fd;
}

} // namespace dtc::rt
