# The Python wheel (`pip install .`, scikit-build-core; see pyproject.toml). The package's Python
# sources come from python/symmar; this installs, as component `python` into the package directory:
# libsymmar (and libsymmar_mpi where MPI was found) under their sonames, libsymmar_torch where torch was, Highway's libhwy (Debian has
# no static archive of it), all found through an $ORIGIN rpath, and _version.py with the project
# version. Nothing else of the CMake install (headers, CMake package, pkg-config) goes into the wheel.
set(_symmar_wheel_libs symmar)
if(SYMMAR_WITH_MPI)
  list(APPEND _symmar_wheel_libs symmar_mpi)
endif()
# A wheel holds no symlinks: the library file itself carries the soname (libsymmar.so.0).
set_target_properties(${_symmar_wheel_libs} PROPERTIES VERSION ${PROJECT_VERSION_MAJOR} INSTALL_RPATH "$ORIGIN")
install(TARGETS ${_symmar_wheel_libs} LIBRARY DESTINATION . NAMELINK_SKIP COMPONENT python)
# libhwy as the loader resolves it here, copied under its soname.
install(CODE [[
  file(GET_RUNTIME_DEPENDENCIES LIBRARIES "$<TARGET_FILE:symmar>" RESOLVED_DEPENDENCIES_VAR _symmar_deps
       PRE_INCLUDE_REGEXES "^libhwy\\.so" PRE_EXCLUDE_REGEXES ".*")
  foreach(_dep IN LISTS _symmar_deps)
    get_filename_component(_name "${_dep}" NAME)
    message(STATUS "Installing: $ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${_name} (from ${_dep})")
    file(COPY_FILE "${_dep}" "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${_name}")
  endforeach()
]] COMPONENT python)

configure_file(${CMAKE_CURRENT_LIST_DIR}/_version.py.in ${CMAKE_CURRENT_BINARY_DIR}/python/_version.py @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/python/_version.py DESTINATION . COMPONENT python)

# The compiled torch op kernels, where the build found a Python with torch (cmake/SymmarTorch.cmake).
if(TARGET symmar_torch)
  set_target_properties(symmar_torch PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS symmar_torch LIBRARY DESTINATION . COMPONENT python)
  install(FILES "${SYMMAR_TORCH_VERSION_FILE}" DESTINATION . COMPONENT python)
  list(APPEND _symmar_wheel_libs symmar_torch)
endif()

# One target that builds what the wheel ships (pyproject.toml: build.targets).
add_custom_target(symmar_python_libs DEPENDS ${_symmar_wheel_libs})
