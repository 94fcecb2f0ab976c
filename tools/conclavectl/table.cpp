// SPDX-License-Identifier: Apache-2.0
// conclavectl's output: cells, aligned tables, a line or a JSON document.
#include <algorithm>
#include <iostream>

#include "conclavectl.hpp"

namespace conclave::conclavectl {

std::string cell(const json& object, const char* key) {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
        return "-";
    }
    if (it->is_string()) {
        return it->get<std::string>();
    }
    if (it->is_object() && it->contains("state") && (*it)["state"].is_string()) {
        return (*it)["state"].get<std::string>();  // "storage": {"state": ..., ...}
    }
    if (it->is_object() && it->contains("term") && it->contains("counter")) {
        return (*it)["term"].dump() + "." + (*it)["counter"].dump();
    }
    if (it->is_object() && it->contains("valid") && it->contains("remaining_ms")) {
        // "lease": the remaining milliseconds of a valid leader lease, "-" when it is not valid
        return (*it)["valid"] == true ? (*it)["remaining_ms"].dump() : "-";
    }
    return it->dump();
}

void print_table(const std::vector<std::vector<std::string>>& cells) {
    std::vector<std::size_t> width;
    for (const auto& line : cells) {
        width.resize(std::max(width.size(), line.size()), 0);
        for (std::size_t c = 0; c < line.size(); ++c) {
            width[c] = std::max(width[c], line[c].size());
        }
    }
    for (const auto& line : cells) {
        std::string text;
        for (std::size_t c = 0; c < line.size(); ++c) {
            text += line[c];
            if (c + 1 < line.size()) {
                text += std::string(width[c] - line[c].size() + 2, ' ');
            }
        }
        std::cout << text << "\n";
    }
    std::cout.flush();
}

void print_result(const Options& options, const std::string& text, const json& document) {
    if (options.output == "json") {
        std::cout << document.dump(2) << std::endl;
    } else {
        std::cout << text << std::endl;
    }
}

}  // namespace conclave::conclavectl
