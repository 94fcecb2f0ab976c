# SPDX-License-Identifier: Apache-2.0
# Precompiled headers for the third-party headers that dominate compile time (Boost.Asio/Beast,
# nlohmann_json, spdlog/fmt, Catch2). Each is parsed once per build flavour instead of once per
# translation unit.
#
# Two headers are precompiled, each by a stub target, and reused (REUSE_FROM) by the others:
#   conclave_pch_lib    Asio, Beast, SSL, nlohmann_json, spdlog, fmt, common std headers
#   conclave_pch_test   the same plus Catch2 (test executables only; Catch2's macros stay out of
#                       library code)
# GCC accepts a precompiled header only when the consumer's flags and the macros the headers test
# match those it was built with. All targets share the flavour's flags (CMAKE_BUILD_TYPE,
# CONCLAVE_SANITIZE, -std=c++20); conclave_use_pch() also links conclave_pch_deps, so that every
# consumer sees the same dependency macros (SPDLOG_COMPILED_LIB, SPDLOG_FMT_EXTERNAL, FMT_SHARED,
# ...). CMake compiles every consumer with -Winvalid-pch, so under -Werror (conclave_warnings) a
# precompiled header that GCC rejects fails the build instead of silently costing the time again.
#
# Consumers are listed in one place, at the end of the top-level
# CMakeLists.txt (and conclave_add_test() for tests), so that the area folders need no change.
# -DCONCLAVE_PCH=OFF turns it all off.
# Measured (release, g++ 12, CPU user+sys of one compile, ccache off, 2026-11-23, loaded machine):
# admin_server.cpp 44.9 -> 39.9 s, admin_server_test.cpp 41.7 -> 35.6 s, connection.cpp 29.0 ->
# 24.4 s, simulator.cpp 13.9 -> 12.8 s; each .gch costs 24.6 s once per flavour. Most of a heavy
# TU's time is instantiating and compiling Asio/Beast templates at -O2 -g, which a PCH cannot
# save: expect 10-15% per heavy TU, not more.
option(CONCLAVE_PCH "Precompile third-party headers (faster builds)" ON)

if(NOT CONCLAVE_PCH)
  function(conclave_use_pch target kind)
  endfunction()
  return()
endif()

find_package(Boost 1.81 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(spdlog REQUIRED)
find_package(OpenSSL REQUIRED)

add_library(conclave_pch_deps INTERFACE)
# The header holds <boost/asio/ssl.hpp>, whose error category refers to OpenSSL: every consumer
# links OpenSSL (shared libraries, so this costs nothing measurable).
find_package(Threads REQUIRED)
target_link_libraries(conclave_pch_deps INTERFACE Boost::headers nlohmann_json::nlohmann_json
  spdlog::spdlog OpenSSL::SSL OpenSSL::Crypto Threads::Threads)
# Same reason as in net/CMakeLists.txt: under TSan g++ 12 warns (-Wtsan) about Asio's
# atomic_thread_fence, and the precompiled header holds Asio.
if(CONCLAVE_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(conclave_pch_deps INTERFACE -Wno-tsan)
endif()

set(conclave_pch_headers
  <algorithm> <array> <chrono> <cstdint> <filesystem> <functional> <map> <memory> <optional>
  <random> <set> <span> <sstream> <string> <string_view> <unordered_map> <variant> <vector>
  <boost/asio.hpp> <boost/asio/ssl.hpp> <boost/beast/core.hpp> <boost/beast/http.hpp>
  <nlohmann/json.hpp> <spdlog/spdlog.h> <spdlog/logger.h> <fmt/core.h> <fmt/format.h>)

add_library(conclave_pch_lib STATIC ${CMAKE_CURRENT_LIST_DIR}/pch_stub.cpp)
target_link_libraries(conclave_pch_lib PRIVATE conclave_warnings conclave_pch_deps)
target_precompile_headers(conclave_pch_lib PRIVATE ${conclave_pch_headers})

if(CONCLAVE_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
  add_library(conclave_pch_test STATIC ${CMAKE_CURRENT_LIST_DIR}/pch_stub.cpp)
  target_link_libraries(conclave_pch_test PRIVATE conclave_warnings conclave_pch_deps
    Catch2::Catch2)
  target_precompile_headers(conclave_pch_test PRIVATE ${conclave_pch_headers}
    <catch2/catch.hpp>)
endif()

# conclave_use_pch(target lib|test): `target` reuses conclave_pch_<kind>.
function(conclave_use_pch target kind)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:conclave_pch_deps>)
  target_precompile_headers(${target} REUSE_FROM conclave_pch_${kind})
endfunction()
