# The profiled workloads with known profiles (tests/workloads/*.c), built with and without
# frame pointers, -O2 -g, never sanitized: they are the profiled targets. Included by the
# tests (tests/cmake/sampler.cmake) and, with CANOPY_TESTS=OFF, by the top-level
# CMakeLists.txt for scripts/demo (which builds only canopy and wl_shares_fp).
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

foreach(wl shares threads forker deep epilogue waits)
  cn_workload(wl_${wl}_fp ${wl}.c -fno-omit-frame-pointer Threads::Threads)
  cn_workload(wl_${wl}_nofp ${wl}.c -fomit-frame-pointer Threads::Threads)
endforeach()
cn_workload(wl_dlopener_fp dlopener.c -fno-omit-frame-pointer ${CMAKE_DL_LIBS})
# Frame-pointer stacks, then stacks through libc's qsort (auto's copy shrinks, then grows).
cn_workload(wl_phases_fp phases.c -fno-omit-frame-pointer)
cn_workload(wl_phases_nofp phases.c -fomit-frame-pointer)
# Time in a SIGPROF handler (signal frames).
cn_workload(wl_sigprof sigprof.c -fomit-frame-pointer)
# Time in the vDSO and in the kernel; linked without a build-id (identity dev:inode:mtime).
cn_workload(wl_clockread clockread.c -fomit-frame-pointer)
target_link_options(wl_clockread PRIVATE -Wl,--build-id=none)
# Unwind tables only in .debug_frame (no .eh_frame entries for its own functions).
cn_workload(wl_shares_dbgframe shares.c
            "-fomit-frame-pointer;-fno-asynchronous-unwind-tables;-fno-unwind-tables"
            Threads::Threads)
# Process, exec-chain and thread churn for the daemon's churn and soak tests (its --dso
# children dlopen copies of wl_dlwork).
cn_workload(wl_churn churn.c -fno-omit-frame-pointer Threads::Threads ${CMAKE_DL_LIBS})
add_library(wl_dlwork SHARED ${CN_WL_SRC}/dlwork.c)
set_target_properties(wl_dlwork PROPERTIES COMPILE_OPTIONS "" LINK_OPTIONS ""
                      LIBRARY_OUTPUT_DIRECTORY ${CN_WL_DIR})
target_compile_options(wl_dlwork PRIVATE -O2 -g -fno-omit-frame-pointer -Wall)
add_custom_target(cn_workloads ALL DEPENDS wl_shares_fp wl_shares_nofp wl_threads_fp
                  wl_threads_nofp wl_forker_fp wl_forker_nofp wl_deep_fp wl_deep_nofp
                  wl_epilogue_fp wl_epilogue_nofp wl_waits_fp wl_waits_nofp wl_sigprof
                  wl_dlopener_fp wl_dlwork wl_shares_dbgframe wl_clockread wl_phases_fp
                  wl_phases_nofp wl_churn)

