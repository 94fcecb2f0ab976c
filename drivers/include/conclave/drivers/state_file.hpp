// SPDX-License-Identifier: Apache-2.0
// The elector's durable state (term, vote) and the node's identity in
// <data_dir>/elector-state.json.
//
// Written with write-temp + fsync + rename + fsync(directory), so that after a crash the file
// holds either the old or the new state, never a mix. Format 2 carries the node's identity
// (cluster, node id, incarnation: a random id created with the data directory) and a CRC-32 of
// everything else, so that a flipped bit (term 31 read as 11) is refused, not believed. A missing
// file is a brand-new node only when nothing else of the node's state exists (identity.hpp checks
// that at start); a file that exists but cannot be read, parsed or checksummed is an error: the
// node must refuse to start rather than silently reset its term (which could let it vote twice in
// one term).
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>

#include "conclave/elector/actions.hpp"

namespace conclave::drivers {

inline constexpr const char* kStateFileName = "elector-state.json";
/// Version of the state file's layout ("format" field). Format 1 (term and vote, no identity, no
/// checksum) is still read; the next write turns it into format 2.
inline constexpr std::uint64_t kStateFileFormat = 2;

/// Who wrote a state file: the cluster, the node's id and its incarnation. The incarnation is
/// created once, with the data directory, and dies with it: peers remember it, so that a node
/// whose state was lost cannot come back as its old self (identity.hpp).
struct NodeIdentity {
    std::string cluster;
    std::string node;
    std::string incarnation;
    /// A majority of the other voters have admitted this incarnation (identity.hpp): until then a
    /// new node is quarantined (it neither votes nor acknowledges). Absent in the file: true.
    bool registered = true;
    /// This identity has created its metadata log (`log/log.dat`): a start that finds the log
    /// gone refuses (node/identity.hpp). Absent in the file: false.
    bool log = false;
    bool operator==(const NodeIdentity&) const = default;
};

/// What load_state_file() read: the elector's state and, from format 2 on, the identity.
struct StateFile {
    elector::DurableState state;
    std::optional<NodeIdentity> identity;  // nullopt: a format 1 file
};

class StateFileError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// nullopt when the file does not exist. Throws StateFileError (naming the path and the field)
/// for anything else that is wrong: unreadable, not JSON, a checksum that does not match, a vote
/// for a node index >= cluster_size.
std::optional<StateFile> load_state_file(const std::filesystem::path& data_dir,
                                         std::size_t cluster_size);
/// load_state_file()'s elector state alone.
std::optional<elector::DurableState> load_durable_state(const std::filesystem::path& data_dir,
                                                        std::size_t cluster_size);
/// Creates data_dir if needed. Throws StateFileError when any step fails.
void store_durable_state(const std::filesystem::path& data_dir, const elector::DurableState& state,
                         const NodeIdentity& identity = {});
/// The text store_durable_state() writes (format 2, with its checksum).
std::string state_file_text(const elector::DurableState& state, const NodeIdentity& identity);
/// A fresh incarnation: 16 random bytes from OpenSSL's CSPRNG, in hex. Throws StateFileError.
std::string new_incarnation();
/// Writes `text` to data_dir/name durably (a temporary file, fsync, rename, fsync of the
/// directory), creating data_dir if needed. Throws StateFileError when any step fails.
void store_file_durably(const std::filesystem::path& data_dir, const std::string& name,
                        const std::string& text);

/// std::filesystem::create_directories, plus an fsync of the parent of every directory it creates,
/// so that a new directory's entry survives a machine crash. Throws StateFileError.
void create_directories_durably(const std::filesystem::path& dir);

}  // namespace conclave::drivers
