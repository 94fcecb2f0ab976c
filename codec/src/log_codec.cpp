// SPDX-License-Identifier: Apache-2.0
#include "conclave/codec/log_codec.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "field_codec.hpp"

namespace conclave::codec {
namespace {

using nlohmann::json;
using namespace conclave::replication;
using elector::BodyFields;

using field_codec::fail;
using field_codec::node_from;

Lsn lsn_field(const json& j, const char* field) {
    const json& f = get_field(j, field);
    try {
        return lsn_from_json(f);
    } catch (const DecodeError& e) {
        fail(std::string(field) + "." + e.what());
    }
}

/// Where entry `index` of the list `field` is, for errors: "entries[3]."
std::string entry_path(const char* field, std::size_t index) {
    return std::string(field) + "[" + std::to_string(index) + "].";
}

/// Key or value of entry `index` of `list`: a byte string (wire) or a text string (JSON form), at
/// most `max` bytes.
std::string bytes_field(const json& j, const char* field, std::size_t max, const char* list,
                        std::size_t index) {
    const json& f = get_field(j, field);
    if (!f.is_binary() && !f.is_string()) {
        fail(entry_path(list, index) + field + ": expected a byte string");
    }
    const std::size_t size =
        f.is_binary() ? f.get_binary().size() : f.get_ref<const std::string&>().size();
    if (size > max) {
        fail(entry_path(list, index) + field + ": " + std::to_string(size) + " bytes, more than " +
             std::to_string(max));
    }
    if (f.is_binary()) {
        return std::string(f.get_binary().begin(), f.get_binary().end());
    }
    return f.get<std::string>();
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

std::vector<Entry> entries_from_json(const json& j, const char* field) {
    const json& list = get_field(j, field);
    if (!list.is_array()) {
        fail(std::string(field) + ": expected an array");
    }
    if (list.size() > kMaxLogEntriesPerMessage) {
        fail(std::string(field) + ": " + std::to_string(list.size()) + " entries, more than " +
             std::to_string(kMaxLogEntriesPerMessage));
    }
    std::vector<Entry> out;
    out.reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
        const json& item = list[i];
        if (!item.is_object()) {
            fail(std::string(field) + "[" + std::to_string(i) + "]: expected an object");
        }
        Entry e;
        try {
            e.lsn = lsn_field(item, "lsn");
        } catch (const DecodeError& error) {
            fail(entry_path(field, i) + error.what());
        }
        e.key = bytes_field(item, "key", kMaxLogKeyBytes, field, i);
        e.value = bytes_field(item, "value", kMaxLogValueBytes, field, i);
        out.push_back(std::move(e));
    }
    return out;
}

// The log's field codec: the elector's per type (field_codec.hpp), but for an LSN, whose
// errors name the field it is in ("prev_lsn.term: ..."), and for entries.
template <class T>
struct LogFieldCodec : field_codec::FieldCodec<T> {};

template <>
struct LogFieldCodec<Lsn> {
    static json to_json(const Lsn& v, field_codec::Form) { return v; }
    static Lsn from_json(const json& j, const char* field) { return lsn_field(j, field); }
};

template <>
struct LogFieldCodec<std::vector<Entry>> {
    static json to_json(const std::vector<Entry>& v, field_codec::Form form) {
        return entries_to_json(v, form == field_codec::Form::Wire);
    }
    static std::vector<Entry> from_json(const json& j, const char* field) {
        return entries_from_json(j, field);
    }
};

// Fields left out while they hold their default and read as the default when absent:
// non_voting (false: frames of nodes that are not repaired, and of older nodes, are unchanged).
using LogOmittedFields = FieldSet<&AppendAck::non_voting>;

// Every LSN a node sends names an entry of a term it has reached: a leader's entries, prev and
// commit points are of its term or older, and a follower's log and commit point never exceed the
// term it promised (which the envelope carries). An LSN above the envelope term is a forgery.
// Applied to every LSN and entries field of every body (from the Describe lists).
void RequireLsnWithinTerm(const Lsn& l, Term term, const std::string& field) {
    if (l.term > term) {
        fail(field + ": LSN term " + std::to_string(l.term.value) + " above the message term " +
             std::to_string(term.value));
    }
}
void RequireLsnWithinTerm(const std::vector<Entry>& entries, Term term, const std::string& field) {
    for (const Entry& e : entries) {
        RequireLsnWithinTerm(e.lsn, term, field + "[].lsn");
    }
}
// Fields that name no LSN; a field of any other type fails to compile until it is listed here or
// given its own check.
template <class T>
void RequireLsnWithinTerm(const T&, Term, const std::string&) = delete;
void RequireLsnWithinTerm(const std::uint64_t&, Term, const std::string&) {}
void RequireLsnWithinTerm(const std::uint32_t&, Term, const std::string&) {}
void RequireLsnWithinTerm(const bool&, Term, const std::string&) {}

void RequireLsnsWithinTerm(const LogMessage& m) {
    std::visit(
        [&](const auto& b) {
            using T = std::decay_t<decltype(b)>;
            boost::mp11::mp_for_each<BodyFields<T>>([&](auto d) {
                RequireLsnWithinTerm(b.*decltype(d)::pointer, m.term, decltype(d)::name);
            });
        },
        m.body);
}

json to_json_form(const LogMessage& m, field_codec::Form form) {
    json j{{"type", message_name(m.body)}, {"from", m.from.value}, {"term", m.term.value}};
    std::visit(
        [&](const auto& b) {
            field_codec::put_fields<LogFieldCodec, LogOmittedFields>(j, b, form);
        },
        m.body);
    return j;
}

// Checks across the fields of one body, run on the decoded body: what the protocol cannot send.
template <class Body>
void check_log_body(const Body&) {}

void check_log_body(const AppendAck& b) {
    if (b.non_voting && !b.ok) {
        fail("non_voting: only an ok AppendAck is sent non-voting");
    }
}

// A snapshot's length counts entries of a history: anything near 2^64 is forged.
constexpr std::uint64_t kMaxSnapshotLen = std::uint64_t{1} << 48;

void check_log_body(const InstallSnapshot& b) {
    if (b.len > kMaxSnapshotLen || b.count > b.len || b.offset > b.count ||
        b.entries.size() > b.count - b.offset) {
        fail("len/count/offset: " + std::to_string(b.offset) + " + " +
             std::to_string(b.entries.size()) + " entries do not fit in a snapshot of " +
             std::to_string(b.count) + " entries and length " + std::to_string(b.len) +
             " (at most 2^48)");
    }
    if (b.done && b.offset + b.entries.size() != b.count) {
        fail("done: the last chunk ends at entry " + std::to_string(b.offset + b.entries.size()) +
             ", not at the snapshot's count " + std::to_string(b.count));
    }
}

void check_log_body(const SnapshotAck& b) {
    if (b.len > kMaxSnapshotLen || b.offset > b.len) {
        fail("len/offset: offset " + std::to_string(b.offset) + " beyond a snapshot of length " +
             std::to_string(b.len) + " (at most 2^48)");
    }
}

/// The field the codec writes and reads entries of directly (below), in every body that has one.
constexpr std::string_view kEntriesField = "entries";

/// The body's list of entries (its std::vector<Entry> field named kEntriesField), or nullptr;
/// const for a const body.
template <class Body>
auto* EntriesOf(Body& b) {
    using List =
        std::conditional_t<std::is_const_v<Body>, const std::vector<Entry>, std::vector<Entry>>;
    List* list = nullptr;
    boost::mp11::mp_for_each<BodyFields<std::remove_const_t<Body>>>([&](auto d) {
        if constexpr (std::is_same_v<std::decay_t<decltype(b.*decltype(d)::pointer)>,
                                     std::vector<Entry>>) {
            if (std::string_view(decltype(d)::name) == kEntriesField) {
                list = &(b.*decltype(d)::pointer);
            }
        }
    });
    return list;
}

// Every field from its Describe list (field_codec.hpp), then the checks above. With `entries`
// (read from the frame apart, the document holding an empty list in their place), the body's
// entries field takes them before the checks, and `placed` says it had one.
template <class Body>
Body body_from_json(std::type_identity<Body>, const json& j, std::vector<Entry>* entries,
                    bool& placed) {
    Body b = field_codec::get_fields<LogFieldCodec, LogOmittedFields, Body>(j);
    if (entries != nullptr) {
        if (std::vector<Entry>* list = EntriesOf(b)) {
            *list = std::move(*entries);
            placed = true;
        }
    }
    check_log_body(b);
    return b;
}

LogMessage MessageFromDocument(const json& j, std::vector<Entry>* entries, bool& placed) {
    LogMessage m;
    m.from = node_from(j, "from");
    m.term = get_term(j, "term");
    const std::string type = get_string(j, "type");
    if (!field_codec::body_by_name(
            type, m.body, [&](auto tag) { return body_from_json(tag, j, entries, placed); })) {
        fail("type: unknown log message type '" + type.substr(0, 64) + "'");
    }
    RequireLsnsWithinTerm(m);
    return m;
}

}  // namespace

json log_message_to_json(const LogMessage& m, std::optional<NodeId> to) {
    json j = to_json_form(m, field_codec::Form::Text);
    if (to) {
        j["to"] = to->value;
    }
    return j;
}

LogMessage log_message_from_json(const json& j) {
    bool placed = false;
    return MessageFromDocument(j, nullptr, placed);
}

namespace {

// ---- Entries written as CBOR without a JSON document -------------------------------------------
// A document per entry (a map, an LSN map, two byte vectors) was most of the cost of encoding an
// Append. The bytes are those json::to_cbor writes for the document (RFC 8949 shortest heads, map
// keys in std::map order), so nodes read them alike; the codec tests compare the two.

/// A CBOR head: major type and argument in the shortest form.
void PutHead(std::vector<std::uint8_t>& out, std::uint8_t major, std::uint64_t n) {
    const auto m = static_cast<std::uint8_t>(major << 5);
    int bytes = 0;
    if (n <= 0x17) {
        out.push_back(static_cast<std::uint8_t>(m | n));
        return;
    }
    if (n <= 0xFF) {
        out.push_back(m | 0x18);
        bytes = 1;
    } else if (n <= 0xFFFF) {
        out.push_back(m | 0x19);
        bytes = 2;
    } else if (n <= 0xFFFFFFFF) {
        out.push_back(m | 0x1A);
        bytes = 4;
    } else {
        out.push_back(m | 0x1B);
        bytes = 8;
    }
    for (int i = bytes - 1; i >= 0; --i) {
        out.push_back(static_cast<std::uint8_t>((n >> (8 * i)) & 0xFFU));
    }
}

constexpr std::uint8_t kUnsigned = 0;
constexpr std::uint8_t kBytes = 2;
constexpr std::uint8_t kText = 3;
constexpr std::uint8_t kArray = 4;
constexpr std::uint8_t kMap = 5;

void PutText(std::vector<std::uint8_t>& out, std::string_view text) {
    PutHead(out, kText, text.size());
    out.insert(out.end(), text.begin(), text.end());
}

void PutBytes(std::vector<std::uint8_t>& out, std::string_view bytes) {
    PutHead(out, kBytes, bytes.size());
    out.insert(out.end(), bytes.begin(), bytes.end());
}

/// entries_to_json(entries, binary = true), as CBOR: [{"key", "lsn": {"counter", "term"},
/// "value"}, ...].
void PutEntries(std::vector<std::uint8_t>& out, const std::vector<Entry>& entries) {
    PutHead(out, kArray, entries.size());
    for (const Entry& e : entries) {
        PutHead(out, kMap, 3);
        PutText(out, "key");
        PutBytes(out, e.key);
        PutText(out, "lsn");
        PutHead(out, kMap, 2);
        PutText(out, "counter");
        PutHead(out, kUnsigned, e.lsn.counter);
        PutText(out, "term");
        PutHead(out, kUnsigned, e.lsn.term.value);
        PutText(out, "value");
        PutBytes(out, e.value);
    }
}

/// The body's copy without its list of entries (left empty), and that list (nullptr when the
/// body has none).
template <class Body>
Body WithoutEntries(const Body& b, const std::vector<Entry>*& entries) {
    entries = EntriesOf(b);
    Body head;
    boost::mp11::mp_for_each<BodyFields<Body>>([&](auto d) {
        if (static_cast<const void*>(&(b.*decltype(d)::pointer)) != entries) {
            head.*decltype(d)::pointer = b.*decltype(d)::pointer;
        }
    });
    return head;
}

}  // namespace

std::vector<std::uint8_t> encode_log_cbor(const LogMessage& m) {
    // The document of everything but the entries, then the top-level map written here with the
    // entries in place of their (empty) document value.
    const std::vector<Entry>* entries = nullptr;
    LogMessage head{m.from, m.term, {}};
    std::visit([&](const auto& b) { head.body = WithoutEntries(b, entries); }, m.body);
    json j = to_json_form(head, field_codec::Form::Wire);
    j["v"] = kLogMessageFormatVersion;
    std::size_t bytes = 64;
    if (entries != nullptr) {
        for (const Entry& e : *entries) {
            bytes += 48 + e.key.size() + e.value.size();
        }
    }
    std::vector<std::uint8_t> out;
    out.reserve(bytes);
    PutHead(out, kMap, j.size());
    for (const auto& [name, value] : j.items()) {
        PutText(out, name);
        if (entries != nullptr && name == kEntriesField) {
            PutEntries(out, *entries);
        } else {
            json::to_cbor(value, out);
        }
    }
    return out;
}

namespace {

// ---- Entries read from CBOR without a JSON document --------------------------------------------
// Building a document per entry was most of a follower's cost of receiving an Append. A frame
// whose entries are exactly as the encoder writes them has them read here and the rest of the
// frame read as a document; any other frame, and any frame that fails, is read whole as a
// document, which accepts and refuses what it always did (the codec tests compare the two).

/// Reads definite-length CBOR items from `in` at `pos`.
struct CborCursor {
    std::span<const std::uint8_t> in;
    std::size_t pos = 0;

    /// The next head; false when malformed, indefinite or past the end.
    bool head(std::uint8_t& major, std::uint64_t& arg) {
        if (pos >= in.size()) {
            return false;
        }
        const std::uint8_t initial = in[pos++];
        major = static_cast<std::uint8_t>(initial >> 5);
        const auto info = static_cast<std::uint8_t>(initial & 0x1FU);
        return info != 31 && read_cbor_argument(in, pos, info, arg);
    }
    bool expect(std::uint8_t major, std::uint64_t& arg) {
        std::uint8_t m = 0;
        return head(m, arg) && m == major;
    }
    /// A definite byte (kBytes) or text (kText) string.
    bool string(std::uint8_t major, std::string_view& out) {
        std::uint64_t n = 0;
        if (!expect(major, n) || n > in.size() - pos) {
            return false;
        }
        out = std::string_view(reinterpret_cast<const char*>(in.data() + pos),
                               static_cast<std::size_t>(n));
        pos += static_cast<std::size_t>(n);
        return true;
    }
    bool text_is(std::string_view want) {
        std::string_view text;
        return string(kText, text) && text == want;
    }
    /// Past one item; its nesting is bounded by cbor_depth_ok, checked first.
    bool skip() {
        std::uint8_t major = 0;
        std::uint64_t arg = 0;
        if (!head(major, arg)) {
            return false;
        }
        if (major == kBytes || major == kText) {
            if (arg > in.size() - pos) {
                return false;
            }
            pos += static_cast<std::size_t>(arg);
            return true;
        }
        if (major == kArray || major == kMap || major == 6) {  // 6: a tag and its item
            if (arg > in.size()) {
                return false;  // each item takes a byte at least
            }
            const std::uint64_t items = major == kMap ? 2 * arg : major == 6 ? 1 : arg;
            for (std::uint64_t i = 0; i < items; ++i) {
                if (!skip()) {
                    return false;
                }
            }
        }
        return true;
    }
};

/// An entries array exactly as PutEntries writes it (the heads' sizes aside) and within the
/// codec's limits; nullopt for anything else.
std::optional<std::vector<Entry>> CanonicalEntries(CborCursor& c) {
    std::uint64_t count = 0;
    if (!c.expect(kArray, count) || count > kMaxLogEntriesPerMessage) {
        return std::nullopt;
    }
    std::vector<Entry> out;
    out.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(count, c.in.size() / 32)));
    for (std::uint64_t i = 0; i < count; ++i) {
        std::uint64_t fields = 0;
        std::uint64_t lsn_fields = 0;
        std::uint64_t counter = 0;
        std::uint64_t term = 0;
        std::string_view key;
        std::string_view value;
        if (!c.expect(kMap, fields) || fields != 3 || !c.text_is("key") || !c.string(kBytes, key) ||
            key.size() > kMaxLogKeyBytes || !c.text_is("lsn") || !c.expect(kMap, lsn_fields) ||
            lsn_fields != 2 || !c.text_is("counter") || !c.expect(kUnsigned, counter) ||
            !c.text_is("term") || !c.expect(kUnsigned, term) || term >= kTermLimit ||
            !c.text_is("value") || !c.string(kBytes, value) || value.size() > kMaxLogValueBytes) {
            return std::nullopt;
        }
        out.push_back(Entry{Lsn{Term{term}, counter}, std::string(key), std::string(value)});
    }
    return out;
}

/// A frame split in two: its entries, and its bytes with an empty array in their place.
struct SplitFrame {
    std::vector<std::uint8_t> rest;
    std::vector<Entry> entries;
};

/// The split of a frame that is one definite map of distinct text keys, one of them "entries"
/// with canonical entries; nullopt for any other frame.
std::optional<SplitFrame> SplitEntries(std::span<const std::uint8_t> bytes) {
    CborCursor c{bytes};
    std::uint64_t pairs = 0;
    if (!c.expect(kMap, pairs) || pairs > 64) {
        return std::nullopt;
    }
    std::vector<std::string_view> keys;
    std::optional<std::vector<Entry>> entries;
    std::size_t begin = 0;
    std::size_t end = 0;
    for (std::uint64_t i = 0; i < pairs; ++i) {
        std::string_view key;
        if (!c.string(kText, key) || std::find(keys.begin(), keys.end(), key) != keys.end()) {
            return std::nullopt;
        }
        keys.push_back(key);
        if (key == kEntriesField) {
            begin = c.pos;
            entries = CanonicalEntries(c);
            end = c.pos;
            if (!entries) {
                return std::nullopt;
            }
        } else if (!c.skip()) {
            return std::nullopt;
        }
    }
    if (!entries || c.pos != bytes.size()) {
        return std::nullopt;
    }
    SplitFrame split;
    split.rest.reserve(bytes.size() - (end - begin) + 1);
    split.rest.insert(split.rest.end(), bytes.begin(), bytes.begin() + static_cast<long>(begin));
    split.rest.push_back(0x80);  // []
    split.rest.insert(split.rest.end(), bytes.begin() + static_cast<long>(end), bytes.end());
    split.entries = std::move(*entries);
    return split;
}

}  // namespace

LogMessage decode_log_cbor(std::span<const std::uint8_t> bytes) {
    if (cbor_depth_ok(bytes, kMaxCborDepth)) {
        if (auto split = SplitEntries(bytes)) {
            try {
                bool placed = false;
                LogMessage m = MessageFromDocument(
                    cbor_document(split->rest, kLogMessageFormatVersion, "log message"),
                    &split->entries, placed);
                if (placed) {
                    return m;
                }
            } catch (const DecodeError&) {
                // Read whole below, which names the problem as it always did.
            }
        }
    }
    // Entries add two levels (array, entry map) plus the LSN map: still well within the bound.
    return log_message_from_json(cbor_document(bytes, kLogMessageFormatVersion, "log message"));
}

}  // namespace conclave::codec
