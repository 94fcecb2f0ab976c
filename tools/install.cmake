# Install/export (issue 6): headers and static libraries of elector, replication, codec, net, drivers and node, a CMake
# package (find_package(conclave), or find_package(Conclave): the lower-case file names serve both
# spellings -> conclave::elector, conclave::codec, conclave::net, conclave::drivers,
# conclave::node) and a pkg-config file. Included from tools/CMakeLists.txt, after every library
# target exists.
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
set_target_properties(conclave_node PROPERTIES EXPORT_NAME node)
set_target_properties(conclave_runtime PROPERTIES EXPORT_NAME runtime)
# Only referenced as $<LINK_ONLY:...> by the static libraries; carries no usage requirement there.
set_target_properties(conclave_warnings PROPERTIES EXPORT_NAME private_warnings)

install(TARGETS conclave_core conclave_elector_model conclave_elector conclave_replication_model conclave_replication conclave_codec_json conclave_codec conclave_net conclave_net_frame conclave_drivers conclave_node
                conclave_runtime conclave_warnings
  EXPORT conclaveTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(area core elector replication codec runtime net drivers node)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${area}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(EXPORT conclaveTargets NAMESPACE conclave::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/conclave)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/conclaveConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/conclave-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/conclave)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/conclave-config-version.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/conclave-config.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/conclave-config-version.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/conclave)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/conclave.pc.in
  ${CMAKE_CURRENT_BINARY_DIR}/conclave.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/conclave.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(TARGETS conclaved conclavectl conclave-certs RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
include(${CMAKE_CURRENT_SOURCE_DIR}/packaging/cpack.cmake)
