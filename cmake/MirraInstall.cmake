# `cmake --install BUILD --prefix P`: the five public libraries with their public headers (under
# include/mirra/), the CMake package (lib/cmake/mirra: mirraConfig.cmake, its version file and the
# targets mirra::graph, mirra::runtime, mirra::ops, mirra::strategies, mirra::serialization and
# mirra::mirra for all five), mirra.pc for pkg-config, the runner and mirra-examples, the FlatBuffers
# schemas and the example strategy configs (share/mirra/), and the documentation. Every path in the
# package is relative to where it lies, so the installed tree can be moved.
include(CMakePackageConfigHelpers)

get_property(mirra_public_libraries GLOBAL PROPERTY MIRRA_PUBLIC_LIBRARIES)
add_library(mirra_all INTERFACE)
set_target_properties(mirra_all PROPERTIES EXPORT_NAME mirra)
target_link_libraries(mirra_all INTERFACE ${mirra_public_libraries})

set(MIRRA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mirra)
# The file sets give consumers the include folder; INCLUDES gives it to a consumer's CMake before 3.23 too.
install(TARGETS ${mirra_public_libraries} mirra_all EXPORT mirraTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  FILE_SET HEADERS DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mirra
  FILE_SET generated_headers DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mirra
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mirra)
install(EXPORT mirraTargets NAMESPACE mirra:: DESTINATION ${MIRRA_CMAKE_DIR})

configure_package_config_file(cmake/mirraConfig.cmake.in ${PROJECT_BINARY_DIR}/mirraConfig.cmake
  INSTALL_DESTINATION ${MIRRA_CMAKE_DIR})
# Before 1.0 a minor version may break the API: a request for 0.1 accepts 0.1.x only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mirraConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mirraConfig.cmake ${PROJECT_BINARY_DIR}/mirraConfigVersion.cmake
  DESTINATION ${MIRRA_CMAKE_DIR})

# mirra.pc finds its prefix from its own folder (${pcfiledir}), so it moves with the tree.
file(RELATIVE_PATH MIRRA_PC_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" MIRRA_PC_PREFIX "${MIRRA_PC_PREFIX}")
list(TRANSFORM mirra_public_libraries PREPEND "-l" OUTPUT_VARIABLE MIRRA_PC_LIBS)
list(REVERSE MIRRA_PC_LIBS)  # users before what they use: strategies, serialization, ops, runtime, graph
list(JOIN MIRRA_PC_LIBS " " MIRRA_PC_LIBS)
configure_file(cmake/mirra.pc.in ${PROJECT_BINARY_DIR}/mirra.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mirra.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(MIRRA_BUILD_TOOLS)
  install(TARGETS mirra mirra-examples RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(FILES serialization/mirra.fbs serialization/checkpoint.fbs DESTINATION ${CMAKE_INSTALL_DATADIR}/mirra/schemas)
install(DIRECTORY examples/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mirra/configs)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
