// The elector's durable state (term, vote) in <data_dir>/elector-state.json.
//
// Written with write-temp + fsync + rename + fsync(directory), so that after a crash the file
// holds either the old or the new state, never a mix. A missing file means a brand-new node; a
// file that exists but cannot be read or parsed is an error: the node must refuse to start rather
// than silently reset its term (which could let it vote twice in one term).
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>

#include "conclave/elector/actions.hpp"

namespace conclave::net {

inline constexpr const char* kStateFileName = "elector-state.json";
/// Version of the state file's layout ("format" field).
inline constexpr std::uint64_t kStateFileFormat = 1;

class StateFileError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// nullopt when the file does not exist. Throws StateFileError (naming the path and the field)
/// for anything else that is wrong, including a vote for a node index >= cluster_size.
std::optional<DurableState> load_durable_state(const std::filesystem::path& data_dir,
                                               std::size_t cluster_size);
/// Creates data_dir if needed. Throws StateFileError when any step fails.
void store_durable_state(const std::filesystem::path& data_dir, const DurableState& state);
/// Writes `text` to data_dir/name durably (a temporary file, fsync, rename, fsync of the
/// directory), creating data_dir if needed. Throws StateFileError when any step fails.
void store_file_durably(const std::filesystem::path& data_dir, const std::string& name,
                        const std::string& text);

/// std::filesystem::create_directories, plus an fsync of the parent of every directory it creates,
/// so that a new directory's entry survives a machine crash. Throws StateFileError.
void create_directories_durably(const std::filesystem::path& dir);

}  // namespace conclave::net
