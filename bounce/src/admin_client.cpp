// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/admin_client.hpp"

namespace conclave::bounce {

namespace asio = boost::asio;

namespace {

const client::Settings& BounceSettings() {
    static const client::Settings settings = [] {
        client::Settings s;
        s.user_agent = "leader-bounce";
        s.detect_https = false;  // the daemons speak plain HTTP: no second connection on failure
        return s;
    }();
    return settings;
}

}  // namespace

client::Endpoint admin_endpoint(const asio::ip::tcp::endpoint& endpoint) {
    return {endpoint.address().to_string(), endpoint.port()};
}

std::optional<asio::ip::tcp::endpoint> redirect_address(const std::string& location) {
    const auto parsed = client::parse_location(location);
    if (!parsed) {
        return std::nullopt;
    }
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(parsed->endpoint.host, ec);
    if (ec) {
        return std::nullopt;
    }
    return asio::ip::tcp::endpoint(address, parsed->endpoint.port);
}

asio::awaitable<client::Outcome> admin_call(asio::ip::tcp::endpoint endpoint,
                                            boost::beast::http::verb method, std::string target,
                                            std::string body, std::chrono::milliseconds timeout,
                                            bool follow) {
    client::Request request{method, std::move(target), std::move(body), {{"Connection", "close"}}};
    const auto deadline = client::Clock::now() + timeout;
    client::Outcome outcome;
    try {
        // No co_await inside a conditional expression: GCC 12 miscompiles some.
        if (follow) {
            outcome.response = co_await client::async_request_following(
                BounceSettings(), admin_endpoint(endpoint), std::move(request), deadline);
        } else {
            outcome.response = co_await client::async_request(
                BounceSettings(), admin_endpoint(endpoint), std::move(request), deadline);
        }
    } catch (const client::Error& e) {
        outcome.error = e;
    }
    co_return outcome;
}

std::string describe_failure(const client::Error& error) {
    if (!error.code()) {
        return error.what();
    }
    const char* stage = error.stage() == client::Stage::Connect ? "connect"
                        : error.stage() == client::Stage::Write ? "write"
                                                                : "read";
    return std::string(stage) + ": " + error.code().message();
}

}  // namespace conclave::bounce
