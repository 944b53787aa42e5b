# cmake --install: headers, libraries, symmarConfig.cmake (+ version file) and symmar.pc.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_symmar_targets symmar)
if(SYMMAR_WITH_MPI)
  list(APPEND _symmar_targets symmar_mpi)
endif()
install(TARGETS ${_symmar_targets} EXPORT symmarTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/symmar/symmar.h include/symmar/symmar.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/symmar)
if(SYMMAR_WITH_MPI)
  install(FILES include/symmar/symmar_mpi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/symmar)
endif()
install(EXPORT symmarTargets NAMESPACE symmar:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/symmar)
configure_package_config_file(cmake/symmarConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/symmarConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/symmar)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/symmarConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/symmarConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/symmarConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/symmar)
# symmar.pc locates the prefix from its own directory (${pcfiledir}), so the installed tree stays
# valid when installed with `cmake --install --prefix DIR` or moved; absolute dirs stay absolute.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(SYMMAR_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(SYMMAR_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(SYMMAR_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH _symmar_pc_up "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
  string(REGEX REPLACE "/$" "" _symmar_pc_up "${_symmar_pc_up}")
  set(SYMMAR_PC_PREFIX "\${pcfiledir}/${_symmar_pc_up}")
  set(SYMMAR_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(SYMMAR_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(cmake/symmar.pc.in ${CMAKE_CURRENT_BINARY_DIR}/symmar.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/symmar.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
