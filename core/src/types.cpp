// SPDX-License-Identifier: Apache-2.0
#include "conclave/core/types.hpp"

namespace conclave {

std::string to_string(NodeId n) {
    return "#" + std::to_string(n.value);
}
std::string to_string(Term t) {
    return std::to_string(t.value);
}
std::string to_string(const Lsn& l) {
    return std::to_string(l.term.value) + "." + std::to_string(l.counter);
}

}  // namespace conclave
