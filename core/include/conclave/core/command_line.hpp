// SPDX-License-Identifier: Apache-2.0
// What every program's command line shares, whatever parses the rest (CLI11).
#pragma once

#include <algorithm>
#include <string_view>

namespace conclave {

/// Whether the command line asks for help (`--help` or `-h` after the program's name). A
/// parser's complaint about the rest of such a line is not reported: the help is printed.
inline bool asks_for_help(int argc, const char* const* argv) {
    return std::any_of(argv + 1, argv + argc, [](const char* arg) {
        return std::string_view(arg) == "--help" || std::string_view(arg) == "-h";
    });
}

}  // namespace conclave
