# SPDX-License-Identifier: Apache-2.0
# Install/export: headers and static libraries of elector, replication, codec, net, drivers, admin
# and node, a CMake package (find_package(conclave), or find_package(Conclave): the lower-case file
# names serve both spellings -> conclave::elector, conclave::codec, conclave::net,
# conclave::drivers, conclave::admin, conclave::node) and a pkg-config file. Included from
# tools/CMakeLists.txt, after every library target exists.
#
# Two install components, one Debian package each (packaging/cpack.cmake): "runtime" (conclaved,
# conclavectl, conclave-certs, the systemd unit, the example config) and "dev" (headers, static
# libraries, CMake and pkg-config files). `cmake --install BUILD --component dev` installs one.
#
# Libraries go to the multiarch directory (lib/x86_64-linux-gnu on Debian amd64) whatever the
# prefix: GNUInstallDirs picks it only for a /usr prefix (and caches plain "lib" otherwise), while
# CPack installs under a staging prefix. A -DCMAKE_INSTALL_LIBDIR other than "lib" still wins.
if(CMAKE_LIBRARY_ARCHITECTURE AND (NOT DEFINED CACHE{CMAKE_INSTALL_LIBDIR} OR
                                   "$CACHE{CMAKE_INSTALL_LIBDIR}" STREQUAL "lib"))
  set(CMAKE_INSTALL_LIBDIR "lib/${CMAKE_LIBRARY_ARCHITECTURE}" CACHE PATH
      "Object code libraries (lib/<multiarch triplet>)" FORCE)
endif()
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(conclave_core PROPERTIES EXPORT_NAME core)
set_target_properties(conclave_elector PROPERTIES EXPORT_NAME elector)
set_target_properties(conclave_elector_model PROPERTIES EXPORT_NAME elector_model)
set_target_properties(conclave_codec_json PROPERTIES EXPORT_NAME codec_json)
set_target_properties(conclave_codec PROPERTIES EXPORT_NAME codec)
set_target_properties(conclave_replication PROPERTIES EXPORT_NAME replication)
set_target_properties(conclave_replication_model PROPERTIES EXPORT_NAME replication_model)
set_target_properties(conclave_net PROPERTIES EXPORT_NAME net)
set_target_properties(conclave_net_frame PROPERTIES EXPORT_NAME net_frame)
set_target_properties(conclave_drivers PROPERTIES EXPORT_NAME drivers)
set_target_properties(conclave_admin PROPERTIES EXPORT_NAME admin)
set_target_properties(conclave_node PROPERTIES EXPORT_NAME node)
set_target_properties(conclave_runtime PROPERTIES EXPORT_NAME runtime)
# conclave_warnings (the project's -W flags) is linked as $<BUILD_INTERFACE:...> by the installed
# libraries: it is not exported, so a consumer never sees it nor a -lconclave_warnings.

install(TARGETS conclave_core conclave_elector_model conclave_elector conclave_replication_model conclave_replication conclave_codec_json conclave_codec conclave_net conclave_net_frame conclave_drivers conclave_admin conclave_node
                conclave_runtime
  EXPORT conclaveTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(area core elector replication codec runtime net drivers admin node)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${area}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          COMPONENT dev)
endforeach()
install(EXPORT conclaveTargets NAMESPACE conclave::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/conclave COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/conclaveConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/conclave-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/conclave)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/conclave-config-version.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/conclave-config.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/conclave-config-version.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/conclave COMPONENT dev)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/conclave.pc.in
  ${CMAKE_CURRENT_BINARY_DIR}/conclave.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/conclave.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)
install(TARGETS conclaved conclavectl conclave-certs RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        COMPONENT runtime)
include(${CMAKE_CURRENT_SOURCE_DIR}/packaging/cpack.cmake)
