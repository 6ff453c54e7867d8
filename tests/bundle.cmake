# The GPU bundle that tools/gpu-check runs on a GPU machine with another
# system (tools/gpu-bundle): tools/test --gpu (every CI run) makes it before
# CTest runs; label ci: the everyday tools/test, which makes no bundle, leaves
# this test out.  Skipped when there is no bundle.
fsdp_script_test(gpu_bundle test_bundle.sh)
set_tests_properties(gpu_bundle PROPERTIES SKIP_RETURN_CODE 77)
set_property(TEST gpu_bundle APPEND PROPERTY LABELS ci)

# tools/gpu-check's plan and arguments, without a GPU.
fsdp_script_test(gpu_check_plan test_gpu_check.sh)
