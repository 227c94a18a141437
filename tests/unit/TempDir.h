// A fresh temporary folder for a test, removed with everything in it when the object goes.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace dtc::test {

class TempDir {
public:
  /// A new folder "<tmp>/<prefix>-XXXXXX" (mkdtemp).
  explicit TempDir(const std::string &prefix = "dtc-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    char *p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::filesystem::path &path() const { return path_; }
  /// Writes `contents` to `name` inside the folder (creating subfolders); returns its path.
  std::string file(const std::string &name, const std::string &contents) const {
    std::filesystem::path p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out << contents;
    return p.string();
  }

private:
  std::filesystem::path path_;
};

} // namespace dtc::test
