# sampler tests: workloads with known profiles (built with and without frame pointers,
# -O2 -g, never sanitized: they are the profiled targets), and the aarch64 cross-compile
# check of the sampler's sources.
set(CN_WL_DIR ${CMAKE_BINARY_DIR}/tests/workloads)
set(CN_WL_SRC ${CMAKE_SOURCE_DIR}/tests/workloads)

function(cn_workload name src fpflag)
  add_executable(${name} ${CN_WL_SRC}/${src})
  # Reset the inherited (possibly sanitizer) options: workloads are plain -O2 -g binaries.
  set_target_properties(${name} PROPERTIES COMPILE_OPTIONS "" LINK_OPTIONS ""
                        RUNTIME_OUTPUT_DIRECTORY ${CN_WL_DIR})
  target_compile_options(${name} PRIVATE -O2 -g ${fpflag} -Wall)
  target_link_libraries(${name} PRIVATE ${ARGN})
endfunction()

foreach(wl shares threads forker deep)
  cn_workload(wl_${wl}_fp ${wl}.c -fno-omit-frame-pointer Threads::Threads)
  cn_workload(wl_${wl}_nofp ${wl}.c -fomit-frame-pointer Threads::Threads)
endforeach()
cn_workload(wl_dlopener_fp dlopener.c -fno-omit-frame-pointer ${CMAKE_DL_LIBS})
add_library(wl_dlwork SHARED ${CN_WL_SRC}/dlwork.c)
set_target_properties(wl_dlwork PROPERTIES COMPILE_OPTIONS "" LINK_OPTIONS ""
                      LIBRARY_OUTPUT_DIRECTORY ${CN_WL_DIR})
target_compile_options(wl_dlwork PRIVATE -O2 -g -fno-omit-frame-pointer -Wall)
add_custom_target(cn_workloads ALL DEPENDS wl_shares_fp wl_shares_nofp wl_threads_fp
                  wl_threads_nofp wl_forker_fp wl_forker_nofp wl_deep_fp wl_deep_nofp
                  wl_dlopener_fp wl_dlwork)

# The unit test drives the workloads: build them first.
if(TARGET test_sampler)
  add_dependencies(test_sampler cn_workloads)
endif()

# aarch64: the sampler's sources must compile with Debian's cross compiler. unwind.c is
# left out: there are no arm64 libunwind headers on this machine.
find_program(CN_AARCH64_GCC aarch64-linux-gnu-gcc)
if(CN_AARCH64_GCC)
  file(WRITE ${CMAKE_BINARY_DIR}/tests/sampler_cross.sh
       "#!/bin/sh\nset -e\nfor f in arch_arm64.c records.c maps.c session.c spawn.c; do\n"
       "  ${CN_AARCH64_GCC} -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow "
       "-Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla -Wno-unused-parameter "
       "-fsyntax-only ${CMAKE_SOURCE_DIR}/sampler/$f\ndone\necho aarch64 sampler sources compile\n")
  add_test(NAME sampler.aarch64_syntax COMMAND sh ${CMAKE_BINARY_DIR}/tests/sampler_cross.sh)
endif()
