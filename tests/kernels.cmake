# Darknet's patched CPU kernels (patches 0031-0034) against copies of the
# stock ones: the same bits on random inputs over many shapes.
fsdp_unit_test(test_kernels test_kernels.c kernels_stock.c)
target_include_directories(test_kernels PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
