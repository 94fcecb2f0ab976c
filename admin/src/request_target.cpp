// SPDX-License-Identifier: Apache-2.0
// The admin server's request target: path and percent-decoded query, parsed by Boost.URL.
#include "request_target.hpp"

#include <boost/url/parse.hpp>
#include <boost/url/pct_string_view.hpp>
#include <boost/url/url.hpp>
#include <boost/url/url_view.hpp>
// Boost.URL compiled into this library (header-only mode): no libboost_url to link or install.
#include <boost/url/src.hpp>

namespace conclave::admin {

std::optional<std::string> parse_request_target(std::string_view target, std::string& path,
                                                std::map<std::string, std::string>& query) {
    const auto shown = [&] { return std::string(target.substr(0, 100)); };
    if (target.empty() || target.front() != '/') {
        return "request target must be an absolute path, got \"" + shown() + "\"";
    }
    const auto parsed = boost::urls::parse_origin_form(target);
    if (!parsed) {
        return "request target \"" + shown() + "\": " + parsed.error().message() +
               " (a query needs percent-encoding such as %20)";
    }
    const boost::urls::url_view& url = *parsed;
    path = std::string(url.encoded_path());
    // params(): percent-decoded, '+' as a space (application/x-www-form-urlencoded).
    for (const auto& param : url.params()) {
        if (param.key.empty()) {
            if (!param.has_value) {
                continue;  // "a=1&&b=2"
            }
            return std::string("query: empty parameter name");
        }
        if (!query.emplace(param.key, param.value).second) {
            return "query: parameter \"" + param.key.substr(0, 64) + "\" given more than once";
        }
    }
    return std::nullopt;
}

std::string encode_request_target(std::string_view path,
                                  const std::map<std::string, std::string>& query) {
    boost::urls::url url;
    url.set_encoded_path(boost::urls::pct_string_view(path));
    for (const auto& [key, value] : query) {
        url.params().append({key, value});
    }
    return std::string(url.encoded_target());
}

std::optional<std::string> decode_path_part(std::string_view encoded) {
    const auto pct = boost::urls::make_pct_string_view(encoded);
    if (!pct) {
        return std::nullopt;
    }
    return pct->decode();
}

}  // namespace conclave::admin
