// SPDX-License-Identifier: Apache-2.0
// conclave-certs: certificates for a cluster's mutual TLS in two commands (SECURITY.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "certs.hpp"
#include "conclave/core/command_line.hpp"

namespace {

constexpr const char* kUsage = R"(Usage: conclave-certs create-ca --dir DIR
       conclave-certs create-node --dir DIR --id ID [--host HOST]...
       conclave-certs --help

create-ca     writes DIR/ca.pem (cluster CA certificate) and DIR/ca.key (its key, mode 0600)
create-node   writes DIR/ID.pem and DIR/ID.key (mode 0600), signed by DIR/ca.pem + ca.key; the
              certificate names the node id in its subjectAltName (DNS:ID) and common name, plus
              each --host (an address becomes an IP: entry, a name a DNS: entry)
Keys are ECDSA P-256; existing files are never overwritten. Config: "tls": {"ca": "DIR/ca.pem",
"cert": "DIR/ID.pem", "key": "DIR/ID.key"}. Keep ca.key off the nodes.
Exit status: 0 done, 1 failure, 2 bad command line.
)";

/// The parsed command line (CLI11): a command and its options.
struct Args {
    std::string command;
    std::string dir;
    std::string id;
    std::vector<std::string> hosts;
    bool help = false;
};

void describe(CLI::App& app, Args& a) {
    app.set_help_flag();  // --help prints kUsage, not CLI11's own
    app.add_flag("-h,--help", a.help);
    app.require_subcommand(0, 1);
    CLI::App* ca = app.add_subcommand("create-ca");
    ca->add_option("--dir", a.dir)->required();
    ca->callback([&a] { a.command = "create-ca"; });
    CLI::App* node = app.add_subcommand("create-node");
    node->add_option("--dir", a.dir)->required();
    node->add_option("--id", a.id)->required();
    node->add_option("--host", a.hosts);
    node->callback([&a] { a.command = "create-node"; });
}

}  // namespace

int main(int argc, char** argv) {
    Args args;
    CLI::App app("conclave-certs", "conclave-certs");
    describe(app, args);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        args.help = conclave::asks_for_help(argc, argv);
        if (!args.help) {
            std::cerr << "conclave-certs: " << e.what() << "\n" << kUsage;
            return 2;
        }
    }
    if (args.help || args.command.empty()) {
        std::cout << kUsage;
        return args.help ? 0 : 2;
    }
    if (args.dir.empty() || (args.command == "create-node" && args.id.empty())) {
        std::cerr << "conclave-certs: --dir and --id need a non-empty value\n" << kUsage;
        return 2;
    }
    const std::string& command = args.command;
    const std::string& dir = args.dir;
    const std::string& id = args.id;
    const std::vector<std::string>& hosts = args.hosts;
    const auto error = command == "create-ca" ? conclave::certs::create_ca(dir)
                                              : conclave::certs::create_node(dir, id, hosts);
    if (error) {
        std::cerr << "conclave-certs: " << *error << "\n";
        return 1;
    }
    std::cout << (command == "create-ca" ? dir + "/ca.pem, " + dir + "/ca.key"
                                         : dir + "/" + id + ".pem, " + dir + "/" + id + ".key")
              << " written\n";
    return 0;
}
