# Seeing inside a run (tests/test_observe.sh): the flight recorder's summary
# of a hung job, the slow rank named, a trace of two machines.
fsdp_script_test(observe_hang test_observe.sh hang)
set_tests_properties(observe_hang PROPERTIES TIMEOUT 300)
fsdp_script_test(observe_trace test_observe.sh trace)
set_tests_properties(observe_trace PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
# The straggler waits out slow steps of the hogged rank (30-90 s on 2
# cores): CI runs it; the everyday tools/test leaves it out, as other slow ones.
# Alone: the hog takes a core, and another test's ranks beside it would slow
# ranks at random, the very thing it must not name.
fsdp_script_test(observe_straggler test_observe.sh straggler)
set_tests_properties(observe_straggler PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 400 RUN_SERIAL TRUE)
set_property(TEST observe_straggler APPEND PROPERTY LABELS slow)
# The flight recorder's ring and the hang summary over rings made by hand.
fsdp_unit_test(test_ring test_ring.c)
