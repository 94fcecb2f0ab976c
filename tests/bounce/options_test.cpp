// SPDX-License-Identifier: Apache-2.0
// leader-bounce's command line: the store backend option (bounce/options.hpp).
#include <catch2/catch.hpp>
#include <string>
#include <variant>
#include <vector>

#include "conclave/bounce/options.hpp"

using namespace conclave::bounce;

namespace {

std::variant<Options, HelpRequested, std::string> parse_bounce(std::vector<std::string> args) {
    args.insert(args.begin(), "leader-bounce");
    std::vector<const char*> argv;
    for (const std::string& a : args) {
        argv.push_back(a.c_str());
    }
    return parse_options(static_cast<int>(argv.size()), argv.data());
}

constexpr const char* kEtcdBackend = R"({"kind": "etcd", "endpoints": ["127.0.0.1:2379"]})";

}  // namespace

TEST_CASE("--backend: a store's backend object for the process-fault scenarios") {
    const auto crash = parse_bounce({"leader-crash", "--backend", kEtcdBackend});
    REQUIRE(std::holds_alternative<Options>(crash));
    CHECK(std::get<Options>(crash).backend == kEtcdBackend);
    const auto plain = parse_bounce({"leader-pause"});
    REQUIRE(std::holds_alternative<Options>(plain));
    CHECK(std::get<Options>(plain).backend.empty());
}

TEST_CASE("--backend: refused when it is no store, or for a scenario of peer links") {
    for (const char* bad : {"{}", R"({"kind": "raft"})", "[1]", "etcd", R"({"kind": 1})"}) {
        const auto r = parse_bounce({"leader-crash", "--backend", bad});
        REQUIRE(std::holds_alternative<std::string>(r));
        CHECK(std::get<std::string>(r).find("--backend") != std::string::npos);
    }
    for (const char* scenario : {"ping-pong", "non-sticky", "disk-full", "preferred"}) {
        const auto r = parse_bounce({scenario, "--backend", kEtcdBackend});
        REQUIRE(std::holds_alternative<std::string>(r));
        CHECK(std::get<std::string>(r).find("--backend") != std::string::npos);
    }
}
