// SPDX-License-Identifier: Apache-2.0
// leader-bounce's command line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>

namespace conclave::bounce {

enum class Scenario : std::uint8_t {
    NonSticky,
    PingPong,
    LeaderCrash,
    LeaderPause,
    RollingRestart,
    Chaos,
    DiskFull,
    RollingReplace,
    CrashChaos,
    Preferred
};

std::string_view to_string(Scenario s);

/// The metadata proposer: Auto runs it when the daemon serves GET /metadata.
enum class MetadataMode : std::uint8_t { Auto, On, Off };

struct Options {
    Scenario scenario = Scenario::PingPong;
    std::size_t node_count = 0;  // 0: 4 for non-sticky and ping-pong, 3 otherwise
    bool scouting = true;
    bool compare = false;  // run with scouting on and off
    std::string profile = "fast";
    std::optional<double> duration_s;  // fault hold time (chaos, crash-chaos: total time)
    std::uint64_t seed = 1;
    std::optional<std::filesystem::path> html_path;
    std::optional<std::filesystem::path> svg_path;
    std::optional<std::filesystem::path> json_path;
    std::optional<std::filesystem::path> conclaved;
    bool keep_dir = false;
    bool quiet = false;  // no live timeline
    MetadataMode metadata = MetadataMode::Auto;
    std::uint32_t rate_per_s = 100;  // metadata proposals per second
    std::size_t rounds = 3;          // preferred: kill-and-restart rounds
    /// preferred: timing.preferred_stability_ms in the configs; nullopt: the profile's value.
    std::optional<std::int64_t> preferred_stability_ms;
    /// The daemons' "backend" object as JSON text (an etcd cluster or a ZooKeeper ensemble the
    /// user runs); empty: the built-in elector.
    std::string backend;
    /// --trace-elector DIR: each daemon's elector trace in DIR/<node>.ndjson; empty: none.
    std::filesystem::path trace_dir;

    std::size_t nodes() const;
    /// Nodes started later that join at run time (rolling-replace: one per original node).
    std::size_t spares() const;
    /// preferred: the hand-back's stability period the configs carry (given, else the
    /// profile's: fast 2000 ms, default 10000 ms, node/README.md's timing table).
    std::int64_t preferred_stability() const;
};

struct HelpRequested {};
/// Options, HelpRequested, or an error message naming the offending argument.
std::variant<Options, HelpRequested, std::string> parse_options(int argc, const char* const* argv);
std::string usage();

}  // namespace conclave::bounce
