// SPDX-License-Identifier: Apache-2.0
// Human-readable names for logs, traces and test failure messages.
#include <optional>
#include <sstream>
#include <type_traits>

#include "conclave/core/enum_names.hpp"
#include "conclave/core/types.hpp"
#include "conclave/elector/actions.hpp"
#include "conclave/elector/messages.hpp"

namespace conclave::elector {

std::string_view message_name(const MessageBody& body) {
    return kMessageNames[body.index()];
}

std::string_view to_string(Refusal r) {
    return enum_name(r);
}

namespace {

void print_field(std::ostream& os, const char* name, std::uint64_t v) {
    os << ' ' << name << '=' << v;
}
void print_field(std::ostream& os, const char* name, bool v) {
    os << ' ' << name << '=' << v;
}
void print_field(std::ostream& os, const char* name, Refusal v) {
    os << ' ' << name << '=' << to_string(v);
}
void print_field(std::ostream& os, const char* name, Term v) {
    os << ' ' << name << '=' << v.value;
}
void print_field(std::ostream& os, const char* name, const Lsn& v) {
    os << ' ' << name << '=' << to_string(v);
}
void print_field(std::ostream& os, const char* name, const std::optional<NodeId>& v) {
    if (v) {  // left out when unset
        os << ' ' << name << '=' << to_string(*v);
    }
}

}  // namespace

// Every field of every body, in its BOOST_DESCRIBE_STRUCT order (messages.hpp): a new field is
// printed without a change here (or fails to compile until print_field knows its type).
std::string to_string(const Message& m) {
    std::ostringstream os;
    os << message_name(m.body) << "{from=" << to_string(m.from) << " term=" << m.term.value;
    std::visit(
        [&](const auto& b) {
            using T = std::decay_t<decltype(b)>;
            boost::mp11::mp_for_each<BodyFields<T>>(
                [&](auto field) { print_field(os, field.name, b.*field.pointer); });
        },
        m.body);
    os << "}";
    return os.str();
}

std::string_view to_string(Role r) {
    return enum_name(r);
}

std::string_view to_string(Reason r) {
    return enum_name<NameStyle::UpperSnake>(r);
}

std::string_view to_string(TimerId t) {
    return enumerator_name(t);
}

std::string_view to_string(AlarmKind k) {
    return enum_name<NameStyle::UpperSnake>(k);
}

std::string to_string(const Action& a) {
    return std::visit(
        [](const auto& x) -> std::string {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, SendTo>) {
                return "SendTo(" + to_string(x.to) + ", " + to_string(x.message) + ")";
            } else if constexpr (std::is_same_v<T, Broadcast>) {
                return "Broadcast(" + to_string(x.message) + ")";
            } else if constexpr (std::is_same_v<T, ArmTimer>) {
                return "ArmTimer(" + std::string(to_string(x.timer)) + ", " +
                       std::to_string(x.delay.count()) + "ms)";
            } else if constexpr (std::is_same_v<T, CancelTimer>) {
                return "CancelTimer(" + std::string(to_string(x.timer)) + ")";
            } else if constexpr (std::is_same_v<T, PersistState>) {
                return "Persist(term=" + to_string(x.state.term) + " voted_for=" +
                       (x.state.voted_for ? to_string(*x.state.voted_for) : "none") + ")";
            } else if constexpr (std::is_same_v<T, NotifyLeadership>) {
                const auto& s = x.snapshot;
                return "Notify(" + std::string(to_string(s.role)) + " term=" + to_string(s.term) +
                       " leader=" + (s.leader ? to_string(*s.leader) : "none") +
                       " token=" + std::to_string(s.fencing_token) +
                       " reason=" + std::string(to_string(s.reason)) + ")";
            } else {
                static_assert(std::is_same_v<T, RaiseAlarm>, "to_string must print every action");
                return "Alarm(" + std::string(to_string(x.kind)) + " peer=" + to_string(x.peer) +
                       " term=" + to_string(x.term) + ")";
            }
        },
        a);
}

}  // namespace conclave::elector
