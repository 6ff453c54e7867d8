# GPU tests (label gpu), registered in GPU builds only: the plugin's kernels
# against the host code they reproduce, and every collective of the NCCL and
# staged MPI backends on device buffers; plus bench_collectives_gpu (run by
# hand and by tools/gpu-check, not by CTest).  Without a GPU each test prints
# "skipped: no GPU" and exits 77, which CTest reports as skipped.
if(NOT TARGET fsdp_gpu)
  return()
endif()

# A plain program, not Criterion: Criterion forks, and CUDA does not survive a fork.
add_executable(test_kernels_gpu test_kernels_gpu.c)
target_link_libraries(test_kernels_gpu PRIVATE fsdp_plugin m)
target_compile_options(test_kernels_gpu PRIVATE -Wall -Wextra)
add_test(NAME kernels_gpu COMMAND test_kernels_gpu)
set_tests_properties(kernels_gpu PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300
    ENVIRONMENT "${FSDP_TEST_ENV}")

# test_collectives.c again, on device memory.  np 1: NCCL world 1 and the
# staged backend; np 2: the staged backend with both ranks on GPU 0, and NCCL
# only if there are 2 GPUs.  mpirun passes a rank's exit code 77 on; the
# regular expression makes the skip certain whatever mpirun does with it.
add_executable(test_collectives_gpu test_collectives.c)
target_compile_definitions(test_collectives_gpu PRIVATE FSDP_TEST_DEVICE)
target_link_libraries(test_collectives_gpu PRIVATE fsdp_plugin MPI::MPI_C m)
target_compile_options(test_collectives_gpu PRIVATE -Wall -Wextra)
foreach(np 1 2)
  fsdp_mpi_test(collectives_gpu_np${np} ${np} test_collectives_gpu)
  set_tests_properties(collectives_gpu_np${np} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
      SKIP_REGULAR_EXPRESSION "skipped: no GPU" TIMEOUT 300)
endforeach()

add_executable(bench_collectives_gpu bench_collectives.c)
target_compile_definitions(bench_collectives_gpu PRIVATE FSDP_BENCH_DEVICE)
target_link_libraries(bench_collectives_gpu PRIVATE fsdp_plugin MPI::MPI_C)
target_compile_options(bench_collectives_gpu PRIVATE -Wall -Wextra)
