// SPDX-License-Identifier: Apache-2.0
// Durable file-system steps shared by every component that keeps files (the elector's state file
// in net/, the log's FileStorage in replication/).
#pragma once

#include <filesystem>

namespace conclave {

/// std::filesystem::create_directories, plus an fsync of the parent of every directory it
/// creates, so that a new directory's entry survives a machine crash. Throws std::system_error
/// (naming the step and the path) when a step fails.
void create_directories_durably(const std::filesystem::path& dir);

/// fsync of a directory (makes the entries created, renamed or removed in it durable). Retries
/// on EINTR; throws std::system_error naming the path otherwise.
void fsync_directory(const std::filesystem::path& dir);

}  // namespace conclave
