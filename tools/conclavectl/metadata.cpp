// SPDX-License-Identifier: Apache-2.0
// conclavectl get: the committed metadata entries after an LSN, or one key's value.
#include <cctype>
#include <iostream>

#include "conclavectl.hpp"

namespace conclave::conclavectl {

namespace http = boost::beast::http;

namespace {

/// A key as a path part: unreserved characters and '/' as they are, the rest %XX.
std::string EncodeKey(const std::string& key) {
    std::string out;
    for (const char c : key) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
            out += c;
        } else {
            static constexpr char kHex[] = "0123456789ABCDEF";
            out += '%';
            out += kHex[u >> 4];
            out += kHex[u & 0xF];
        }
    }
    return out;
}

/// get KEY [--consistency ...]: GET /metadata/KEY from the leader (linearizable) or the first
/// node (serializable).
int GetKey(const Options& options) {
    const std::string& key = options.args[0];
    const bool linearizable = options.args[1] == "linearizable";
    const Endpoint source = linearizable ? find_leader(options).value_or(options.endpoints.front())
                                         : options.endpoints.front();
    Endpoint answered;
    const Reply reply = request_following(
        options, source, http::verb::get,
        "/metadata/" + EncodeKey(key) + "?consistency=" + options.args[1], {}, &answered);
    if (reply.status == 404 && reply.document.is_object()) {
        throw Failure(kExitFailure, client::to_string(answered) + ": " + key +
                                        ": no such key (commit " +
                                        cell(reply.document, "commit_lsn") + ")");
    }
    if (reply.status != 200 || !reply.document.is_object()) {
        fail(answered, reply);
    }
    const json& d = reply.document;
    print_result(options,
                 key + " = " + (d.contains("value") ? d["value"].dump() : "null") +
                     " (written at " + cell(d, "lsn") + ", commit " + cell(d, "commit_lsn") + ")",
                 d);
    return kExitOk;
}

}  // namespace

int get_command(const Options& options) {
    if (!options.args.empty()) {
        return GetKey(options);
    }
    // No leader: read what the first node committed.
    const Endpoint source = find_leader(options).value_or(options.endpoints.front());
    std::string from = options.from;
    json all = json::array();
    for (;;) {
        std::string target = "/metadata";
        if (!from.empty()) {
            target += "?from=" + from;
        }
        Endpoint answered;
        const Reply reply =
            request_following(options, source, http::verb::get, target, {}, &answered);
        if (reply.status != 200 || !reply.document.is_object()) {
            fail(answered, reply);
        }
        const json& page = reply.document;
        for (const json& e : page.value("entries", json::array())) {
            if (options.output == "json") {
                all.push_back(e);
            } else {
                std::cout << cell(e, "lsn") << " " << cell(e, "key") << " "
                          << (e.contains("value") ? e["value"].dump() : "null") << "\n";
            }
        }
        const std::string next = cell(page, "next_from");
        if (next == from || next == "-" || next == cell(page, "commit_lsn")) {
            break;
        }
        from = next;
    }
    if (options.output == "json") {
        std::cout << all.dump(2) << "\n";
    }
    std::cout.flush();
    return kExitOk;
}

}  // namespace conclave::conclavectl
