// SPDX-License-Identifier: Apache-2.0
// Logging through spdlog, as text (default) or JSON lines.
//
// Text:  2026-11-23T10:00:00.123Z info  [n1] leadership changed role=leader term=7 leader=n1
// JSON:  {"ts":"2026-11-23T10:00:00.123Z","level":"info","logger":"n1","msg":"leadership changed",
//         "role":"leader","term":7,"leader":"n1"}
// One record per line in both forms; timestamps are UTC with milliseconds.
//
// Structured fields go through log_event(); plain spdlog calls (logger->info("...")) on the same
// logger work too and become a record with only "msg". Field names "ts", "level", "logger" and
// "msg" are reserved (a field with such a name is renamed with a trailing underscore).
#pragma once

#include <spdlog/common.h>
#include <spdlog/logger.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/node/cluster_config.hpp"

namespace conclave::node {

/// Parses "trace" .. "off"; nullopt for anything else.
std::optional<spdlog::level::level_enum> parse_log_level(std::string_view name);

/// A logger named `name` writing to `sinks` (default: stderr) in the given format and level. Not
/// registered globally. Every record is flushed (logs are low-rate: transitions and errors).
std::shared_ptr<spdlog::logger> make_logger(const std::string& name, const LogSettings& settings,
                                            std::vector<spdlog::sink_ptr> sinks = {});

/// Logs `msg` with structured `fields` (a JSON object; other values are logged as "value").
void log_event(spdlog::logger& logger, spdlog::level::level_enum level, std::string_view msg,
               const nlohmann::json& fields = nlohmann::json::object());

}  // namespace conclave::node
