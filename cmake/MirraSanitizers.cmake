# MIRRA_SANITIZE=address,undefined builds everything with those sanitizers (and frame pointers), and
# makes any UBSan report fatal so a test run fails on it; MIRRA_SANITIZE=thread is scripts/tsan.sh's.
if(MIRRA_SANITIZE)
  add_compile_options(-fsanitize=${MIRRA_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${MIRRA_SANITIZE})
endif()

# MIRRA_FUZZ: coverage instrumentation for libFuzzer in every library; tests/fuzz links the fuzzers.
if(MIRRA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MIRRA_FUZZ needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
