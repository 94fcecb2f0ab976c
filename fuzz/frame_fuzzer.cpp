// SPDX-License-Identifier: Apache-2.0
// libFuzzer entry point (CONCLAVE_FUZZ=ON with clang). Run, e.g.:
//   build/fuzz/fuzz/frame_fuzzer -max_total_time=60 fuzz/corpus/frame
#include "frame_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    conclave::net::fuzz::run_frame_input(data, size);
    return 0;
}
