# Memory predicted before the first step against every rank's peak RSS.
fsdp_script_test(memory_np1_np2 test_memory.sh 1 2)
fsdp_script_test(memory_np3_np4 test_memory.sh 3 4)
set_property(TEST memory_np1_np2 memory_np3_np4 APPEND PROPERTY LABELS slow)
