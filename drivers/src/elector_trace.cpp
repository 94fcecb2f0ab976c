// SPDX-License-Identifier: Apache-2.0
#include "conclave/drivers/elector_trace.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "conclave/codec/json.hpp"

namespace conclave::drivers {

namespace {

std::int64_t TraceWallMillis() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace

std::string trace_action_name(const runtime::StepInput& input) {
    using runtime::InputKind;
    switch (input.kind) {
        case InputKind::Start:
            return "Start";
        case InputKind::Stop:
            return "Stop";
        case InputKind::Receive:
            return "Handle" + std::string(elector::kMessageNames[input.message->body.index()]);
        case InputKind::PeerUp:
            return "PeerUp";
        case InputKind::PeerDown:
            return "PeerDown";
        case InputKind::TimerFired:
            return std::string(to_string(*input.timer)) + "Fired";
        case InputKind::TransferLeadership:
            return "TransferLeadership";
        case InputKind::SetPriority:
            return "SetPriority";
        case InputKind::SetVoters:
            return "SetVoters";
    }
    return "Unknown";
}

ElectorTrace::ElectorTrace(const std::filesystem::path& path, const elector::Config& config,
                           const elector::DurableState& restored)
    : path_(path), self_(config.self) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) {
        throw std::runtime_error("--trace-elector: cannot open '" + path.string() +
                                 "': " + std::strerror(errno));
    }
    nlohmann::json restored_json{{"term", restored.term.value}, {"voted_for", nullptr}};
    if (restored.voted_for) {
        restored_json["voted_for"] = restored.voted_for->value;
    }
    const nlohmann::json header{{"kind", "header"},
                                {"version", 1},
                                {"nodes", config.cluster_size},
                                {"quorum", config.effective_quorum()},
                                {"scouting", config.scouting},
                                {"check_quorum", config.check_quorum},
                                {"heartbeat_check_misses", config.heartbeat_check_misses()},
                                {"node", self_.value},
                                {"pid", ::getpid()},
                                {"wall_ms", TraceWallMillis()},
                                {"restored", std::move(restored_json)}};
    if (auto error = write(header)) {
        throw std::runtime_error(*error);
    }
}

ElectorTrace::~ElectorTrace() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

std::optional<std::string> ElectorTrace::step(const runtime::StepInput& input,
                                              const elector::Actions& actions,
                                              const elector::ElectorState& state,
                                              std::span<const NodeId> others) {
    nlohmann::json line = codec::trace_step_line(trace_action_name(input), actions, others, state,
                                                 self_, input.message, input.peer, input.timer);
    line["seq"] = ++seq_;
    line["node"] = self_.value;
    line["wall_ms"] = TraceWallMillis();
    if (input.kind == runtime::InputKind::PeerDown && !proves_peer_gone(input.loss)) {
        line["loss"] = "local";  // Elector.tla's LocalClose: nothing proves the peer gone
    }
    return write(line);
}

std::optional<std::string> ElectorTrace::issue_lsn(const elector::ElectorState& state) {
    return write(nlohmann::json{{"kind", "step"},
                                {"seq", ++seq_},
                                {"node", self_.value},
                                {"action", "IssueLsn"},
                                {"sent", nlohmann::json::array()},
                                {"state", state},
                                {"wall_ms", TraceWallMillis()}});
}

// One write(2) per line on an O_APPEND descriptor: a process killed mid-trace leaves whole lines.
std::optional<std::string> ElectorTrace::write(const nlohmann::json& line) {
    if (fd_ < 0) {
        return std::nullopt;  // tracing stopped at an earlier error
    }
    const std::string text = line.dump() + '\n';
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            const std::string error = "elector trace '" + path_.string() +
                                      "': write failed: " + std::strerror(errno) +
                                      "; tracing stops here";
            ::close(fd_);
            fd_ = -1;
            return error;
        }
        done += static_cast<std::size_t>(n);
    }
    return std::nullopt;
}

}  // namespace conclave::drivers
