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

# The whole dependency table of docs/architecture.md, over every module's library: each
# refers only to modules its row reaches, never to another module's cn_X__ internals, and the
# table has no cycle (tests/cmake/check_deps.py).
add_test(NAME layering.dependency_table
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/cmake/check_deps.py
                 ${CMAKE_SOURCE_DIR}/docs/architecture.md
                 common=$<TARGET_FILE:cn_common> aggregate=$<TARGET_FILE:cn_agg>
                 formats=$<TARGET_FILE:cn_fmt> sampler=$<TARGET_FILE:cn_smp>
                 symbolizer=$<TARGET_FILE:cn_sym> objfile=$<TARGET_FILE:cn_obj>
                 interp=$<TARGET_FILE:cn_int>
                 live=$<TARGET_FILE:cn_live>
                 fleet=$<TARGET_FILE:cn_fleet> daemon=$<TARGET_FILE:cn_daemon>
                 client=$<TARGET_FILE:cn_client>)
set_tests_properties(layering.dependency_table PROPERTIES TIMEOUT 60)
# cn_common.h names json_t without including jansson, so modules that never touch a
# protocol message (aggregate, sampler, symbolizer, fleet) do not compile against it.
add_test(NAME layering.common_header_no_jansson
         COMMAND sh -c "printf '#include \"cn_common.h\"\\n#ifdef JANSSON_H\\n#error jansson\\n#endif\\n' | \"$1\" -std=gnu11 -fsyntax-only -I \"$2\" -x c - && ! grep -l 'jansson.h' \"$3\"/aggregate/*.[ch] \"$3\"/sampler/*.[ch] \"$3\"/symbolizer/*.[ch] \"$3\"/fleet/*.[ch]"
                 sh ${CMAKE_C_COMPILER} ${CMAKE_SOURCE_DIR}/common ${CMAKE_SOURCE_DIR})
set_tests_properties(layering.common_header_no_jansson PROPERTIES TIMEOUT 60)
# Test hooks only in test builds: the shipped canopyd reads no CANOPYD_TEST_* variable;
# canopyd-test, the tests' copy built with CANOPY_TEST_HOOKS, does (so the check can fail).
add_test(NAME layering.canopyd_no_test_hooks
         COMMAND sh -c "! grep -q CANOPYD_TEST_ \"$1\" && grep -q CANOPYD_TEST_ \"$2\""
                 sh $<TARGET_FILE:canopyd> $<TARGET_FILE:canopyd-test>)
set_tests_properties(layering.canopyd_no_test_hooks PROPERTIES TIMEOUT 60)
# The walks of docs/architecture.md (sample, query, session creation) name functions that
# exist, in the files they say (tests/cmake/check_walks.py): a rename or a move fails here
# until the walk is rewritten.
add_test(NAME docs.architecture_walks
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/cmake/check_walks.py
                 ${CMAKE_SOURCE_DIR}/docs/architecture.md ${CMAKE_SOURCE_DIR})
set_tests_properties(docs.architecture_walks PROPERTIES TIMEOUT 60)
