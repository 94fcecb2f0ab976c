// SPDX-License-Identifier: Apache-2.0
// pack(): every field of every message body that the explorer tells apart changes the packed
// message, read off the bodies' Describe lists (a new field is covered without an edit here).
#include <catch2/catch.hpp>
#include <string>

#include "conclave/sim/state_hash.hpp"

using namespace conclave;
using namespace conclave::elector;
using namespace conclave::sim;

namespace {

// A value other than the field type's default.
std::uint64_t other_value(std::uint64_t) {
    return 1;
}
bool other_value(bool) {
    return true;
}
Refusal other_value(Refusal) {
    return Refusal::StaleTerm;
}
Term other_value(Term) {
    return Term{1};
}
Lsn other_value(const Lsn&) {
    return Lsn{Term{1}, 1};
}
std::optional<NodeId> other_value(const std::optional<NodeId>&) {
    return NodeId{0};
}

// For each body: the fields whose change does not change pack(), as "Body.field".
template <class... Bodies>
std::vector<std::string> fields_pack_ignores(std::type_identity<std::variant<Bodies...>>) {
    std::vector<std::string> ignored;
    auto body = [&](auto tag) {
        using T = typename decltype(tag)::type;
        boost::mp11::mp_for_each<BodyFields<T>>([&](auto d) {
            using D = decltype(d);
            const Message plain{NodeId{1}, Term{2}, T{}};
            T changed{};
            changed.*D::pointer = other_value(changed.*D::pointer);
            if (pack(NodeId{0}, plain) == pack(NodeId{0}, Message{NodeId{1}, Term{2}, changed})) {
                ignored.push_back(std::string(T::kName) + "." + D::name);
            }
        });
    };
    (body(std::type_identity<Bodies>{}), ...);
    return ignored;
}

}  // namespace

TEST_CASE("pack() tells apart messages that differ in any field but the heartbeat round") {
    CHECK(fields_pack_ignores(std::type_identity<MessageBody>{}) ==
          std::vector<std::string>{"LeaderHeartbeat.round", "HeartbeatAck.round"});
}

TEST_CASE("pack() tells apart the envelope: destination, sender, type and term") {
    const Message m{NodeId{1}, Term{2}, ScoutingRequest{}};
    CHECK(pack(NodeId{0}, m) != pack(NodeId{2}, m));
    CHECK(pack(NodeId{0}, m) != pack(NodeId{0}, Message{NodeId{2}, Term{2}, ScoutingRequest{}}));
    CHECK(pack(NodeId{0}, m) != pack(NodeId{0}, Message{NodeId{1}, Term{3}, ScoutingRequest{}}));
    CHECK(pack(NodeId{0}, m) != pack(NodeId{0}, Message{NodeId{1}, Term{2}, ElectionProposal{}}));
}
