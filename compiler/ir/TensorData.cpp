// Tensor contents with lazily read external data.
#include "compiler/ir/TensorData.h"

#include <cstring>
#include <fstream>

namespace dtc::ir {

static int64_t elementCount(const std::vector<int64_t> &dims) {
  return checkedProduct(dims).value_or(-1);
}

std::shared_ptr<TensorData> TensorData::fromBytes(std::string name, DType dtype,
                                                  std::vector<int64_t> dims, std::string bytes) {
  std::shared_ptr<TensorData> t(new TensorData());
  t->name_ = std::move(name);
  t->dtype_ = dtype;
  t->numElements_ = elementCount(dims);
  t->dims_ = std::move(dims);
  t->bytes_ = std::move(bytes);
  t->loaded_ = true;
  return t;
}

std::shared_ptr<TensorData> TensorData::fromExternal(std::string name, DType dtype,
                                                     std::vector<int64_t> dims, std::string path,
                                                     int64_t offset, int64_t length) {
  std::shared_ptr<TensorData> t(new TensorData());
  t->name_ = std::move(name);
  t->dtype_ = dtype;
  t->numElements_ = elementCount(dims);
  t->dims_ = std::move(dims);
  t->externalPath_ = std::move(path);
  t->externalOffset_ = offset;
  t->externalLength_ = length;
  return t;
}

std::shared_ptr<TensorData> TensorData::fromInt64s(std::string name, std::vector<int64_t> dims,
                                                   const std::vector<int64_t> &values) {
  std::string bytes(values.size() * sizeof(int64_t), '\0');
  if (!values.empty())
    std::memcpy(bytes.data(), values.data(), bytes.size());
  return fromBytes(std::move(name), DType::kInt64, std::move(dims), std::move(bytes));
}

std::shared_ptr<TensorData> TensorData::fromFloats(std::string name, std::vector<int64_t> dims,
                                                   const std::vector<float> &values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  if (!values.empty())
    std::memcpy(bytes.data(), values.data(), bytes.size());
  return fromBytes(std::move(name), DType::kFloat32, std::move(dims), std::move(bytes));
}

bool TensorData::isLoaded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return loaded_;
}

std::shared_ptr<TensorData> TensorData::zeros(std::string name, DType dtype,
                                              std::vector<int64_t> dims) {
  auto t = std::shared_ptr<TensorData>(new TensorData());
  t->name_ = std::move(name);
  t->dtype_ = dtype;
  t->dims_ = std::move(dims);
  t->numElements_ = 1;
  for (int64_t d : t->dims_)
    t->numElements_ *= d;
  t->zeros_ = true;
  return t;
}

Expected<const std::string *> TensorData::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (loaded_)
    return &bytes_;
  if (zeros_) {
    bytes_.assign(static_cast<size_t>(byteSize()), '\0');
    loaded_ = true;
    return &bytes_;
  }
  std::string where = "tensor '" + name_ + "'";
  std::ifstream in(externalPath_, std::ios::binary);
  if (!in)
    return Status::error(where, "cannot open external data file '" + externalPath_ + "'");
  in.seekg(0, std::ios::end);
  int64_t fileSize = static_cast<int64_t>(in.tellg());
  int64_t want = byteSize();
  int64_t length = externalLength_ > 0 ? externalLength_ : want;
  if (length != want)
    return Status::error(where, "external data length " + std::to_string(length) +
                                    " does not match " + std::to_string(want) +
                                    " bytes of its type and shape");
  if (externalOffset_ < 0 || externalOffset_ > fileSize || length > fileSize - externalOffset_)
    return Status::error(where, "external data range [" + std::to_string(externalOffset_) + ", " +
                                    std::to_string(externalOffset_ + length) + ") is past the end of '" +
                                    externalPath_ + "' (" + std::to_string(fileSize) + " bytes)");
  std::string buffer(static_cast<size_t>(length), '\0');
  in.seekg(externalOffset_);
  in.read(buffer.data(), length);
  if (!in)
    return Status::error(where, "failed to read external data from '" + externalPath_ + "'");
  bytes_ = std::move(buffer);
  loaded_ = true;
  return &bytes_;
}

template <typename T> static T load(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

Expected<std::vector<int64_t>> TensorData::toInt64s() const {
  DTC_ASSIGN_OR_RETURN(const std::string *b, bytes());
  if (static_cast<int64_t>(b->size()) != byteSize())
    return Status::error("tensor '" + name_ + "'", "data size does not match its shape");
  std::vector<int64_t> out(numElements_);
  const char *p = b->data();
  for (int64_t i = 0; i < numElements_; ++i) {
    switch (dtype_) {
    case DType::kInt64: out[i] = load<int64_t>(p + 8 * i); break;
    case DType::kInt32: out[i] = load<int32_t>(p + 4 * i); break;
    case DType::kInt16: out[i] = load<int16_t>(p + 2 * i); break;
    case DType::kInt8: out[i] = load<int8_t>(p + i); break;
    case DType::kUInt8: case DType::kBool: out[i] = load<uint8_t>(p + i); break;
    case DType::kUInt16: out[i] = load<uint16_t>(p + 2 * i); break;
    case DType::kUInt32: out[i] = load<uint32_t>(p + 4 * i); break;
    case DType::kUInt64: out[i] = static_cast<int64_t>(load<uint64_t>(p + 8 * i)); break;
    default:
      return Status::error("tensor '" + name_ + "'",
                           std::string("expected integer data, got ") + dtypeName(dtype_));
    }
  }
  return out;
}

Expected<std::vector<double>> TensorData::toDoubles() const {
  if (!isFloat(dtype_) || dtype_ == DType::kFloat16 || dtype_ == DType::kBFloat16) {
    if (isInteger(dtype_) || dtype_ == DType::kBool) {
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> ints, toInt64s());
      return std::vector<double>(ints.begin(), ints.end());
    }
    return Status::error("tensor '" + name_ + "'",
                         std::string("cannot read ") + dtypeName(dtype_) + " data as numbers");
  }
  DTC_ASSIGN_OR_RETURN(const std::string *b, bytes());
  if (static_cast<int64_t>(b->size()) != byteSize())
    return Status::error("tensor '" + name_ + "'", "data size does not match its shape");
  std::vector<double> out(numElements_);
  for (int64_t i = 0; i < numElements_; ++i)
    out[i] = dtype_ == DType::kFloat32 ? load<float>(b->data() + 4 * i)
                                       : load<double>(b->data() + 8 * i);
  return out;
}

} // namespace dtc::ir
