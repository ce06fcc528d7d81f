# MIRRA_SANITIZE=address,undefined builds everything with those sanitizers (and frame pointers), and
# makes any UBSan report fatal so a test run fails on it.
if(MIRRA_SANITIZE)
  add_compile_options(-fsanitize=${MIRRA_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${MIRRA_SANITIZE})
endif()
