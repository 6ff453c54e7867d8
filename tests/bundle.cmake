# The GPU bundle that tools/gpu-check runs on a GPU machine with another
# system (tools/gpu-bundle): tools/test makes it before CTest runs; skipped
# when it was not made.
fsdp_script_test(gpu_bundle test_bundle.sh)
set_tests_properties(gpu_bundle PROPERTIES SKIP_RETURN_CODE 77)
