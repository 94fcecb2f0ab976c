// SPDX-License-Identifier: Apache-2.0
// The body shared by the libFuzzer target and the corpus-replay driver: feeds arbitrary bytes
// through what a node does with bytes from a socket (frame decoder, then the control and elector
// decoders) and checks the decoder's invariants. Any crash, sanitizer report or failed check is a
// bug; DecodeError is the expected outcome for bad input.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conclave::net::fuzz {

/// The first input byte (if any) picks the chunk size the bytes are fed in (1..256), to exercise
/// the decoder's incremental path. Aborts when an invariant fails.
void run_frame_input(const std::uint8_t* data, std::size_t size);

}  // namespace conclave::net::fuzz
