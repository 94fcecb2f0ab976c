# The Debian package (issue 19): `cpack -G DEB` in a build directory makes
# conclave_<version>_<arch>.deb with conclaved, conclavectl, conclave-certs, the headers, static
# libraries and CMake package files (install.cmake), the systemd unit conclaved@.service, the
# maintainer scripts and an example config. Included from tools/install.cmake.
set(_pkg ${CMAKE_CURRENT_SOURCE_DIR}/packaging)

# Paths are relative to the prefix (/usr in the package), so that `cmake --install --prefix DIR`
# keeps everything under DIR. Debian 12 merges /lib into /usr/lib, where systemd finds the unit.
install(FILES ${_pkg}/conclaved@.service DESTINATION lib/systemd/system)
install(FILES ${_pkg}/cluster.json DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(FILES ${PROJECT_SOURCE_DIR}/node/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
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
install(CODE "${_strip_code}")

set(CPACK_PACKAGE_NAME conclave)
set(CPACK_PACKAGE_VENDOR "Conclave")
set(CPACK_PACKAGE_CONTACT "Conclave maintainers <conclave@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Leader election with PreVote and a replicated metadata log")
set(CPACK_PACKAGE_DESCRIPTION
    "conclaved (a Raft-style elector with ElectionScouting and a replicated metadata log, HTTP admin),
conclavectl (the operator's client), conclave-certs (cluster CA and node certificates), the
systemd unit conclaved@.service, and the C++ headers, static libraries and CMake package
(find_package(conclave)) for embedding.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # conclave_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Shared-library dependencies come from dpkg-shlibdeps; adduser for the postinst. Building against
# the headers also needs the -dev packages (scripts/install-deps.sh installs them).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS
    "libboost-dev (>= 1.74), nlohmann-json3-dev, libspdlog-dev, libssl-dev, cmake")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${_pkg}/postinst ${_pkg}/prerm ${_pkg}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # xz: 30 % smaller, several times slower
include(CPack)
