# Symbolizer tests: the sym_query driver and the test binaries it is compared on against
# addr2line (tests/integration/test_symbolizer_*.sh). The binaries are built with the
# system gcc/g++ directly (no sanitizer flags): -O2 -g with inlines, PIE and non-PIE,
# stripped with a .gnu_debuglink file, and a C++ program.
set(CN_SYM_TEST_SRC ${CMAKE_SOURCE_DIR}/tests/integration/sym)
set(CN_SYM_TEST_OUT ${CMAKE_BINARY_DIR}/tests/sym)

add_executable(sym_query ${CN_SYM_TEST_SRC}/sym_query.c)
target_link_libraries(sym_query PRIVATE cn_sym PkgConfig::LIBELF)

add_custom_command(
  OUTPUT ${CN_SYM_TEST_OUT}/inl_pie ${CN_SYM_TEST_OUT}/inl_nopie ${CN_SYM_TEST_OUT}/inl_stripped
         ${CN_SYM_TEST_OUT}/inl_stripped.debug ${CN_SYM_TEST_OUT}/cxx_prog
         ${CN_SYM_TEST_OUT}/inl_bigloc ${CN_SYM_TEST_OUT}/two_cu
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CN_SYM_TEST_OUT}
  COMMAND gcc -O2 -g -fPIE -pie -o ${CN_SYM_TEST_OUT}/inl_pie ${CN_SYM_TEST_SRC}/inlines.c
  COMMAND gcc -O2 -g -fno-pie -no-pie -o ${CN_SYM_TEST_OUT}/inl_nopie
          ${CN_SYM_TEST_SRC}/inlines.c
  COMMAND ${CMAKE_COMMAND} -E copy ${CN_SYM_TEST_OUT}/inl_pie ${CN_SYM_TEST_OUT}/inl_stripped
  COMMAND objcopy --only-keep-debug ${CN_SYM_TEST_OUT}/inl_stripped
          ${CN_SYM_TEST_OUT}/inl_stripped.debug
  COMMAND objcopy --strip-all ${CN_SYM_TEST_OUT}/inl_stripped
  COMMAND ${CMAKE_COMMAND} -E chdir ${CN_SYM_TEST_OUT} objcopy
          --add-gnu-debuglink=inl_stripped.debug inl_stripped
  COMMAND g++ -O2 -g -o ${CN_SYM_TEST_OUT}/cxx_prog ${CN_SYM_TEST_SRC}/cxx.cpp
  # inl_pie with 8 MiB of location lists, which the symbolizer never reads (dwarf.c)
  COMMAND truncate -s 8M ${CN_SYM_TEST_OUT}/bigloc.bin
  COMMAND objcopy --update-section .debug_loclists=${CN_SYM_TEST_OUT}/bigloc.bin
          ${CN_SYM_TEST_OUT}/inl_pie ${CN_SYM_TEST_OUT}/inl_bigloc
  COMMAND ${CMAKE_COMMAND} -E remove ${CN_SYM_TEST_OUT}/bigloc.bin
  # two compilation units: a lookup in the second needs a unit the index may not hold
  COMMAND gcc -O2 -g -fPIE -pie -o ${CN_SYM_TEST_OUT}/two_cu ${CN_SYM_TEST_SRC}/inlines.c
          ${CN_SYM_TEST_SRC}/second_cu.c
  DEPENDS ${CN_SYM_TEST_SRC}/inlines.c ${CN_SYM_TEST_SRC}/cxx.cpp ${CN_SYM_TEST_SRC}/second_cu.c
  COMMENT "Building symbolizer test binaries")
add_custom_target(sym_test_binaries ALL
  DEPENDS ${CN_SYM_TEST_OUT}/inl_pie ${CN_SYM_TEST_OUT}/cxx_prog)
add_dependencies(sym_query sym_test_binaries)
if(TARGET test_symbolizer)
  add_dependencies(test_symbolizer sym_test_binaries)
endif()

# JIT code whose perf map is written late (tests/integration/test_symbolizer_jitmap.sh).
cn_workload(wl_jitmap jitmap.c -fno-omit-frame-pointer)
