// SPDX-License-Identifier: Apache-2.0
#include "conclave/codec/membership_codec.hpp"

#include <nlohmann/json.hpp>
#include <vector>

#include "conclave/core/types.hpp"

namespace conclave::codec {
namespace {

using replication::Configuration;
using replication::Member;

nlohmann::json MembersToJson(const std::vector<Member>& members) {
    nlohmann::json out = nlohmann::json::array();
    for (const Member& m : members) {
        out.push_back({{"id", m.id}, {"peer", m.peer}, {"http", m.http}});
    }
    return out;
}

std::optional<std::string> BoundedString(const nlohmann::json& j, const char* field,
                                         bool may_be_empty) {
    const auto it = j.find(field);
    if (it == j.end() || !it->is_string()) {
        return std::nullopt;
    }
    const auto& s = it->get_ref<const std::string&>();
    if (s.size() > kMaxConfigStringBytes || (!may_be_empty && s.empty())) {
        return std::nullopt;
    }
    return s;
}

bool MembersFromJson(const nlohmann::json& j, std::vector<Member>& out) {
    if (!j.is_array() || j.size() > kMaxConfigMembers) {
        return false;
    }
    for (const nlohmann::json& m : j) {
        if (!m.is_object() || m.size() != 3) {
            return false;
        }
        auto id = BoundedString(m, "id", false);
        auto peer = BoundedString(m, "peer", true);
        auto http = BoundedString(m, "http", true);
        if (!id || !peer || !http) {
            return false;
        }
        out.push_back(Member{std::move(*id), std::move(*peer), std::move(*http)});
    }
    return true;
}

}  // namespace

bool TableFromJson(const nlohmann::json& j, std::vector<std::string>& out) {
    if (!j.is_array() || j.empty() || j.size() > kMaxConfigMembers) {
        return false;
    }
    for (const nlohmann::json& id : j) {
        if (!id.is_string() || id.get_ref<const std::string&>().empty() ||
            id.get_ref<const std::string&>().size() > kMaxConfigStringBytes) {
            return false;
        }
        out.push_back(id.get<std::string>());
    }
    return true;
}

std::string encode_configuration(const Configuration& cfg) {
    nlohmann::json j{{"version", cfg.version},
                     {"voters", MembersToJson(cfg.voters)},
                     {"learners", MembersToJson(cfg.learners)}};
    if (!cfg.table.empty()) {
        j["table"] = cfg.table;
    }
    return j.dump();
}

std::optional<Configuration> decode_configuration(std::string_view value) {
    const nlohmann::json j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || j.size() < 3 || j.size() > 4) {
        return std::nullopt;
    }
    const auto version = j.find("version");
    const auto voters = j.find("voters");
    const auto learners = j.find("learners");
    if (version == j.end() || !version->is_number_unsigned() || voters == j.end() ||
        learners == j.end()) {
        return std::nullopt;
    }
    Configuration cfg;
    cfg.version = version->get<std::uint64_t>();
    if (cfg.version >= kTermLimit || !MembersFromJson(*voters, cfg.voters) ||
        !MembersFromJson(*learners, cfg.learners)) {
        return std::nullopt;
    }
    if (j.size() == 4) {
        const auto table = j.find("table");
        if (table == j.end() || !TableFromJson(*table, cfg.table)) {
            return std::nullopt;
        }
    }
    return cfg;
}

}  // namespace conclave::codec
