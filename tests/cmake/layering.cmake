# Layering: the canopy CLI links live/ (sessions in-process) but never daemon/, so the
# binary carries no event loop, io_uring or libsystemd (tests/cmake/check_layering.sh).
add_test(NAME layering.client_no_daemon
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/cmake/check_layering.sh $<TARGET_FILE:canopy>)
set_tests_properties(layering.client_no_daemon PROPERTIES TIMEOUT 60)

# cn_client no longer brings daemon/ along, nor symbolizer/'s header (cn_live uses cn_sym
# privately): the tests that drive canopyd's own API (the server on a thread, the QUERY
# decoder) and the symbolizer's link them themselves.
foreach(t test_daemon_raw test_common replay_fuzz_protocol fuzz_protocol)
  if(TARGET ${t})
    target_link_libraries(${t} PRIVATE cn_daemon)
  endif()
endforeach()
foreach(t test_symbolizer replay_fuzz_elf fuzz_elf replay_fuzz_perfmap fuzz_perfmap)
  if(TARGET ${t})
    target_link_libraries(${t} PRIVATE cn_sym)
  endif()
endforeach()
