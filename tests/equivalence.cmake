# The engine's proof: N ranks equal one process with an N-times batch.
foreach(np 1 2 3 4)
  fsdp_script_test(equiv_tiny_np${np} test_equivalence.sh tiny ${np})
endforeach()
fsdp_script_test(equiv_residual_np3 test_equivalence.sh residual 3)
fsdp_script_test(equiv_rnn_np2 test_equivalence.sh rnn 2)
fsdp_script_test(equiv_adam_np3 test_equivalence.sh tiny 3 adam)
fsdp_script_test(equiv_subdiv2_np2 test_equivalence.sh tiny 2 subdiv2)
fsdp_script_test(equiv_adam_subdiv2_np4 test_equivalence.sh residual 4 adam subdiv2)
fsdp_script_test(equiv_layers_np3 test_equivalence.sh layers 3)
fsdp_script_test(equiv_prefetch_np3 test_equivalence.sh residual 3 prefetch)
fsdp_script_test(equiv_prefetch_subdiv2_np2 test_equivalence.sh tiny 2 prefetch subdiv2)
# The shared-memory collectives block, so prefetch stays off on one machine
# (equiv_prefetch_np3 checks that): the started point-to-point ones run this
# one, byte-identical to the shared-memory path (test_equivalence.sh).
set_tests_properties(equiv_prefetch_subdiv2_np2 PROPERTIES ENVIRONMENT "${FSDP_TEST_ENV};FSDP_SHM=0")
fsdp_script_test(equiv_keep_np2 test_equivalence.sh residual 2 keep)
fsdp_script_test(equiv_auto_group_np3 test_equivalence.sh auto 3)

# As between two hosts: no shared-memory transport (TCP over loopback only)
# and no shared-memory collectives (plugin/comm/fsdp_shm.h), so the
# point-to-point all-gather, reduce-scatter and all-reduce
# (plugin/comm/fsdp_pairs.h) carry every byte.
# (Open MPI takes MCA parameters from OMPI_MCA_* in the environment.)
set(FSDP_TCP_ENV ${FSDP_TEST_ENV} FSDP_SHM=0 OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=lo)
fsdp_script_test(equiv_tcp_tiny_np2 test_equivalence.sh tiny 2)
fsdp_script_test(equiv_tcp_residual_prefetch_np3 test_equivalence.sh residual 3 prefetch)
set_tests_properties(equiv_tcp_tiny_np2 equiv_tcp_residual_prefetch_np3 PROPERTIES ENVIRONMENT "${FSDP_TCP_ENV}")
# Point to point on 4 ranks, where MPI's own collectives would add in another
# order than the shared-memory path: byte-identical to it all the same.
fsdp_script_test(equiv_noshm_adam_subdiv2_np4 test_equivalence.sh residual 4 adam subdiv2)
set_tests_properties(equiv_noshm_adam_subdiv2_np4 PROPERTIES ENVIRONMENT "${FSDP_TEST_ENV};FSDP_SHM=0")

# shard_node_shared=1: parameters and the gradient slots in node memory,
# gathers that move nothing, reduce-scatters summed straight from the slots
# (subdiv2: a second group's gradient takes a pooled buffer while the first
# holds the slot).
fsdp_script_test(equiv_node_tiny_np2 test_equivalence.sh tiny 2 node)
fsdp_script_test(equiv_node_residual_subdiv2_np3 test_equivalence.sh residual 3 subdiv2 node)
fsdp_script_test(equiv_node_adam_np4 test_equivalence.sh residual 4 adam node)
