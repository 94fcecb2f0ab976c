// SPDX-License-Identifier: Apache-2.0
// The simulator's only source of randomness: xoshiro256** seeded through splitmix64.
//
// Every random decision of a run (latencies, losses, fault schedule, the elector cores' backoff)
// draws from one Rng in a fixed order, so a seed replays bit for bit. Written here rather than
// using std::mt19937_64 + std::uniform_int_distribution because the standard distributions are
// not specified bit for bit across standard libraries.
#pragma once

#include <cstdint>

#include "conclave/core/check.hpp"

namespace conclave::sim {

class Rng {
  public:
    explicit Rng(std::uint64_t seed) {
        std::uint64_t x = seed;
        for (auto& word : state_) {
            word = splitmix64(x);
        }
    }

    std::uint64_t next() {
        const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
        const std::uint64_t t = state_[1] << 17;
        state_[2] ^= state_[0];
        state_[3] ^= state_[1];
        state_[1] ^= state_[2];
        state_[0] ^= state_[3];
        state_[2] ^= t;
        state_[3] = rotl(state_[3], 45);
        return result;
    }

    /// Uniform in [0, bound) (bound > 0); Lemire's multiply-shift, bias below 2^-32 for our bounds.
    std::uint64_t below(std::uint64_t bound) {
        CONCLAVE_CHECK(bound > 0, "below() draws from a non-empty range");
        const U128 product = static_cast<U128>(next()) * bound;
        return static_cast<std::uint64_t>(product >> 64);
    }

    /// Uniform in [low, high] (inclusive).
    std::int64_t between(std::int64_t low, std::int64_t high) {
        CONCLAVE_CHECK(low <= high, "range() draws from a non-empty range");
        return low + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(high - low) + 1));
    }

    /// True with probability per_million / 1,000,000.
    bool chance(std::uint32_t per_million) {
        return per_million != 0 && below(1'000'000) < per_million;
    }

    static std::uint64_t splitmix64(std::uint64_t& x) {
        std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }

  private:
    __extension__ using U128 = unsigned __int128;
    static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    std::uint64_t state_[4]{};
};

/// 64-bit hash mixing (for fingerprints and state hashing).
inline std::uint64_t hash_mix(std::uint64_t h, std::uint64_t v) {
    std::uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
    return Rng::splitmix64(x);
}

}  // namespace conclave::sim
