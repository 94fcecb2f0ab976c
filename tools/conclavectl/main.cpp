// SPDX-License-Identifier: Apache-2.0
// conclavectl: the operator's command-line client of conclaved's HTTP admin API.
#include <iostream>

#include "conclave/node/cli.hpp"
#include "conclavectl.hpp"

int main(int argc, char** argv) {
    namespace ctl = conclave::conclavectl;
    ctl::Options options;
    try {
        bool help = false;
        bool version = false;
        options = ctl::parse_command_line(argc, argv, help, version);
        if (help) {
            std::cout << ctl::usage_text();
            return ctl::kExitOk;
        }
        if (version) {
            std::cout << "conclavectl " << conclave::node::conclave_version() << "\n";
            return ctl::kExitOk;
        }
        return ctl::run(options);
    } catch (const ctl::Failure& e) {
        return ctl::report(e, options.token_note);
    } catch (const conclave::client::Error& e) {
        return ctl::report(ctl::to_failure(e), options.token_note);
    } catch (const std::exception& e) {
        std::cerr << "conclavectl: " << e.what() << "\n";
        return ctl::kExitFailure;
    }
}
