# The engine's proof: N ranks equal one process with an N-times batch.
foreach(np 1 2 3 4)
  fsdp_script_test(equiv_tiny_np${np} test_equivalence.sh tiny ${np})
endforeach()
fsdp_script_test(equiv_residual_np3 test_equivalence.sh residual 3)
fsdp_script_test(equiv_rnn_np2 test_equivalence.sh rnn 2)
fsdp_script_test(equiv_adam_np3 test_equivalence.sh tiny 3 adam)
fsdp_script_test(equiv_subdiv2_np2 test_equivalence.sh tiny 2 subdiv2)
fsdp_script_test(equiv_adam_subdiv2_np4 test_equivalence.sh residual 4 adam subdiv2)
