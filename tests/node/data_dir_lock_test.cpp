// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "conclave/node/data_dir_lock.hpp"

using namespace conclave::node;

namespace {

std::filesystem::path TempDir(const std::string& name) {
    return std::filesystem::temp_directory_path() /
           ("conclave-lock-test-" + std::to_string(::getpid())) / name;
}

}  // namespace

TEST_CASE("a second owner of a data directory is refused, naming the holder", "[lock]") {
    const auto dir = TempDir("n1");  // does not exist yet: acquire creates it
    std::filesystem::remove_all(dir);
    auto first = DataDirLock::acquire(dir);
    REQUIRE(std::holds_alternative<DataDirLock>(first));
    CHECK(std::get<DataDirLock>(first).path() == dir / "LOCK");
    {
        std::ifstream in(dir / "LOCK");
        std::string pid;
        in >> pid;
        CHECK(pid == std::to_string(::getpid()));
    }

    // flock() conflicts between open file descriptions, even in one process.
    auto second = DataDirLock::acquire(dir);
    REQUIRE(std::holds_alternative<DataDirLock::Error>(second));
    const auto& error = std::get<DataDirLock::Error>(second);
    CHECK(error.held_by_other);
    CHECK(error.message ==
          "data directory " + dir.string() + " is in use by another conclaved (pid " +
              std::to_string(::getpid()) + ", lock file " + (dir / "LOCK").string() + ")");

    // Another process is refused too (exit status 1 when it fails).
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        auto attempt = DataDirLock::acquire(dir);
        ::_exit(std::holds_alternative<DataDirLock::Error>(attempt) ? 1 : 0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);

    // Released with its owner; moving keeps it held.
    {
        DataDirLock moved = std::get<DataDirLock>(std::move(first));
        CHECK(std::holds_alternative<DataDirLock::Error>(DataDirLock::acquire(dir)));
    }
    CHECK(std::holds_alternative<DataDirLock>(DataDirLock::acquire(dir)));
    std::filesystem::remove_all(dir.parent_path());
}

TEST_CASE("a data directory that cannot be created is an error, not a crash", "[lock]") {
    const auto base = TempDir("file");
    std::filesystem::create_directories(base.parent_path());
    { std::ofstream(base) << "not a directory"; }
    auto result = DataDirLock::acquire(base / "n1");
    REQUIRE(std::holds_alternative<DataDirLock::Error>(result));
    CHECK_FALSE(std::get<DataDirLock::Error>(result).held_by_other);
    CHECK(std::get<DataDirLock::Error>(result).message.find("cannot create") != std::string::npos);
    std::filesystem::remove_all(base.parent_path());
}
