# Warnings every mirra target compiles with (mirra_warnings, an interface target).
add_library(mirra_warnings INTERFACE)
target_compile_options(mirra_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
