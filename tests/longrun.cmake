# Long runs (tests/test_longrun.sh): checkpoints on the clock, written in
# the background and made complete by a manifest; -fsdp-resume auto by the
# same command; a writer stopped mid-file; half the ranks with the global
# batch kept; the flags' refusals; tools/relaunch.
foreach(part clock detector killed half refusals)
  fsdp_script_test(longrun_${part} test_longrun.sh ${part})
endforeach()
# Chaos on two simulated machines (tests/test_chaos.sh): 10 faults at random
# steps of a 200-step run, each followed by the same command again; the end
# byte-identical to the run never interrupted (about 2 minutes, in CI).
fsdp_script_test(chaos_2machines test_chaos.sh 10 1)
set_tests_properties(chaos_2machines PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
set_property(TEST chaos_2machines APPEND PROPERTY LABELS slow)
