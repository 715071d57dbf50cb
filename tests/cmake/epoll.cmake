# The client's daemon tests run again on the epoll loop (canopyd --event-loop epoll), so
# the whole integration suite covers both backends; the daemon's own tests loop over both
# internally.
foreach(name test_client_daemon test_diff_sessions)
  add_test(NAME integration.${name}.epoll
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/${name}.sh)
  set_tests_properties(integration.${name}.epoll PROPERTIES
                       ENVIRONMENT "${CANOPY_TEST_ENV};CANOPY_EVENT_LOOP=epoll"
                       TIMEOUT 600 SKIP_RETURN_CODE 77)
endforeach()
