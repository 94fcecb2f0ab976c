// SPDX-License-Identifier: Apache-2.0
// Node identity in the simulator: the wipe fault (a data directory that lost its vote record, its
// log or everything), incarnations, the handshake's admission or state_lost refusal, and the
// quarantine of a new incarnation. It mirrors conclaved (node/src/identity.cpp,
// Node::admit_peer / on_admitted_by / maybe_end_quarantine, net/ Mesh quarantine) and
// tla/Identity.tla. Where the simulator differs:
// - The cluster starts registered: every node knows every other node's first incarnation. (A
//   brand-new conclaved cluster registers its nodes at their first handshakes, which the
//   simulator's start_all() brings up together, before any message.)
// - The handshake is instantaneous: it happens when update_connection() brings a connection up,
//   and a refused node exits at once (a queued Crash), without sending anything.
// - The operator's repair (`conclaved --repair --min-term T`) takes T as the highest term any
//   node, the wiped node's lost records included, ever held: an omniscient operator, where the
//   real one reads the running nodes' /status while they form a quorum.
// - A message to a quarantined node is dropped when it is sent, not when it arrives: a
//   quarantine that ends while the message travels lets conclaved take it.
// - With the log, a wiped log loses its durable entries; the peers that had not yet seen the node
//   go down may still count its acknowledgements of them (LogHistory::on_repair_loss).
#include <algorithm>
#include <ostream>

#include "conclave/codec/json.hpp"
#include "conclave/core/quorum.hpp"
#include "conclave/sim/simulator.hpp"

namespace conclave::sim {
namespace {

NodeId node_id(std::size_t n) {
    return NodeId{static_cast<std::uint16_t>(n)};
}

}  // namespace

void Simulator::init_identity() {
    const std::size_t n = options_.nodes;
    data_incarnation_.assign(n, 1);
    registered_.assign(n, 1);
    repaired_identity_.assign(n, 0);
    identity_refused_.assign(n, 0);
    admitted_by_.assign(n, 0);
    known_incarnation_.assign(n * n, 1);
    lost_term_.assign(n, 0);
    next_incarnation_ = 2;
}

// The wipe applies to a stopped node's disk. Like bit flips, only while the nodes whose identity
// is not whole (wiped, refused, quarantined; with the log, a flipped or repaired log) stay a
// minority: losing a majority's state is a lost quorum that no check between peers can detect
// (tla/README.md, "Node identity"), and a repaired log needs a quorum of intact ones.
void Simulator::wipe(std::size_t n, WipeLoss loss) {
    if (conclave::is_majority(damaged_except(n) + 1, options_.nodes)) {
        ++stats_.wipes_skipped;
        return;
    }
    ++stats_.wipes;
    NodeSet connected;  // who will be told of this crash (a peer_down) but has not been yet
    for (std::size_t j = 0; j < options_.nodes; ++j) {
        if (j != n && connection_up_[link(n, j)] != 0) {
            connected.insert(node_id(j));
        }
    }
    crash(n);
    lost_term_[n] = std::max({lost_term_[n], durable_[n].term.value, history_.max_term()});
    switch (loss) {
        case WipeLoss::VoteRecord:
            // A log (and node table) beside no vote record: check_identity refuses the start.
            durable_[n] = elector::DurableState{};
            identity_refused_[n] = 1;
            break;
        case WipeLoss::Log:
            // The vote record says its identity created the log ("log": true): check_log_kept
            // refuses the start, as for a lost vote record, until the node is repaired. (A node
            // without a metadata log loses nothing.)
            log_wipe(n, connected);
            if (options_.log) {
                identity_refused_[n] = 1;
            }
            break;
        case WipeLoss::Everything:
            // An empty data directory: a fresh, unregistered incarnation with an empty peer table.
            durable_[n] = elector::DurableState{};
            data_incarnation_[n] = next_incarnation_++;
            registered_[n] = 0;
            repaired_identity_[n] = 0;
            std::fill_n(
                known_incarnation_.begin() + static_cast<std::ptrdiff_t>(n * options_.nodes),
                options_.nodes, 0U);
            history_.forget_term(node_id(n));
            log_wipe(n, connected);
            floor_len_[n] = 0;  // a new data directory: nothing held durably before
            floor_term_[n] = Term{};
            break;
    }
}

// The log's storage is gone: the node's durable entries are lost (their acknowledgements may still
// be counted by the peers that have not yet seen it go down, as with a repair's loss).
void Simulator::log_wipe(std::size_t n, NodeSet unaware) {
    if (!options_.log) {
        return;
    }
    const replication::MemoryStorage& s = log_storage_[n];
    std::vector<Lsn> lost;
    for (std::size_t i = 0; i < s.synced_count(); ++i) {
        lost.push_back(s.entries()[i].lsn);
    }
    log_storage_[n] = replication::MemoryStorage(replication::FsyncPolicy::Batched);
    flipped_[n].reset();
    log_history_.on_repair_loss(node_id(n), std::move(lost), unaware);
}

bool Simulator::identity_allows_start(std::size_t n) {
    if (identity_refused_[n] != 0) {
        ++stats_.identity_refused;  // exit status 3: the unit does not restart it
        return false;
    }
    admitted_by_[n] = 0;  // admissions are counted per start (Node::admitted_by_)
    return true;
}

// PeerIncarnations::admit: no incarnation known, this one, or a repaired node's new one.
bool Simulator::admits(std::size_t self, std::size_t peer) const {
    const std::uint32_t known = known_incarnation_[self * options_.nodes + peer];
    return options_.identity_bug == IdentityBug::AdmitAnyIncarnation || known == 0 ||
           known == data_incarnation_[peer] || repaired_identity_[peer] != 0;
}

bool Simulator::handshake(std::size_t a, std::size_t b) {
    for (const auto& [self, peer] : {std::pair{a, b}, std::pair{b, a}}) {
        if (!admits(self, peer)) {
            // state_lost: the refused node stops (Node::refused_as_lost) and stays down.
            if (identity_refused_[peer] == 0) {
                identity_refused_[peer] = 2;
                ++stats_.state_lost_refusals;
                crash_now(peer);
            }
            return false;
        }
    }
    for (const auto& [self, peer] : {std::pair{a, b}, std::pair{b, a}}) {
        known_incarnation_[self * options_.nodes + peer] = data_incarnation_[peer];
        if (registered_[peer] != 0) {
            continue;
        }
        // Node::on_admitted_by / maybe_end_quarantine: a majority of the other voters.
        admitted_by_[peer] |= std::uint64_t{1} << self;
        const NodeSet voters = cores_[peer]->state().voters;
        std::size_t others = 0;
        std::size_t admitted = 0;
        for (std::size_t v = 0; v < options_.nodes; ++v) {
            if (v != peer && voters.contains(node_id(v))) {
                ++others;
                admitted += ((admitted_by_[peer] >> v) & 1U) != 0 ? 1U : 0U;
            }
        }
        if (conclave::is_majority(admitted, others)) {
            registered_[peer] = 1;
            ++stats_.quarantines_ended;
        }
    }
    return true;
}

bool Simulator::quarantine_drops(std::size_t from, std::size_t to, const elector::Message* m,
                                 const replication::LogMessage* log_message) {
    if (registered_[from] != 0 && registered_[to] != 0) {
        return false;
    }
    ++stats_.quarantine_drops;
    ++(m ? stats_.messages_dropped : stats_.log_messages_dropped);
    if (options_.trace) {
        trace_net("Drop", m, to, "quarantine", log_message);
    }
    return true;
}

// `conclaved --repair --min-term T` on the stopped node: a vote record {T, itself} with a new
// incarnation announced as repaired (peers take it), registered; the peer table is kept when the
// vote record alone was lost. The node never votes in a term its lost records may have voted in.
void Simulator::repair_identity(std::size_t n) {
    if (identity_refused_[n] == 0 || cores_[n]) {
        return;
    }
    ++stats_.identity_repairs;
    std::uint64_t t = std::max({lost_term_[n], durable_[n].term.value, history_.max_term()});
    if (options_.log) {
        // The repaired marker R (no entry dropped): its acknowledgements count for nothing until
        // a leader of a later term has brought it up to date. The elector's term is raised to R.
        flipped_[n].reset();
        log_storage_[n].corrupt_and_repair(0, Term{t});
        t = std::max(t, log_storage_[n].meta().repaired.value_or(Term{}).value);
    }
    durable_[n] = elector::DurableState{Term{t}, node_id(n)};
    data_incarnation_[n] = next_incarnation_++;
    repaired_identity_[n] = 1;
    registered_[n] = 1;
    identity_refused_[n] = 0;
    if (options_.trace) {
        *options_.trace << nlohmann::json{{"kind", "net"},
                                          {"event", "Heal"},
                                          {"fault", "repair n" + std::to_string(n) +
                                                        " (--min-term " + std::to_string(t) + ")"}}
                               .dump()
                        << '\n';
    }
    restart(n);
}

}  // namespace conclave::sim
