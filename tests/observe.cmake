# Seeing inside a run (tests/test_observe.sh): the flight recorder's summary
# of a hung job, the slow rank named, a trace of two machines.
fsdp_script_test(observe_hang test_observe.sh hang)
set_tests_properties(observe_hang PROPERTIES TIMEOUT 300)
fsdp_script_test(observe_trace test_observe.sh trace)
set_tests_properties(observe_trace PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
