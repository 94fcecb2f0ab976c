// SPDX-License-Identifier: Apache-2.0
// Prints the elector's message bodies and their fields, from the Boost.Describe lists
// (elector/messages.hpp), as one JSON object {"Body": ["field", ...], ...} in declaration order.
// check-message-fields.py compares it with tla/trace_to_tla.py's BODY_FIELDS table.
#include <iostream>
#include <type_traits>
#include <variant>

#include "conclave/elector/messages.hpp"

namespace {

template <class... Bodies>
void print_bodies(std::type_identity<std::variant<Bodies...>>) {
    const char* body_sep = "";
    auto body = [&](auto tag) {
        using T = typename decltype(tag)::type;
        std::cout << body_sep << '"' << T::kName << "\": [";
        const char* field_sep = "";
        boost::mp11::mp_for_each<conclave::elector::BodyFields<T>>([&](auto d) {
            std::cout << field_sep << '"' << decltype(d)::name << '"';
            field_sep = ", ";
        });
        std::cout << ']';
        body_sep = ", ";
    };
    std::cout << '{';
    (body(std::type_identity<Bodies>{}), ...);
    std::cout << "}\n";
}

}  // namespace

int main() {
    print_bodies(std::type_identity<conclave::elector::MessageBody>{});
    return 0;
}
