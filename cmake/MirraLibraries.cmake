# How mirra's public libraries are made: mirra_public_library(mirra_<name> SOURCES ... HEADERS ...
# [GENERATED_HEADERS ...]) adds a shared library exported as mirra::<name>, its public headers (those
# generated lie in MIRRA_GENERATED_DIR) installed under include/mirra/, its SONAME the project's
# major.minor (no ABI promise before 1.0). Installed programs and libraries find their libraries through a
# relative RPATH, so an installed tree keeps working after it is moved; libraries from outside the
# system's directories (CUDA's) are found where they were at build time. The libraries of the runner,
# the examples and the benchmarks are static and private to the programs that link them.
set(MIRRA_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
file(RELATIVE_PATH _mirra_lib_from_bin ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
set(CMAKE_INSTALL_RPATH "$ORIGIN" "$ORIGIN/${_mirra_lib_from_bin}")
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)

function(mirra_public_library target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;HEADERS;GENERATED_HEADERS")
  add_library(${target} SHARED ${arg_SOURCES})
  string(REGEX REPLACE "^mirra_" "" export_name ${target})
  set_target_properties(${target} PROPERTIES
    EXPORT_NAME ${export_name}
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  # Two file sets, as the build folder may lie inside the source folder.
  target_sources(${target}
    PUBLIC FILE_SET HEADERS BASE_DIRS ${PROJECT_SOURCE_DIR} FILES ${arg_HEADERS}
    PUBLIC FILE_SET generated_headers TYPE HEADERS BASE_DIRS ${MIRRA_GENERATED_DIR} FILES ${arg_GENERATED_HEADERS})
  target_compile_features(${target} PUBLIC cxx_std_20)
  # Every symbol resolved within the library and what it links, so a use against the layering fails to
  # link (sanitizer builds leave the sanitizers' symbols to the program).
  if(NOT MIRRA_SANITIZE AND NOT MIRRA_FUZZ)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  set_property(GLOBAL APPEND PROPERTY MIRRA_PUBLIC_LIBRARIES ${target})
endfunction()
