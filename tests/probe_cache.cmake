# The probe cache (issue: linear probes at the cost of the head): a frozen
# trunk's outputs computed once, reused, refused when stale or broken, and
# byte-identical weights with and without it at 1 and 2 ranks.
fsdp_script_test(probe_cache_np2 test_probe_cache.sh)
fsdp_script_test(probe_cache_routes_np2 test_probe_cache.sh routes)
fsdp_script_test(probe_cache_machines test_probe_cache.sh machines)
set_tests_properties(probe_cache_machines PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
fsdp_script_test(probe_cache_memcheck test_probe_cache.sh memcheck)
set_tests_properties(probe_cache_memcheck PROPERTIES SKIP_RETURN_CODE 77)
# Under valgrind it takes a minute or more: CI runs it, the everyday tools/test leaves it out.
set_property(TEST probe_cache_memcheck APPEND PROPERTY LABELS slow)
