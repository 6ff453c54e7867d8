# Sharded checkpoints: exact resume, and refusals.
fsdp_script_test(checkpoint_full_np2 test_checkpoint.sh 2 full)
fsdp_script_test(checkpoint_grad_op_adam_np3 test_checkpoint.sh 3 grad_op adam)
fsdp_script_test(checkpoint_none_np2 test_checkpoint.sh 2 none)
fsdp_script_test(checkpoint_full_node_np3 test_checkpoint.sh 3 full node)
fsdp_script_test(checkpoint_full_recompute_np2 test_checkpoint.sh 2 full recompute)
