// conclave-certs: certificates for a cluster's mutual TLS in two commands (SECURITY.md).
#include <iostream>
#include <string>
#include <vector>

#include "certs.hpp"

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

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cout << kUsage;
        return args.empty() ? 2 : 0;
    }
    const std::string command = args[0];
    std::string dir;
    std::string id;
    std::vector<std::string> hosts;
    for (std::size_t i = 1; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (i + 1 >= args.size() || (arg != "--dir" && arg != "--id" && arg != "--host")) {
            std::cerr << "conclave-certs: unexpected argument '" << arg << "'\n" << kUsage;
            return 2;
        }
        const std::string& value = args[++i];
        if (arg == "--dir") {
            dir = value;
        } else if (arg == "--id") {
            id = value;
        } else {
            hosts.push_back(value);
        }
    }
    if (dir.empty() || (command != "create-ca" && command != "create-node") ||
        (command == "create-node" && id.empty()) || (command == "create-ca" && !id.empty())) {
        std::cerr << "conclave-certs: bad command line\n" << kUsage;
        return 2;
    }
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
