# Frozen layers and nested frozen groups (issue: the linear-probe workflow).
# Each case runs world 1 (against its starting weights, and for `nested`
# against stock Darknet) and NP ranks against world 1 with an NP-times batch.
foreach(case nested one_group root_trunk between mixed all_frozen batchnorm batchnorm_between subdiv2 stopbackward dropout_between rnn_trunk)
  foreach(np 2 3)
    fsdp_script_test(frozen_${case}_np${np} test_frozen.sh ${case} ${np})
  endforeach()
endforeach()
fsdp_script_test(frozen_nested_20steps_np3 test_frozen.sh nested 3 20)
fsdp_script_test(probe_loading_np2 test_probe_load.sh)
fsdp_script_test(frozen_nested_prefetch_np3 test_frozen.sh nested 3 3 prefetch)
fsdp_script_test(frozen_between_prefetch_np2 test_frozen.sh between 2 3 prefetch)
fsdp_script_test(frozen_mixed_prefetch_np3 test_frozen.sh mixed 3 3 prefetch)
# On one machine the shared-memory collectives block, and prefetch stays
# off: the started point-to-point ones run these.
set_tests_properties(frozen_nested_prefetch_np3 frozen_between_prefetch_np2 frozen_mixed_prefetch_np3
  PROPERTIES ENVIRONMENT "${FSDP_TEST_ENV};FSDP_SHM=0")
fsdp_script_test(frozen_nested_grad_op_np3 test_frozen.sh nested 3 3 grad_op)
fsdp_script_test(frozen_between_none_np2 test_frozen.sh between 2 3 none)
fsdp_script_test(frozen_mixed_grad_op_np2 test_frozen.sh mixed 2 3 grad_op)
# shard_node_shared=1: the linear probe, a frozen group passing deltas
# back, groups below stopbackward (stepped in the update, after a sync), and
# nothing trainable (no gradient slots).
fsdp_script_test(frozen_nested_node_np3 test_frozen.sh nested 3 3 node)
fsdp_script_test(frozen_between_node_np2 test_frozen.sh between 2 3 node)
fsdp_script_test(frozen_stopbackward_node_np2 test_frozen.sh stopbackward 2 3 node)
fsdp_script_test(frozen_all_frozen_node_np2 test_frozen.sh all_frozen 2 3 node)
# The world-1 run of the cases with dropped buffers and frozen backward paths
# under valgrind: a use-after-free trains the same weights and only shows here.
foreach(case nested between mixed batchnorm_between dropout_between stopbackward rnn_trunk)
  fsdp_script_test(frozen_${case}_memcheck test_frozen.sh ${case} 2 3 memcheck)
  set_tests_properties(frozen_${case}_memcheck PROPERTIES SKIP_RETURN_CODE 77)
endforeach()
