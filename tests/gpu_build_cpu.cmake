# The GPU build's Darknet and plugin on the CPU (-nogpu) against this build:
# registered in CPU builds, where tools/test runs it after .ci/gpu-build
# (skipped when there is no build-gpu/).
if(NOT FSDP_GPU)
  fsdp_script_test(gpu_build_on_cpu test_gpu_build_cpu.sh)
  set_tests_properties(gpu_build_on_cpu PROPERTIES SKIP_RETURN_CODE 77)
endif()
