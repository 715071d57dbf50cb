# sampler tests: workloads with known profiles (built with and without frame pointers,
# -O2 -g, never sanitized: they are the profiled targets), and the sampler on aarch64:
# cross build and unwinding under qemu.
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

# The unit test drives the workloads: build them first.
if(TARGET test_sampler)
  add_dependencies(test_sampler cn_workloads)
endif()

# aarch64 (tests/arm64/cross.sh): sampler.aarch64_build cross-compiles every sampler/*.c
# (and interp/*.c below it, with the host's BPF skeleton, and common's err.c, text.c,
# containers.c) with Debian's aarch64-linux-gnu-gcc (our warnings, -O2) into an arm64 libcn_smp.a and links
# the unwind selftest against it and the arm64 libunwind/libdw/libelf (scripts/setup installs
# them); sampler.aarch64_unwind runs the selftest under qemu-aarch64: both DWARF unwinders on
# a snapshot of the program's own stack. Under CI=true a missing tool or library is a
# failing test; elsewhere the tests are left out.
find_program(CN_AARCH64_GCC aarch64-linux-gnu-gcc)
find_program(CN_QEMU_AARCH64 qemu-aarch64)
set(CN_A64_DIR ${CMAKE_BINARY_DIR}/tests/arm64)
set(CN_A64_MISSING "")
if(NOT CN_AARCH64_GCC)
  list(APPEND CN_A64_MISSING "aarch64-linux-gnu-gcc (gcc-aarch64-linux-gnu)")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig
          ${PKG_CONFIG_EXECUTABLE} --libs libunwind-generic libdw libelf libbpf libxxhash
  OUTPUT_VARIABLE CN_A64_LIBS OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE CN_A64_PC ERROR_QUIET)
if(NOT CN_A64_PC EQUAL 0)
  list(APPEND CN_A64_MISSING
       "arm64 libunwind/libdw/libbpf (libunwind-dev:arm64 libdw-dev:arm64 libbpf-dev:arm64)")
endif()

function(cn_a64_test name needs_qemu)
  set(missing ${CN_A64_MISSING})
  if(needs_qemu AND NOT CN_QEMU_AARCH64)
    list(APPEND missing "qemu-aarch64 (qemu-user)")
  endif()
  if(missing)
    if("$ENV{CI}" STREQUAL "true")
      string(REPLACE ";" ", " missing "${missing}")
      add_test(NAME ${name} COMMAND sh -c "echo '${name}: missing ${missing}' >&2; exit 1")
    endif()
    return()
  endif()
  add_test(NAME ${name} COMMAND sh ${CMAKE_SOURCE_DIR}/tests/arm64/cross.sh ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120)
endfunction()

cn_a64_test(sampler.aarch64_build FALSE build ${CMAKE_SOURCE_DIR} ${CN_A64_DIR} ${CN_AARCH64_GCC}
            "${CN_A64_LIBS}" -std=gnu11 -D_GNU_SOURCE ${CANOPY_WARNINGS} -fno-strict-aliasing
            -I${CMAKE_BINARY_DIR}/interp)
cn_a64_test(sampler.aarch64_unwind TRUE run ${CN_A64_DIR} ${CN_QEMU_AARCH64})
if(TEST sampler.aarch64_build AND TEST sampler.aarch64_unwind)
  # The run needs the build: `ctest -R aarch64_unwind` alone builds first.
  set_tests_properties(sampler.aarch64_build PROPERTIES FIXTURES_SETUP cn_arm64)
  set_tests_properties(sampler.aarch64_unwind PROPERTIES FIXTURES_REQUIRED cn_arm64)
endif()

# arm64.vm (tests/arm64/vm.sh): canopy on a real arm64 kernel in an emulated machine
# (qemu-system-aarch64 -M virt -cpu max, TCG; Debian's arm64 kernel; a busybox initramfs with
# the cross-built canopy, canopyd and workloads, cached under the build dir). 1.5–2.5 min
# on 2 cores, depending on their load, plus the first cross build; the checks are listed in
# tests/arm64/vm_tests.sh. Missing tools: a skip, except under CI=true (vm.sh decides; the
# kernel and busybox are looked up at run time).
add_test(NAME arm64.vm COMMAND sh ${CMAKE_SOURCE_DIR}/tests/arm64/vm.sh ${CMAKE_SOURCE_DIR}
                               ${CMAKE_BINARY_DIR}/tests/arm64-vm $<TARGET_FILE:canopy>)
# Alone: the emulator takes a whole core for minutes, and the sampler tests beside it would
# measure a starved machine.
set_tests_properties(arm64.vm PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
