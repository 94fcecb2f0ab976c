// SPDX-License-Identifier: Apache-2.0
#include "conclave/codec/log_codec.hpp"

#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace conclave::codec {
namespace {

using nlohmann::json;
using namespace conclave::replication;
using elector::kBodyFieldCount;

[[noreturn]] void fail(const std::string& what) {
    throw DecodeError(what);
}

NodeId node_from(const json& j, const char* field) {
    const std::uint64_t v = get_u64(j, field);
    if (v >= kMaxClusterSize) {
        fail(std::string(field) + ": node index " + std::to_string(v) + " out of range");
    }
    return NodeId{static_cast<std::uint16_t>(v)};
}

Lsn lsn_field(const json& j, const char* field) {
    const json& f = get_field(j, field);
    try {
        return lsn_from_json(f);
    } catch (const DecodeError& e) {
        fail(std::string(field) + "." + e.what());
    }
}

/// Key or value: a byte string (wire) or a text string (JSON form), at most `max` bytes.
std::string bytes_field(const json& j, const char* field, std::size_t max, const std::string& at) {
    const json& f = get_field(j, field);
    std::string out;
    if (f.is_binary()) {
        const auto& b = f.get_binary();
        if (b.size() > max) {
            fail(at + field + ": " + std::to_string(b.size()) + " bytes, more than " +
                 std::to_string(max));
        }
        out.assign(b.begin(), b.end());
    } else if (f.is_string()) {
        out = f.get<std::string>();
        if (out.size() > max) {
            fail(at + field + ": " + std::to_string(out.size()) + " bytes, more than " +
                 std::to_string(max));
        }
    } else {
        fail(at + field + ": expected a byte string");
    }
    return out;
}

// Every LSN a node sends names an entry of a term it has reached: a leader's entries, prev and
// commit points are of its term or older, and a follower's log and commit point never exceed the
// term it promised (which the envelope carries). An LSN above the envelope term is a forgery.
void RequireLsnWithinTerm(const Lsn& l, Term term, const char* field) {
    if (l.term > term) {
        fail(std::string(field) + ": LSN term " + std::to_string(l.term.value) +
             " above the message term " + std::to_string(term.value));
    }
}

void RequireLsnsWithinTerm(const LogMessage& m) {
    const Term t = m.term;
    std::visit(
        [&](const auto& b) {
            using T = std::decay_t<decltype(b)>;
            if constexpr (std::is_same_v<T, SyncResponse>) {
                RequireLsnWithinTerm(b.last_lsn, t, "last_lsn");
                RequireLsnWithinTerm(b.commit_lsn, t, "commit_lsn");
            } else if constexpr (std::is_same_v<T, Append>) {
                RequireLsnWithinTerm(b.prev_lsn, t, "prev_lsn");
                RequireLsnWithinTerm(b.commit_lsn, t, "commit_lsn");
                for (const Entry& e : b.entries) {
                    RequireLsnWithinTerm(e.lsn, t, "entries[].lsn");
                }
            } else if constexpr (std::is_same_v<T, AppendAck>) {
                RequireLsnWithinTerm(b.prev_lsn, t, "prev_lsn");
                RequireLsnWithinTerm(b.last_lsn, t, "last_lsn");
                RequireLsnWithinTerm(b.commit_lsn, t, "commit_lsn");
            } else if constexpr (std::is_same_v<T, FetchRequest>) {
                RequireLsnWithinTerm(b.after_lsn, t, "after_lsn");
                RequireLsnWithinTerm(b.up_to_lsn, t, "up_to_lsn");
            } else if constexpr (std::is_same_v<T, FetchResponse>) {
                RequireLsnWithinTerm(b.after_lsn, t, "after_lsn");
                RequireLsnWithinTerm(b.last_lsn, t, "last_lsn");
                for (const Entry& e : b.entries) {
                    RequireLsnWithinTerm(e.lsn, t, "entries[].lsn");
                }
            } else if constexpr (std::is_same_v<T, InstallSnapshot>) {
                RequireLsnWithinTerm(b.lsn, t, "lsn");
                for (const Entry& e : b.entries) {
                    RequireLsnWithinTerm(e.lsn, t, "entries[].lsn");
                }
            } else {
                static_assert(std::is_same_v<T, SyncRequest>);
            }
        },
        m.body);
}

json entries_to_json(const std::vector<Entry>& entries, bool binary) {
    json out = json::array();
    for (const Entry& e : entries) {
        json item{{"lsn", e.lsn}};
        if (binary) {
            item["key"] = json::binary(std::vector<std::uint8_t>(e.key.begin(), e.key.end()));
            item["value"] = json::binary(std::vector<std::uint8_t>(e.value.begin(), e.value.end()));
        } else {
            item["key"] = e.key;
            item["value"] = e.value;
        }
        out.push_back(std::move(item));
    }
    return out;
}

std::vector<Entry> entries_from_json(const json& j) {
    const json& list = get_field(j, "entries");
    if (!list.is_array()) {
        fail("entries: expected an array");
    }
    if (list.size() > kMaxLogEntriesPerMessage) {
        fail("entries: " + std::to_string(list.size()) + " entries, more than " +
             std::to_string(kMaxLogEntriesPerMessage));
    }
    std::vector<Entry> out;
    out.reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string at = "entries[" + std::to_string(i) + "].";
        const json& item = list[i];
        if (!item.is_object()) {
            fail(at.substr(0, at.size() - 1) + ": expected an object");
        }
        Entry e;
        try {
            e.lsn = lsn_field(item, "lsn");
        } catch (const DecodeError& error) {
            fail(at + error.what());
        }
        e.key = bytes_field(item, "key", kMaxLogKeyBytes, at);
        e.value = bytes_field(item, "value", kMaxLogValueBytes, at);
        out.push_back(std::move(e));
    }
    return out;
}

json to_json_form(const LogMessage& m, bool binary) {
    json j{{"type", message_name(m.body)}, {"from", m.from.value}, {"term", m.term.value}};
    std::visit(
        [&](const auto& b) {
            using T = std::decay_t<decltype(b)>;
            if constexpr (std::is_same_v<T, SyncResponse>) {
                static_assert(kBodyFieldCount<T> == 2, "to_json_form must encode every field");
                j["last_lsn"] = b.last_lsn;
                j["commit_lsn"] = b.commit_lsn;
            } else if constexpr (std::is_same_v<T, Append>) {
                static_assert(kBodyFieldCount<T> == 3, "to_json_form must encode every field");
                j["prev_lsn"] = b.prev_lsn;
                j["entries"] = entries_to_json(b.entries, binary);
                j["commit_lsn"] = b.commit_lsn;
            } else if constexpr (std::is_same_v<T, AppendAck>) {
                static_assert(kBodyFieldCount<T> == 5, "to_json_form must encode every field");
                j["ok"] = b.ok;
                j["prev_lsn"] = b.prev_lsn;
                j["last_lsn"] = b.last_lsn;
                j["commit_lsn"] = b.commit_lsn;
                if (b.non_voting) {  // absent = false: older frames decode unchanged
                    j["non_voting"] = true;
                }
            } else if constexpr (std::is_same_v<T, FetchRequest>) {
                static_assert(kBodyFieldCount<T> == 3, "to_json_form must encode every field");
                j["after_lsn"] = b.after_lsn;
                j["up_to_lsn"] = b.up_to_lsn;
                j["max_entries"] = b.max_entries;
            } else if constexpr (std::is_same_v<T, FetchResponse>) {
                static_assert(kBodyFieldCount<T> == 3, "to_json_form must encode every field");
                j["after_lsn"] = b.after_lsn;
                j["entries"] = entries_to_json(b.entries, binary);
                j["last_lsn"] = b.last_lsn;
            } else if constexpr (std::is_same_v<T, InstallSnapshot>) {
                static_assert(kBodyFieldCount<T> == 6, "to_json_form must encode every field");
                j["lsn"] = b.lsn;
                j["len"] = b.len;
                j["offset"] = b.offset;
                j["entries"] = entries_to_json(b.entries, binary);
                j["done"] = b.done;
                j["fetch"] = b.fetch;
            } else {
                static_assert(std::is_same_v<T, SyncRequest> && kBodyFieldCount<T> == 0);
            }
        },
        m.body);
    return j;
}

// One decoder per body, found by overload resolution: a body without one fails to compile.
SyncRequest body_from_json(std::type_identity<SyncRequest>, const json&) {
    static_assert(kBodyFieldCount<SyncRequest> == 0, "body_from_json must decode every field");
    return SyncRequest{};
}
SyncResponse body_from_json(std::type_identity<SyncResponse>, const json& j) {
    static_assert(kBodyFieldCount<SyncResponse> == 2, "body_from_json must decode every field");
    return SyncResponse{lsn_field(j, "last_lsn"), lsn_field(j, "commit_lsn")};
}
Append body_from_json(std::type_identity<Append>, const json& j) {
    static_assert(kBodyFieldCount<Append> == 3, "body_from_json must decode every field");
    return Append{lsn_field(j, "prev_lsn"), entries_from_json(j), lsn_field(j, "commit_lsn")};
}
AppendAck body_from_json(std::type_identity<AppendAck>, const json& j) {
    static_assert(kBodyFieldCount<AppendAck> == 5, "body_from_json must decode every field");
    AppendAck b{get_bool(j, "ok"), lsn_field(j, "prev_lsn"), lsn_field(j, "last_lsn"),
                lsn_field(j, "commit_lsn")};
    // Optional (repaired nodes): absent in frames of nodes that are not repaired.
    if (j.contains("non_voting")) {
        b.non_voting = get_bool(j, "non_voting");
        if (b.non_voting && !b.ok) {
            fail("non_voting: only an ok AppendAck is sent non-voting");
        }
    }
    return b;
}
FetchRequest body_from_json(std::type_identity<FetchRequest>, const json& j) {
    static_assert(kBodyFieldCount<FetchRequest> == 3, "body_from_json must decode every field");
    const std::uint64_t max = get_u64(j, "max_entries");
    if (max > std::numeric_limits<std::uint32_t>::max()) {
        fail("max_entries: " + std::to_string(max) + " does not fit in 32 bits");
    }
    return FetchRequest{lsn_field(j, "after_lsn"), lsn_field(j, "up_to_lsn"),
                        static_cast<std::uint32_t>(max)};
}
FetchResponse body_from_json(std::type_identity<FetchResponse>, const json& j) {
    static_assert(kBodyFieldCount<FetchResponse> == 3, "body_from_json must decode every field");
    return FetchResponse{lsn_field(j, "after_lsn"), entries_from_json(j), lsn_field(j, "last_lsn")};
}

InstallSnapshot body_from_json(std::type_identity<InstallSnapshot>, const json& j) {
    static_assert(kBodyFieldCount<InstallSnapshot> == 6, "body_from_json must decode every field");
    InstallSnapshot b{lsn_field(j, "lsn"),  get_u64(j, "len"),   get_u64(j, "offset"),
                      entries_from_json(j), get_bool(j, "done"), get_bool(j, "fetch")};
    // A snapshot's length counts entries of a history: anything near 2^64 is forged.
    constexpr std::uint64_t kMaxLen = std::uint64_t{1} << 48;
    if (b.len > kMaxLen || b.offset > b.len || b.entries.size() > b.len - b.offset) {
        fail("len/offset: " + std::to_string(b.offset) + " + " + std::to_string(b.entries.size()) +
             " entries do not fit in a snapshot of length " + std::to_string(b.len) +
             " (at most 2^48)");
    }
    return b;
}

// Decodes the body whose kName is `type`; false when no body has that name.
template <std::size_t... I>
bool body_by_name(std::string_view type, const json& j, LogMessageBody& out,
                  std::index_sequence<I...>) {
    auto one = [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (type != T::kName) {
            return false;
        }
        out = body_from_json(tag, j);
        return true;
    };
    return (one(std::type_identity<std::variant_alternative_t<I, LogMessageBody>>{}) || ...);
}

}  // namespace

json log_message_to_json(const LogMessage& m, std::optional<NodeId> to) {
    json j = to_json_form(m, /*binary=*/false);
    if (to) {
        j["to"] = to->value;
    }
    return j;
}

LogMessage log_message_from_json(const json& j) {
    LogMessage m;
    m.from = node_from(j, "from");
    m.term = get_term(j, "term");
    const std::string type = get_string(j, "type");
    if (!body_by_name(type, j, m.body,
                      std::make_index_sequence<std::variant_size_v<LogMessageBody>>{})) {
        fail("type: unknown log message type '" + type.substr(0, 64) + "'");
    }
    RequireLsnsWithinTerm(m);
    return m;
}

std::vector<std::uint8_t> encode_log_cbor(const LogMessage& m) {
    json j = to_json_form(m, /*binary=*/true);
    j["v"] = kLogMessageFormatVersion;
    return json::to_cbor(j);
}

LogMessage decode_log_cbor(std::span<const std::uint8_t> bytes) {
    // Entries add two levels (array, entry map) plus the LSN map: still well within the bound.
    return log_message_from_json(cbor_document(bytes, kLogMessageFormatVersion, "log message"));
}

}  // namespace conclave::codec
