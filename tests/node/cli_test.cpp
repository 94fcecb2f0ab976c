// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "conclave/node/cli.hpp"

using namespace conclave::node;

namespace {

std::string ErrorOf(const std::vector<std::string>& args) {
    auto result = parse_command_line(args);
    REQUIRE(std::holds_alternative<std::string>(result));
    return std::get<std::string>(result);
}

struct Run {
    int status = -1;
    std::string out;
    std::string err;
    std::optional<StartupReady> ready;
};

Run Prepare(const std::vector<std::string>& args) {
    std::ostringstream out;
    std::ostringstream err;
    auto result = prepare_daemon(args, out, err);
    Run run;
    run.out = out.str();
    run.err = err.str();
    if (auto* exit = std::get_if<StartupExit>(&result)) {
        run.status = exit->status;
    } else {
        run.ready = std::get<StartupReady>(std::move(result));
    }
    return run;
}

}  // namespace

TEST_CASE("command line: both forms, flags, and mistakes", "[cli]") {
    auto ok = parse_command_line({"--config", "c.json", "--node-id=n2", "--print-config"});
    REQUIRE(std::holds_alternative<CliOptions>(ok));
    const auto& options = std::get<CliOptions>(ok);
    CHECK(options.config_path == "c.json");
    CHECK(options.node_id == "n2");
    CHECK(options.print_config);

    CHECK(std::get<CliOptions>(parse_command_line({"--help"})).help);
    CHECK(std::get<CliOptions>(parse_command_line({"-h"})).help);
    CHECK(std::get<CliOptions>(parse_command_line({"--version"})).version);

    CHECK(ErrorOf({}) == "missing --config FILE");
    CHECK(ErrorOf({"--config", "c.json"}) == "missing --node-id ID");
    CHECK(ErrorOf({"--config"}) == "--config: 1 required TEXT missing");
    CHECK(ErrorOf({"--config="}) == "--config: 1 required TEXT missing");
    CHECK(ErrorOf({"--config", "a", "--config", "b"}) ==
          "--config: At Most 1 required but received 2");
    CHECK(ErrorOf({"--verbose"}) == "The following argument was not expected: --verbose");
    CHECK(ErrorOf({"extra"}) == "The following argument was not expected: extra");
    CHECK(ErrorOf({"--help=yes"}) == "help was given a disallowed flag override");
}

TEST_CASE("command line: --join HOST:PORT", "[cli]") {
    auto ok = parse_command_line({"--config", "c.json", "--node-id", "n4", "--join=10.0.0.1:7101"});
    REQUIRE(std::holds_alternative<CliOptions>(ok));
    REQUIRE(std::get<CliOptions>(ok).join);
    CHECK(*std::get<CliOptions>(ok).join == Endpoint{"10.0.0.1", 7101});
    CHECK(ErrorOf({"--config", "c", "--node-id", "n4", "--join", "nowhere"}) ==
          "--join: expected HOST:PORT (a member's peer address), got \"nowhere\"");
    CHECK(ErrorOf({"--config", "c", "--node-id", "n4", "--join", "h:1", "--repair"}) ==
          "--join and --repair do not go together");
    CHECK(ErrorOf({"--config", "c", "--node-id", "n4", "--join", "h:1", "--join", "h:2"}) ==
          "--join: At Most 1 required but received 2");
}

TEST_CASE("command line: --trace-elector FILE, off by default", "[cli]") {
    auto off = parse_command_line({"--config", "c.json", "--node-id", "n1"});
    REQUIRE(std::holds_alternative<CliOptions>(off));
    CHECK(std::get<CliOptions>(off).trace_elector.empty());
    auto on = parse_command_line({"--config", "c.json", "--node-id", "n1", "--trace-elector=t"});
    REQUIRE(std::holds_alternative<CliOptions>(on));
    CHECK(std::get<CliOptions>(on).trace_elector == "t");
    CHECK(ErrorOf({"--config", "c", "--node-id", "n1", "--trace-elector"}) ==
          "--trace-elector: 1 required TEXT missing");
    CHECK(ErrorOf({"--config", "c", "--node-id", "n1", "--trace-elector", "a", "--trace-elector",
                   "b"}) == "--trace-elector: At Most 1 required but received 2");
}

TEST_CASE("help and version tell the truth", "[cli]") {
    const Run help = Prepare({"--help"});
    CHECK(help.status == kExitOk);
    for (const char* needle :
         {"--config FILE", "--node-id ID", "--print-config", "--version", "--trace-elector FILE",
          "SIGTERM", "Exit status", "  0 ", "  1 ", "  2 "}) {
        INFO(needle);
        CHECK(help.out.find(needle) != std::string::npos);
    }
    const Run version = Prepare({"--version"});
    CHECK(version.status == kExitOk);
    CHECK(version.out == "conclaved " + std::string(conclave_version()) + "\n");
    CHECK(conclave_version() != "unknown");
}

TEST_CASE("startup: bad command line and bad config exit 2 with the reason", "[cli]") {
    const Run usage = Prepare({"--node-id", "n1"});
    CHECK(usage.status == kExitUsage);
    CHECK(usage.err ==
          "conclaved: missing --config FILE\nTry 'conclaved --help' for more information.\n");

    const auto dir = std::filesystem::temp_directory_path() /
                     ("conclave-cli-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto path = (dir / "cluster.json").string();
    const auto write = [&](const std::string& text) {
        std::ofstream out(path);
        out << text;
    };

    const Run missing = Prepare({"--config", path, "--node-id", "n1"});
    CHECK(missing.status == kExitUsage);
    CHECK(missing.err.rfind("conclaved: bad config: " + path + ": cannot read config file", 0) ==
          0);

    write("{\"cluster\": \"demo\",\n \"nodes\": [}\n");
    const Run syntax = Prepare({"--config", path, "--node-id", "n1"});
    CHECK(syntax.status == kExitUsage);
    CHECK(syntax.err.find("invalid JSON: parse error at line 2, column") != std::string::npos);

    const std::string good = R"({"cluster": "demo", "profile": "fast", "data_dir": "data/{id}",
      "insecure": true,
      "nodes": [{"id": "n1", "peer": "127.0.0.1:7101", "http": "127.0.0.1:8101"},
                {"id": "n2", "peer": "127.0.0.1:7102", "http": "127.0.0.1:8102"}]})";
    write(good);
    const Run wrong_node = Prepare({"--config", path, "--node-id", "n7"});
    CHECK(wrong_node.status == kExitUsage);
    CHECK(wrong_node.err ==
          "conclaved: bad config: " + path +
              ": --node-id: \"n7\" is not one of the configured nodes (n1, n2)\n");

    const Run print = Prepare({"--config", path, "--node-id", "n2", "--print-config"});
    CHECK(print.status == kExitOk);
    const auto effective = nlohmann::json::parse(print.out);
    // A relative data_dir resolves against the config file's directory.
    CHECK(effective["data_dir"] == (dir / "data" / "n2").lexically_normal().string());
    CHECK(effective["profile"] == "fast");

    const Run ready = Prepare({"--config", path, "--node-id", "n2"});
    REQUIRE(ready.ready);
    CHECK(ready.ready->config.self_entry().id == "n2");
    CHECK(ready.out.empty());
    CHECK(ready.err.empty());
    std::filesystem::remove_all(dir);
}

TEST_CASE("command line: --repair and --min-term", "[cli]") {
    auto ok =
        parse_command_line({"--repair", "--config", "c.json", "--node-id", "n2", "--min-term=7"});
    REQUIRE(std::holds_alternative<CliOptions>(ok));
    const auto& options = std::get<CliOptions>(ok);
    CHECK(options.repair);
    CHECK(options.min_term == 7u);
    CHECK_FALSE(
        std::get<CliOptions>(parse_command_line({"--config", "c", "--node-id", "n1"})).min_term);
    CHECK(ErrorOf({"--config", "c", "--node-id", "n1", "--min-term", "3"}) ==
          "--min-term is only used with --repair");
    CHECK(ErrorOf({"--repair", "--config", "c", "--node-id", "n1", "--min-term", "x3"}) ==
          "--min-term: expected a term (an integer below 2^63), got \"x3\"");
    CHECK(ErrorOf(
              {"--repair", "--config", "c", "--node-id", "n1", "--min-term", "9223372036854775808"})
              .starts_with("--min-term: expected a term"));
    CHECK(ErrorOf({"--repair=1", "--config", "c", "--node-id", "n1"}) ==
          "repair was given a disallowed flag override");
    CHECK(ErrorOf({"--repair", "--print-config", "--config", "c", "--node-id", "n1"}) ==
          "--repair and --print-config do not go together");
    const Run help = Prepare({"--help"});
    for (const char* needle : {"--repair", "--min-term T", "repaired marker"}) {
        INFO(needle);
        CHECK(help.out.find(needle) != std::string::npos);
    }
}
