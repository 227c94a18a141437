// Safe file access (see FileIO.h): exclusive temporaries renamed over regular targets, bounded
// non-blocking input reads, file identity checks and a checked append-only log file.
#include "compiler/support/FileIO.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <new>
#include <random>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace dtc {

namespace {

std::string errnoText(int err) { return std::strerror(err); }

/// Writes all of `bytes` to `fd`; errno is set when it returns false.
bool writeAll(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    if (n == 0) {
      errno = ENOSPC;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

/// Opens `path` read-only without blocking on a FIFO and checks it is a regular file of at most
/// `maxBytes`;
/// returns the descriptor (blocking mode restored) and its stat, or an error.
Expected<std::pair<int, struct stat>> openInput(const std::string &path, const std::string &what,
                                                uint64_t maxBytes) {
  if (path.empty())
    return Status::error(what.empty() ? "<input>" : what, "empty file name");
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return Status::error(path, "cannot open: " + errnoText(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::error(path, "cannot open: " + errnoText(err));
  }
  const std::string label = what.empty() ? "" : what + " ";
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Status::error(path, label + "is a directory, not a file");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path, label + "is not a regular file (a FIFO, device or socket); " +
                                   "inputs must be regular files");
  }
  if (static_cast<uint64_t>(st.st_size) > maxBytes) {
    ::close(fd);
    return Status::error(path, label + "is " + std::to_string(st.st_size) + " bytes, over the " +
                                   std::to_string(maxBytes) + " byte limit");
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return std::make_pair(fd, st);
}

} // namespace

Status checkOutputTarget(const std::string &path) {
  if (path.empty())
    return Status::error("<empty path>", "cannot write to an empty path");
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return Status::ok(); // absent (or its folder is missing: create() says so)
  if (S_ISDIR(st.st_mode))
    return Status::error(path, "is a directory");
  if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
    return Status::error(path, "exists and is not a regular file (a device, FIFO or socket); "
                               "refusing to replace it");
  return Status::ok();
}

Expected<AtomicFile> AtomicFile::create(const std::string &path) {
  DTC_RETURN_IF_ERROR(checkOutputTarget(path));
  // A random name next to the target, opened with O_CREAT|O_EXCL|O_NOFOLLOW: never through an
  // existing file or a planted symlink, and with the mode open(2) gives (0644 less the umask;
  // mkostemp's 0600 would need a chmod, and reading the umask changes it process-wide).
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device seed;
  std::mt19937_64 rng((uint64_t{seed()} << 32) ^ seed() ^ static_cast<uint64_t>(::getpid()));
  std::string tmpl;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmpl = path + ".tmp.";
    for (int i = 0; i < 6; ++i)
      tmpl += kChars[rng() % (sizeof(kChars) - 1)];
    fd = ::open(tmpl.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0)
    return Status::error(path, "cannot create " + path + ".tmp.XXXXXX: " + errnoText(errno));
  return AtomicFile(path, tmpl, fd);
}

AtomicFile::AtomicFile(AtomicFile &&other) noexcept
    : path_(std::move(other.path_)), tmp_(std::move(other.tmp_)), fd_(other.fd_) {
  other.fd_ = -1;
  other.tmp_.clear();
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty())
    ::unlink(tmp_.c_str());
  tmp_.clear();
}

Status AtomicFile::write(std::string_view bytes) {
  if (fd_ < 0)
    return Status::error(path_, "internal error: write to a closed output");
  if (!writeAll(fd_, bytes)) {
    int err = errno;
    discard();
    return Status::error(path_, "cannot write: " + errnoText(err));
  }
  return Status::ok();
}

Status AtomicFile::writeAt(uint64_t offset, std::string_view bytes) {
  if (fd_ < 0)
    return Status::error(path_, "internal error: write to a closed output");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n =
        ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int err = n == 0 ? ENOSPC : errno;
      discard();
      return Status::error(path_, "cannot write: " + errnoText(err));
    }
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

Status AtomicFile::commit() {
  if (fd_ < 0)
    return Status::error(path_, "internal error: commit of a closed output");
  auto fail = [&](const std::string &what, int err) {
    discard();
    return Status::error(path_, what + ": " + errnoText(err));
  };
  if (::fsync(fd_) != 0)
    return fail("cannot sync " + tmp_, errno);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    return fail("cannot close " + tmp_, errno);
  // The target may have become a device or FIFO since create(): check again just before.
  if (Status s = checkOutputTarget(path_); !s.isOk()) {
    discard();
    return s;
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    return fail("cannot rename " + tmp_ + " to " + path_, errno);
  tmp_.clear();
  return Status::ok();
}

Status writeFileAtomically(const std::string &path, const std::string &bytes) {
  DTC_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(path));
  DTC_RETURN_IF_ERROR(file.write(bytes));
  return file.commit();
}

Status checkInputFile(const std::string &path, const std::string &what, uint64_t maxBytes) {
  DTC_ASSIGN_OR_RETURN(auto opened, openInput(path, what, maxBytes));
  ::close(opened.first);
  return Status::ok();
}

Expected<std::string> readInputFile(const std::string &path, const std::string &what,
                                    uint64_t maxBytes) {
  DTC_ASSIGN_OR_RETURN(auto opened, openInput(path, what, maxBytes));
  const int fd = opened.first;
  try {
    std::string out;
    out.resize(static_cast<size_t>(opened.second.st_size));
    size_t got = 0;
    for (;;) {
      if (got == out.size()) {
        // The file may have grown since fstat: read on, up to the limit.
        if (out.size() >= maxBytes) {
          char extra;
          ssize_t r = ::read(fd, &extra, 1);
          ::close(fd);
          if (r > 0)
            return Status::error(path, (what.empty() ? "" : what + " ") + "grew past the " +
                                           std::to_string(maxBytes) +
                                           " byte limit while being read");
          return out;
        }
        out.resize(std::min<uint64_t>(maxBytes, std::max<uint64_t>(out.size() * 2, 4096)));
      }
      ssize_t r = ::read(fd, out.data() + got, out.size() - got);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0) {
        int err = errno;
        ::close(fd);
        return Status::error(path, "cannot read: " + errnoText(err));
      }
      if (r == 0)
        break;
      got += static_cast<size_t>(r);
    }
    ::close(fd);
    out.resize(got);
    return out;
  } catch (const std::bad_alloc &) {
    ::close(fd);
    return Status::error(path, "out of memory reading the file");
  } catch (const std::length_error &) {
    ::close(fd);
    return Status::error(path, "out of memory reading the file");
  }
}

Status streamInputFile(const std::string &path, const std::string &what, uint64_t maxBytes,
                       const std::function<Status(const char *data, size_t size)> &sink) {
  DTC_ASSIGN_OR_RETURN(auto opened, openInput(path, what, maxBytes));
  const int fd = opened.first;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  constexpr size_t kChunk = size_t{1} << 20;
  std::unique_ptr<char[]> chunk(new (std::nothrow) char[kChunk]);
  if (!chunk)
    return Status::error(path, "out of memory reading the file");
  uint64_t total = 0;
  auto deliver = [&](const char *data, size_t n) -> Status {
    total += n;
    if (total > maxBytes)
      return Status::error(path, (what.empty() ? "" : what + " ") + "grew past the " +
                                     std::to_string(maxBytes) + " byte limit while being read");
    return sink(data, n);
  };
  // A hole of a sparse file reads as zeros: they go to the sink from one zero chunk, without
  // the kernel filling and copying a page for each (SEEK_DATA/SEEK_HOLE; where the file system
  // does not report holes, the whole file is one data extent and is read as before).
  std::unique_ptr<char[]> zeros;
  uint64_t pos = 0;     // the next byte to deliver
  uint64_t dataEnd = 0; // end of the data extent being read (UINT64_MAX: up to end of file)
  for (;;) {
    if (pos >= dataEnd) {
      const off_t data = ::lseek(fd, static_cast<off_t>(pos), SEEK_DATA);
      const bool noMoreData = data < 0 && errno == ENXIO;
      uint64_t holeEnd = data > 0 ? static_cast<uint64_t>(data) : pos;
      if (noMoreData) { // the rest of the file, up to its size, is a hole
        struct stat now {};
        if (::fstat(fd, &now) != 0)
          return Status::error(path, "cannot read: " + errnoText(errno));
        holeEnd = std::max<uint64_t>(pos, static_cast<uint64_t>(now.st_size));
      }
      while (pos < holeEnd) {
        if (!zeros) {
          zeros.reset(new (std::nothrow) char[kChunk]());
          if (!zeros)
            return Status::error(path, "out of memory reading the file");
        }
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, holeEnd - pos));
        DTC_RETURN_IF_ERROR(deliver(zeros.get(), n));
        pos += n;
      }
      // Without hole reports (data < 0 for another reason), or past the last extent (the file
      // may still grow), read on to the end of the file.
      const off_t hole = data < 0 ? -1 : ::lseek(fd, static_cast<off_t>(pos), SEEK_HOLE);
      dataEnd = hole > static_cast<off_t>(pos) ? static_cast<uint64_t>(hole) : UINT64_MAX;
      if (::lseek(fd, static_cast<off_t>(pos), SEEK_SET) < 0)
        return Status::error(path, "cannot read: " + errnoText(errno));
    }
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, dataEnd - pos));
    ssize_t r = ::read(fd, chunk.get(), want);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return Status::error(path, "cannot read: " + errnoText(errno));
    if (r == 0)
      return Status::ok();
    DTC_RETURN_IF_ERROR(deliver(chunk.get(), static_cast<size_t>(r)));
    pos += static_cast<uint64_t>(r);
  }
}

Expected<InputFile> InputFile::open(const std::string &path, const std::string &what,
                                    uint64_t maxBytes) {
  DTC_ASSIGN_OR_RETURN(auto opened, openInput(path, what, maxBytes));
  return InputFile(path, opened.first, static_cast<uint64_t>(opened.second.st_size));
}

InputFile::InputFile(InputFile &&other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

InputFile &InputFile::operator=(InputFile &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

namespace {
constexpr size_t kStreamChunk = size_t{1} << 20;
/// Zeros delivered for holes (in .bss: costs no memory until read).
const char kZeroChunk[kStreamChunk] = {};
} // namespace

bool InputFile::isHole(uint64_t offset, uint64_t length) const {
  if (length == 0)
    return false;
  // lseek's SEEK_DATA result depends only on its offset argument, so concurrent calls on the
  // shared descriptor do not interfere (reads use pread).
  const off_t data = ::lseek(fd_, static_cast<off_t>(offset), SEEK_DATA);
  if (data < 0)
    return errno == ENXIO && offset + length <= size_;
  return static_cast<uint64_t>(data) >= offset + length;
}

Status InputFile::streamRange(uint64_t offset, uint64_t length,
                              const std::function<Status(const char *, size_t)> &sink) const {
  std::unique_ptr<char[]> chunk;
  const uint64_t end = offset + length;
  uint64_t pos = offset;
  while (pos < end) {
    // The next data extent [dataStart, dataEnd) at or after pos; before it, a hole.
    uint64_t dataStart = pos, dataEnd = end;
    const off_t data = ::lseek(fd_, static_cast<off_t>(pos), SEEK_DATA);
    if (data < 0 && errno == ENXIO) {
      dataStart = end; // no data after pos: the rest is a hole
    } else if (data >= 0) {
      dataStart = std::min<uint64_t>(end, static_cast<uint64_t>(data));
      const off_t hole = ::lseek(fd_, static_cast<off_t>(dataStart), SEEK_HOLE);
      if (hole > static_cast<off_t>(dataStart))
        dataEnd = std::min<uint64_t>(end, static_cast<uint64_t>(hole));
    } // else: the file system reports no holes; read everything
    for (; pos < dataStart;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kStreamChunk, dataStart - pos));
      DTC_RETURN_IF_ERROR(sink(kZeroChunk, n));
      pos += n;
    }
    if (pos < dataEnd && !chunk) {
      chunk.reset(new (std::nothrow) char[kStreamChunk]);
      if (!chunk)
        return Status::error(path_, "out of memory reading the file");
    }
    while (pos < dataEnd) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(kStreamChunk, dataEnd - pos));
      const ssize_t r = ::pread(fd_, chunk.get(), want, static_cast<off_t>(pos));
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        return Status::error(path_, "cannot read: " + errnoText(errno));
      if (r == 0)
        return Status::error(path_, "shrank while being read");
      DTC_RETURN_IF_ERROR(sink(chunk.get(), static_cast<size_t>(r)));
      pos += static_cast<uint64_t>(r);
    }
  }
  return Status::ok();
}

Status InputFile::checkUnchanged() const {
  struct stat now {};
  if (::fstat(fd_, &now) != 0)
    return Status::error(path_, "cannot read: " + errnoText(errno));
  if (static_cast<uint64_t>(now.st_size) != size_)
    return Status::error(path_, "changed while being read (" + std::to_string(size_) + " bytes, "
                                    "now " + std::to_string(now.st_size) + ")");
  return Status::ok();
}

std::optional<FileId> fileIdOf(const std::string &path) {
  if (path.empty())
    return std::nullopt;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

Status checkDistinctFiles(const std::vector<NamedPath> &outputs,
                          const std::vector<NamedPath> &inputs) {
  auto name = [](const NamedPath &p) { return p.flag.empty() ? p.path : p.flag + " " + p.path; };
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::optional<FileId> out = fileIdOf(outputs[i].path);
    if (!out)
      continue;
    for (const NamedPath &in : inputs)
      if (fileIdOf(in.path) == out)
        return Status::error(name(outputs[i]), "is the same file as " + name(in) +
                                                   "; refusing to overwrite an input");
    for (size_t j = 0; j < i; ++j)
      if (fileIdOf(outputs[j].path) == out)
        return Status::error(name(outputs[i]), "is the same file as " + name(outputs[j]) +
                                                   "; give each output its own file");
  }
  return Status::ok();
}

CheckedAppendFile::~CheckedAppendFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

Status CheckedAppendFile::open(const std::string &path, bool append) {
  if (fd_ >= 0)
    return Status::error(path, "internal error: log file opened twice");
  DTC_RETURN_IF_ERROR(checkOutputTarget(path));
  path_ = path;
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK |
                      (append ? O_APPEND : O_TRUNC),
                  0644);
  if (fd < 0)
    return Status::error(path, "cannot open the log file: " + errnoText(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path, "exists and is not a regular file; refusing to write to it");
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  fd_ = fd;
  return Status::ok();
}

Status CheckedAppendFile::write(std::string_view bytes) {
  if (fd_ < 0)
    return Status::error(path_, "internal error: write to a closed log file");
  if (!writeAll(fd_, bytes))
    return Status::error(path_, "cannot write: " + errnoText(errno));
  return Status::ok();
}

Status CheckedAppendFile::close() {
  if (fd_ < 0)
    return Status::ok();
  int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0 && errno != EINVAL) {
    int err = errno;
    ::close(fd);
    return Status::error(path_, "cannot sync: " + errnoText(err));
  }
  if (::close(fd) != 0)
    return Status::error(path_, "cannot close: " + errnoText(errno));
  return Status::ok();
}

} // namespace dtc
