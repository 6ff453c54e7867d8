# Sharded checkpoints: exact resume, and refusals.
fsdp_script_test(checkpoint_full_np2 test_checkpoint.sh 2 full)
fsdp_script_test(checkpoint_grad_op_adam_np3 test_checkpoint.sh 3 grad_op adam)
fsdp_script_test(checkpoint_none_np2 test_checkpoint.sh 2 none)
fsdp_script_test(checkpoint_full_node_np3 test_checkpoint.sh 3 full node)
fsdp_script_test(checkpoint_full_recompute_np2 test_checkpoint.sh 2 full recompute)
# Crafted checkpoints (tests/test_ckpt_fuzz.sh): hundreds of files with valid
# checksums and edge values, truncations, symlinks, FIFOs and sparse files,
# each resumed on 2 ranks; every one refused by name, in time, within memory,
# nothing outside the backup folder changed; then the genuine resumes of 3 ranks'
# files and on the clock, and 2 crafted files, under valgrind (about 4 minutes).
fsdp_script_test(ckpt_fuzz test_ckpt_fuzz.sh 4)
set_tests_properties(ckpt_fuzz PROPERTIES TIMEOUT 900)
set_property(TEST ckpt_fuzz APPEND PROPERTY LABELS slow)
