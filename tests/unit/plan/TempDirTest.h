// A gtest fixture with a fresh temporary folder per test, removed afterwards (plan and checksum
// file tests).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace dtc::plan::test {

class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dtc_plan_test_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string &name) const { return (dir_ / name).string(); }
  void writeBytes(const std::string &p, const std::string &bytes) const {
    std::ofstream(p, std::ios::binary) << bytes;
  }
  std::filesystem::path dir_;
};

} // namespace dtc::plan::test
