# Layering: the canopy CLI links live/ (sessions in-process) but never daemon/, so the
# binary carries no event loop, io_uring or libsystemd (tests/cmake/check_layering.sh).
add_test(NAME layering.client_no_daemon
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/cmake/check_layering.sh $<TARGET_FILE:canopy>)
set_tests_properties(layering.client_no_daemon PROPERTIES TIMEOUT 60)


# fleet/ sits on aggregate/ and common/ only: no undefined reference to live/, sampler/,
# daemon/ or client/ symbols in its library.
add_test(NAME layering.fleet_below_live
         COMMAND sh -c "! nm -u \"$1\" | grep -E ' (cn_live_|cn_d_|cn_cli_|cn_smp_|cn_sym_)'"
                 sh $<TARGET_FILE:cn_fleet>)
set_tests_properties(layering.fleet_below_live PROPERTIES TIMEOUT 60)

# Test hooks only in test builds: the shipped canopyd reads no CANOPYD_TEST_* variable;
# canopyd-test, the tests' copy built with CANOPY_TEST_HOOKS, does (so the check can fail).
add_test(NAME layering.canopyd_no_test_hooks
         COMMAND sh -c "! grep -q CANOPYD_TEST_ \"$1\" && grep -q CANOPYD_TEST_ \"$2\""
                 sh $<TARGET_FILE:canopyd> $<TARGET_FILE:canopyd-test>)
set_tests_properties(layering.canopyd_no_test_hooks PROPERTIES TIMEOUT 60)
