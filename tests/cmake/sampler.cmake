# sampler tests: workloads with known profiles (tests/cmake/workloads.cmake), and the sampler
# on aarch64: cross build and unwinding under qemu.
include(${CMAKE_CURRENT_LIST_DIR}/workloads.cmake)

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
