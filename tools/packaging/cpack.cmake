# SPDX-License-Identifier: Apache-2.0
# The Debian packages: `cpack -G DEB` in a build directory makes two, one per install component
# (tools/install.cmake):
#   conclave_<version>-<revision>_<arch>.deb      conclaved, conclavectl, conclave-certs, the systemd
#       unit conclaved@.service, the maintainer scripts and an example config: what a server needs;
#   conclave-dev_<version>-<revision>_<arch>.deb  headers, static libraries, CMake package
#       (find_package(conclave)) and pkg-config file in the multiarch libdir: for embedding.
# Included from tools/install.cmake.
set(_pkg ${CMAKE_CURRENT_SOURCE_DIR}/packaging)

# Paths are relative to the prefix (/usr in the package), so that `cmake --install --prefix DIR`
# keeps everything under DIR. Debian 12 merges /lib into /usr/lib, where systemd finds the unit.
install(FILES ${_pkg}/conclaved@.service DESTINATION lib/systemd/system COMPONENT runtime)
install(FILES ${_pkg}/cluster.json DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/node/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
        COMPONENT runtime)
# The licence, where Debian looks for it (Apache-2.0; LICENSE at the repository's root).
install(FILES ${_pkg}/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(FILES ${_pkg}/copyright DESTINATION share/doc/conclave-dev COMPONENT dev)
# `cmake --install --strip` and CPack (CPACK_STRIP_FILES) strip the executables; the static
# libraries lose their debug sections too (their symbols stay): 170 MB -> a few MB.
set(_strip_code [[
  if(CMAKE_INSTALL_DO_STRIP)
    file(GLOB _conclave_archives "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/lib*/libconclave_*.a"
                                 "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/lib*/*/libconclave_*.a")
    foreach(_archive IN LISTS _conclave_archives)
      execute_process(COMMAND "@CMAKE_STRIP@" --strip-debug "${_archive}" COMMAND_ERROR_IS_FATAL ANY)
    endforeach()
  endif()
]])
string(CONFIGURE "${_strip_code}" _strip_code @ONLY)
install(CODE "${_strip_code}" COMPONENT dev)

set(CPACK_PACKAGE_NAME conclave)
set(CPACK_PACKAGE_VENDOR "Conclave")
set(CPACK_PACKAGE_CONTACT "Conclave maintainers <conclave@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # xz: 30 % smaller, several times slower

# One package per component; the Debian revision (the "-1" of 0.1.0-1) counts packagings of one
# upstream version: raise it for a packaging-only change, reset it to 1 with a new version.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1 CACHE STRING "Debian revision of the packages")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>-<revision>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME conclave)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION net)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "Leader election with PreVote and a replicated metadata log
conclaved (a Raft-style elector with ElectionScouting and a replicated metadata log, HTTP admin),
conclavectl (the operator's client), conclave-certs (cluster CA and node certificates), the
systemd unit conclaved@.service and an example cluster config.")
# Shared-library dependencies come from dpkg-shlibdeps; adduser for the postinst.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${_pkg}/postinst ${_pkg}/prerm ${_pkg}/postrm)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME conclave-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "Leader election with PreVote: C++ headers and static libraries
The C++20 headers, static libraries, CMake package (find_package(conclave): conclave::elector,
conclave::codec, conclave::net, conclave::drivers, conclave::admin, conclave::node) and pkg-config file for
embedding Conclave's elector, mesh and node in a program.")
# What find_package(conclave) looks up (find_dependency in conclaveConfig.cmake.in).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libboost-dev (>= 1.74) | libboost1.81-dev, nlohmann-json3-dev, libspdlog-dev, libssl-dev, zlib1g-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "cmake, pkg-config")
include(CPack)
