// SPDX-License-Identifier: Apache-2.0
// The node's identity and the cross-check of its durable state at every start.
//
// A node's durable state is one identity: the vote record (elector-state.json, which carries the
// incarnation and a checksum), the metadata log (<data_dir>/log) and the node table
// (members.json). The identity is created once, with an empty data directory, and written first,
// before anything else of the node's state exists; so a start that finds a log or a node table but
// no vote record is a node whose votes were lost, and is refused with the safe ways back (the
// vote record cannot be rebuilt from the log: a node votes in a term before its log hears of it).
// A vote record that fails its checksum, or names another node or cluster, is refused the same
// way. A data directory that is entirely empty gets a fresh incarnation, not yet registered: it
// is quarantined (its mesh drops every elector and log frame both ways, so it neither votes nor
// acknowledges) until a majority of the other voters have admitted it, which each does only when
// it knows no other incarnation of the node. Its peers so tell it apart from its former self
// (docs/design.md, "Node identity").
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "conclave/drivers/state_file.hpp"
#include "conclave/node/cluster_config.hpp"

namespace conclave::node {

/// The start was refused; what() names the file, what is wrong and the ways back.
class IdentityError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct IdentityCheck {
    drivers::NodeIdentity identity;
    bool created = false;   // the data directory was empty: a fresh incarnation was written
    bool upgraded = false;  // a format 1 vote record was given an identity
};

/// Reads (and on an empty data directory creates, durably) the node's identity, and checks the
/// rest of the durable state against it. Throws IdentityError, or drivers::StateFileError for a
/// vote record that cannot be read, parsed or checksummed.
IdentityCheck check_identity(const ClusterConfig& config);

/// The number of nodes the vote record's `voted_for` indexes: the stored node table's
/// (members.json, the table a joined node was accepted with or learnt since) when there is one,
/// else the config file's `nodes`. A table that cannot be read counts the config's nodes (the start
/// refuses the table itself later, naming it).
std::size_t vote_record_cluster_size(const ClusterConfig& config);

/// The metadata log's data file (`<data_dir>/log/log.dat`), created with the log.
std::filesystem::path metadata_log_file(const ClusterConfig& config);

/// Throws IdentityError when `identity` has created the metadata log but the log file is gone (a
/// log lost beside a kept vote record).
void check_log_kept(const ClusterConfig& config, const drivers::NodeIdentity& identity);

/// Throws IdentityError when the vote record's term is below `log_term`, the highest term of an
/// entry the metadata log holds: the log only takes entries of a term its elector has made durable
/// (drivers::LogDriver), so such a vote record is an older copy, and the node may have voted in
/// terms it no longer remembers (two leaders in one term, with one fencing token).
void check_vote_record_covers_log(const ClusterConfig& config, Term vote_term, Term log_term);

/// The files of the data directory, other than the vote record, that show this node has taken part
/// in a cluster (empty: none). Used by check_identity() and `conclaved --repair`.
std::vector<std::string> state_evidence(const ClusterConfig& config);

/// The ways back from a lost or damaged vote record, for error messages.
std::string identity_ways_back(const ClusterConfig& config);

/// The incarnations this node has admitted its peers with (<data_dir>/peers.json, checksummed,
/// written durably before the peer is admitted). A peer that comes back with another incarnation
/// has lost or replaced its state and is refused (HandshakeRefusal::StateLost), unless it is
/// repaired (`conclaved --repair`: the operator's --min-term bounds its lost votes). A removed
/// peer is forgotten, so that it can join again with an empty data directory. Beside each
/// incarnation, the highest durable term it announced (written durably at each rise, which only
/// an election causes), so that a restart of this node does not forget what a peer restored from
/// an older copy must be refused for (HandshakeRefusal::StateRegressed).
class PeerIncarnations {
  public:
    static constexpr const char* kFileName = "peers.json";
    /// Reads the file (none: nothing remembered). Throws drivers::StateFileError for a damaged one.
    explicit PeerIncarnations(std::filesystem::path data_dir);
    /// nullopt: admitted (remembered durably first); else why `peer` is refused. An empty
    /// incarnation (a peer that announces none) is admitted and not remembered. Throws
    /// drivers::StateFileError when the file cannot be written.
    std::optional<std::string> admit(const std::string& peer, const std::string& incarnation,
                                     bool repaired);
    /// Forgets `peer` (durably), e.g. once its removal has committed.
    void forget(const std::string& peer);
    const std::map<std::string, std::string>& known() const { return known_; }
    /// The highest durable term `incarnation` of `peer` announced (nullopt: none remembered, or
    /// the peer is known by another incarnation).
    std::optional<std::uint64_t> announced_term(const std::string& peer,
                                                const std::string& incarnation) const;
    /// Records that `incarnation` of `peer` announced `term` (durably, when it is higher than
    /// what is remembered; an incarnation other than the admitted one is not recorded). Throws
    /// drivers::StateFileError when the file cannot be written.
    void remember_term(const std::string& peer, const std::string& incarnation, std::uint64_t term);

  private:
    void store() const;
    std::filesystem::path data_dir_;
    std::map<std::string, std::string> known_;
    std::map<std::string, std::uint64_t> terms_;  // by peer, for its known incarnation
};

}  // namespace conclave::node
