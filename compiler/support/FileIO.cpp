// Atomic file writes (see FileIO.h).
#include "compiler/support/FileIO.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dtc {

namespace {

std::string errnoText(int err) { return std::strerror(err); }

/// Writes all of `bytes` to `fd`; errno is set when it returns false.
bool writeAll(int fd, const std::string &bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

} // namespace

Status writeFileAtomically(const std::string &path, const std::string &bytes) {
  if (path.empty())
    return Status::error("<empty path>", "cannot write to an empty path");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return Status::error(path, "is a directory");
    if (!S_ISREG(st.st_mode)) {
      int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0)
        return Status::error(path, "cannot open: " + errnoText(errno));
      bool ok = writeAll(fd, bytes);
      int err = errno;
      ::close(fd);
      return ok ? Status::ok() : Status::error(path, "cannot write: " + errnoText(err));
    }
  }
  const std::string tmp = path + ".tmp";
  auto fail = [&](const std::string &what, int err) {
    ::unlink(tmp.c_str());
    return Status::error(path, what + ": " + errnoText(err));
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::error(path, "cannot create " + tmp + ": " + errnoText(errno));
  if (!writeAll(fd, bytes)) {
    int err = errno;
    ::close(fd);
    return fail("cannot write " + tmp, err);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return fail("cannot sync " + tmp, err);
  }
  if (::close(fd) != 0)
    return fail("cannot close " + tmp, errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return fail("cannot rename " + tmp + " to " + path, errno);
  return Status::ok();
}

} // namespace dtc
