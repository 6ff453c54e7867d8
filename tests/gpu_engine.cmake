# The engine on a GPU: GPU builds only; skipped (exit 77) without a GPU.
# It compares with the CPU engine of another build folder (a CPU build of the
# same source); tools/gpu-bundle points it at its own.
if(FSDP_GPU)
  set(FSDP_CPU_BUILD_DIR "${CMAKE_SOURCE_DIR}/build" CACHE PATH
    "CPU build that tests/test_gpu.sh compares the GPU engine with")
  # In three parts of 6 to 11 training launches each (tools/gpu-check runs
  # them within its budget): world 1, 2 ranks and NCCL; the probe and frozen
  # batch norm; synchronized batch norm and repeatability.
  add_test(NAME gpu_engine COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu.sh 1 2 5)
  add_test(NAME gpu_engine_frozen COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu.sh 3 4)
  add_test(NAME gpu_engine_bn COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu.sh 6 7)
  set_tests_properties(gpu_engine gpu_engine_frozen gpu_engine_bn PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
    TIMEOUT 300 ENVIRONMENT "${FSDP_TEST_ENV};FSDP_CPU_BUILD=${FSDP_CPU_BUILD_DIR}")
  # Activation recomputation on the device (test_recompute.sh gpu): batch
  # norm, a shortcut, a route past a group and a dropout replayed, at world 1
  # and on 2 ranks sharing the GPU; and a detector that resizes.
  add_test(NAME recompute_gpu_np2 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_recompute.sh 2 dropout_inside gpu)
  add_test(NAME recompute_gpu_detector COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_recompute.sh detector gpu)
  set_tests_properties(recompute_gpu_np2 recompute_gpu_detector PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
    TIMEOUT 600 ENVIRONMENT "${FSDP_TEST_ENV}")
endif()
