// SPDX-License-Identifier: Apache-2.0
// conclavectl watch: one line per leadership change, following the first node that streams.
#include <ctime>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "conclave/client/watch.hpp"
#include "conclavectl.hpp"

namespace conclave::conclavectl {

namespace {

std::string UtcNow() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
        1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::ostringstream text;
    text << std::put_time(&tm, "%Y-%m-%dT%H:%M:%S") << '.' << std::setw(3) << std::setfill('0')
         << ms << 'Z';
    return text.str();
}

struct WatchState {
    std::optional<json> last;  // the last snapshot printed, without the node id
    std::uint64_t printed = 0;
};

/// Prints `s` if it differs from the last one printed (the node id aside). true when printed.
bool PrintChange(const Options& options, const json& s, std::optional<json>& last) {
    json key = s;
    key.erase("id");
    if (last && *last == key) {
        return false;
    }
    last = key;
    if (options.output == "json") {
        json line = s;
        line["time"] = UtcNow();
        std::cout << line.dump() << std::endl;
    } else {
        std::cout << UtcNow() << " leader=" << cell(s, "leader")
                  << " token=" << cell(s, "fencing_token") << " term=" << cell(s, "term")
                  << " reason=" << cell(s, "reason") << " (seen by " << cell(s, "id") << ": "
                  << cell(s, "role") << ")" << std::endl;
    }
    return true;
}

bool Enough(const Options& options, const WatchState& state) {
    return options.count && state.printed >= *options.count;
}

/// Follows one node until --count lines were printed (returns) or it fails (throws);
/// `streaming` is set once it answered the watch with a stream.
void WatchOne(const Options& options, const Endpoint& endpoint, WatchState& state,
              bool& streaming) {
    client::WatchOptions watch;
    watch.silence = options.timeout;
    const auto on_line = [&](const std::string& line) {
        const json s = json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (s.is_object() && PrintChange(options, s, state.last)) {
            state.printed += 1;
        }
        return !Enough(options, state);
    };
    std::optional<Reply> answer;
    try {
        answer = client::watch(options.client, endpoint, watch, on_line, streaming);
    } catch (const client::Error& e) {
        throw to_failure(e);
    }
    if (answer) {
        fail(endpoint, *answer);
    }
}

}  // namespace

int watch_command(const Options& options) {
    WatchState state;
    std::size_t next = 0;  // endpoint to follow
    std::size_t failures_in_row = 0;
    auto followed_at = Clock::now();          // when a node last streamed to us
    std::map<std::string, std::string> told;  // the last error reported per endpoint
    while (!Enough(options, state)) {
        const Endpoint& endpoint = options.endpoints[next];
        const std::string name = client::to_string(endpoint);
        bool streaming = false;
        try {
            WatchOne(options, endpoint, state, streaming);
            continue;  // --count reached
        } catch (const Failure& e) {
            if (e.status != kExitUnreachable) {
                throw;
            }
            if (streaming) {
                followed_at = Clock::now();
                failures_in_row = 0;
                told.erase(name);
            }
            failures_in_row += 1;
            next = (next + 1) % options.endpoints.size();
            if (failures_in_row >= options.endpoints.size() &&
                Clock::now() - followed_at >= options.timeout) {
                throw Failure(kExitUnreachable, "no node to follow for " +
                                                    client::format_duration(options.timeout) +
                                                    " (last: " + e.what() + ")");
            }
            if (std::exchange(told[name], e.what()) != e.what()) {
                std::cerr << "conclavectl: " << e.what() << "; following "
                          << client::to_string(options.endpoints[next]) << std::endl;
            }
        }
        if (failures_in_row >= options.endpoints.size()) {
            std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
                std::chrono::milliseconds(200), options.timeout / 4));
        }
    }
    return kExitOk;
}

}  // namespace conclave::conclavectl
