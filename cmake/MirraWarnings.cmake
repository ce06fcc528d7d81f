# Warnings every mirra target compiles with (mirra_warnings, an interface target).
add_library(mirra_warnings INTERFACE)
target_compile_options(mirra_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
# GCC 12's -Wrestrict reports overlapping copies of exabytes inside std::string concatenations it
# inlines at -O2 (GCC bug 105329); clang and other GCC versions keep the warning.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(mirra_warnings INTERFACE -Wno-restrict)
endif()
