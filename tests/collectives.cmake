# Backends: collectives checked on 1 to 4 ranks, a bandwidth table
# (bench_collectives, run by hand, not by CTest), and the shard arithmetic.
add_executable(test_collectives test_collectives.c)
target_link_libraries(test_collectives PRIVATE fsdp_plugin MPI::MPI_C m)
target_compile_options(test_collectives PRIVATE -Wall -Wextra)
foreach(np 1 2 3 4)
  fsdp_mpi_test(collectives_np${np} ${np} test_collectives)
  # A collective that never completes would otherwise hang CTest.
  set_tests_properties(collectives_np${np} PROPERTIES TIMEOUT 300)
endforeach()
# The point-to-point path (plugin/comm/fsdp_pairs.h), as between nodes: ranks
# on one machine otherwise take the shared-memory path (plugin/comm/fsdp_shm.h).
foreach(np 2 3)
  fsdp_mpi_test(collectives_noshm_np${np} ${np} test_collectives)
  set_tests_properties(collectives_noshm_np${np} PROPERTIES TIMEOUT 300
      ENVIRONMENT "${FSDP_TEST_ENV};FSDP_SHM=0")
endforeach()

add_executable(bench_collectives bench_collectives.c)
target_link_libraries(bench_collectives PRIVATE fsdp_plugin MPI::MPI_C)
target_compile_options(bench_collectives PRIVATE -Wall -Wextra)

fsdp_unit_test(test_shard_math test_shard_math.c)
