# Two machines (tests/twohosts.sh: network namespaces on a bridge, tests/hosts.sh,
# TCP only): equivalence, batch norm, a slow link, lost machines and ranks,
# checkpoints moved between two machines and one.  Skipped (exit 77) where
# namespaces cannot be made (not root, no ip or unshare).
foreach(part equiv sync_bn cut kill_stop checkpoint hybrid wire plan)
  fsdp_script_test(machines_${part} test_machines.sh ${part})
  set_tests_properties(machines_${part} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
# The lost-machine parts wait out keepalive and -fsdp-timeout (15-25 s each):
# CI runs them; the everyday tools/test leaves them out, as it does other slow ones.
set_property(TEST machines_cut machines_kill_stop APPEND PROPERTY LABELS slow)
# Four machines of two ranks each (tests/hosts.sh: namespaces on a bridge):
# hierarchical exchanges, exact, and each link's bytes against the theory.
fsdp_script_test(machines4_full test_machines4.sh)
set_tests_properties(machines4_full PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
# Eight machines of four ranks: exact, each link's bytes against the
# hierarchical theory, each rank's peak against its prediction.  Slow.
fsdp_script_test(machines8_full test_machines8.sh)
set_tests_properties(machines8_full PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
set_property(TEST machines8_full APPEND PROPERTY LABELS slow)
