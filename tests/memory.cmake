# Memory predicted before the first step against every rank's peak RSS.
fsdp_script_test(memory_np1_np2 test_memory.sh 1 2)
fsdp_script_test(memory_np3_np4 test_memory.sh 3 4)
set_property(TEST memory_np1_np2 memory_np3_np4 APPEND PROPERTY LABELS slow)
# The everyday suite's case: the prediction (the engine's own operations
# over the count placement) against the pool, node memory and scratch the
# ranks measure, at 2 ranks.
fsdp_script_test(memory_np2_fast test_memory.sh --fast 2)
# A model that does not fit one rank, under a cap per rank (a memory cgroup:
# root only; exit 77 skips where there is none).
fsdp_script_test(memory_cap_np4 test_memory_cap.sh)
set_property(TEST memory_cap_np4 PROPERTY SKIP_RETURN_CODE 77)
fsdp_script_test(plan_budget test_plan_budget.sh)
fsdp_script_test(plan_link test_plan_link.sh)
# Lists and ranges of worlds: the same rows as the range; 1024 ranks quickly.
fsdp_script_test(plan_worlds test_plan_worlds.sh)
# Dozens of ranks on one machine, with the defaults and the copying path:
# exact against stock Darknet, every rank's peak against the prediction.
fsdp_script_test(scale_np32 test_scale.sh 32)
