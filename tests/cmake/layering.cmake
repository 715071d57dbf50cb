# Layering: the canopy CLI links live/ (sessions in-process) but never daemon/, so the
# binary carries no event loop, io_uring or libsystemd (tests/cmake/check_layering.sh).
add_test(NAME layering.client_no_daemon
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/cmake/check_layering.sh $<TARGET_FILE:canopy>)
set_tests_properties(layering.client_no_daemon PROPERTIES TIMEOUT 60)

