// SPDX-License-Identifier: Apache-2.0
// The JSON fields of the message bodies, derived from their Boost.Describe lists
// (elector/messages.hpp, replication/messages.hpp): one loop writes and reads `j[name]` for every
// described field, `name` being the C++ field name, through the codec of the field's TYPE. A body
// field of a type without a codec fails to compile; a new field of a known type is on the wire
// without an edit here. What a family's codec adds (json.cpp, log_codec.cpp): the fields it
// leaves out when they hold their default (a FieldSet), and the checks across fields, run on the
// decoded body.
#pragma once

#include <array>
#include <boost/mp11/algorithm.hpp>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "conclave/codec/json.hpp"
#include "conclave/core/field_set.hpp"
#include "conclave/elector/messages.hpp"

namespace conclave::codec::field_codec {

using elector::Refusal;
using nlohmann::json;

[[noreturn]] inline void fail(const std::string& what) {
    throw DecodeError(what);
}

inline NodeId node_from(const json& j, const char* field) {
    const std::uint64_t v = get_u64(j, field);
    if (v >= kMaxClusterSize) {
        fail(std::string(field) + ": node index " + std::to_string(v) + " out of range");
    }
    return NodeId{static_cast<std::uint16_t>(v)};
}

inline std::optional<NodeId> optional_node_from(const json& j, const char* field) {
    if (get_field(j, field).is_null()) {
        return std::nullopt;
    }
    return node_from(j, field);
}

inline json optional_node(const std::optional<NodeId>& n) {
    return n ? json(n->value) : json(nullptr);
}

/// The JSON form (log lines, traces: byte strings as text) or the wire form (CBOR byte strings).
enum class Form { Text, Wire };

/// How a field of type T is written (`to_json`) and read (`from_json`, throwing DecodeError that
/// names the field). Specialised per type below; a family may derive its own codec from it.
template <class T>
struct FieldCodec;

template <>
struct FieldCodec<std::uint64_t> {
    static json to_json(std::uint64_t v, Form) { return v; }
    static std::uint64_t from_json(const json& j, const char* field) { return get_u64(j, field); }
};

template <>
struct FieldCodec<std::uint32_t> {
    static json to_json(std::uint32_t v, Form) { return v; }
    static std::uint32_t from_json(const json& j, const char* field) {
        const std::uint64_t v = get_u64(j, field);
        if (v > std::numeric_limits<std::uint32_t>::max()) {
            fail(std::string(field) + ": " + std::to_string(v) + " does not fit in 32 bits");
        }
        return static_cast<std::uint32_t>(v);
    }
};

template <>
struct FieldCodec<bool> {
    static json to_json(bool v, Form) { return v; }
    static bool from_json(const json& j, const char* field) { return get_bool(j, field); }
};

/// A term: below 2^63 (kTermLimit).
template <>
struct FieldCodec<Term> {
    static json to_json(Term v, Form) { return v.value; }
    static Term from_json(const json& j, const char* field) { return get_term(j, field); }
};

/// {"term", "counter"}; errors name the LSN's own field ("term: ...").
template <>
struct FieldCodec<Lsn> {
    static json to_json(const Lsn& v, Form) { return v; }
    static Lsn from_json(const json& j, const char* field) {
        return lsn_from_json(get_field(j, field));
    }
};

/// Its to_string() name ("stale-term", ...).
template <>
struct FieldCodec<Refusal> {
    static json to_json(Refusal v, Form) { return to_string(v); }
    static Refusal from_json(const json& j, const char* field) {
        const std::string name = get_string(j, field);
        if (const auto r = parse_enum<Refusal>(name)) {
            return *r;
        }
        fail(std::string(field) + ": unknown value '" + name.substr(0, 64) + "'");
    }
};

/// A node index below kMaxClusterSize, or null.
template <>
struct FieldCodec<std::optional<NodeId>> {
    static json to_json(const std::optional<NodeId>& v, Form) { return optional_node(v); }
    static std::optional<NodeId> from_json(const json& j, const char* field) {
        return optional_node_from(j, field);
    }
};

/// Writes every described field of `body` into `j` under its C++ name, through Codec<type>; a
/// field in `Omitted` (a FieldSet) is left out while it holds its default value (0, false, None).
template <template <class> class Codec, class Omitted, class Body>
void put_fields(json& j, const Body& body, Form form) {
    boost::mp11::mp_for_each<elector::BodyFields<Body>>([&](auto d) {
        using D = decltype(d);
        using V = std::remove_cvref_t<decltype(body.*D::pointer)>;
        const V& v = body.*D::pointer;
        if constexpr (Omitted::template contains<D::pointer>) {
            if (v == V{}) {
                return;
            }
        }
        j[D::name] = Codec<V>::to_json(v, form);
    });
}

/// Reads every described field of a Body from `j`, in declaration order, through Codec<type>;
/// a field in `Omitted` that is absent reads as its default value (frames of older nodes).
template <template <class> class Codec, class Omitted, class Body>
Body get_fields(const json& j) {
    Body body{};
    boost::mp11::mp_for_each<elector::BodyFields<Body>>([&](auto d) {
        using D = decltype(d);
        using V = std::remove_cvref_t<decltype(body.*D::pointer)>;
        if constexpr (Omitted::template contains<D::pointer>) {
            if (j.is_object() && !j.contains(D::name)) {
                return;
            }
        }
        body.*D::pointer = Codec<V>::from_json(j, D::name);
    });
    return body;
}

/// Decodes into `out` the alternative of `Variant` whose kName is `type`, as `decode` does it
/// (called with the alternative's std::type_identity); false when no alternative has that name.
template <class Variant, class Decode>
bool body_by_name(std::string_view type, Variant& out, Decode&& decode) {
    auto one = [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (type != T::kName) {
            return false;
        }
        out = decode(tag);
        return true;
    };
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
        return (one(std::type_identity<std::variant_alternative_t<I, Variant>>{}) || ...);
    }
    (std::make_index_sequence<std::variant_size_v<Variant>>{});
}

}  // namespace conclave::codec::field_codec
