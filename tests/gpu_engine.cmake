# The engine on a GPU: GPU builds only; skipped (exit 77) without a GPU.
if(FSDP_GPU)
  add_test(NAME gpu_engine COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu.sh)
  set_tests_properties(gpu_engine PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "${FSDP_TEST_ENV};FSDP_CPU_BUILD=${CMAKE_SOURCE_DIR}/build")
endif()
