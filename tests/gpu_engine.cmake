# The engine on a GPU: GPU builds only; skipped (exit 77) without a GPU.
# It compares with the CPU engine of another build folder (a CPU build of the
# same source); tools/gpu-bundle points it at its own.
if(FSDP_GPU)
  set(FSDP_CPU_BUILD_DIR "${CMAKE_SOURCE_DIR}/build" CACHE PATH
    "CPU build that tests/test_gpu.sh compares the GPU engine with")
  add_test(NAME gpu_engine COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu.sh)
  set_tests_properties(gpu_engine PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "${FSDP_TEST_ENV};FSDP_CPU_BUILD=${FSDP_CPU_BUILD_DIR}")
endif()
