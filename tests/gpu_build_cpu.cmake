# The GPU build's Darknet and plugin on the CPU (-nogpu) against this build:
# registered in CPU builds, where tools/test --gpu (every CI run) runs it
# after .ci/gpu-build; label ci: the everyday tools/test, which builds no GPU
# variant, leaves it out.  Skipped when there is no build-gpu/.
if(NOT FSDP_GPU)
  fsdp_script_test(gpu_build_on_cpu test_gpu_build_cpu.sh)
  set_tests_properties(gpu_build_on_cpu PROPERTIES SKIP_RETURN_CODE 77)
  set_property(TEST gpu_build_on_cpu APPEND PROPERTY LABELS ci)
endif()
