# Test plugins and tools the driver scripts use.
foreach(p plugin_counter plugin_empty)
  add_library(${p} MODULE ${p}.c)
  target_include_directories(${p} PRIVATE "${CMAKE_SOURCE_DIR}/plugin" "${DARKNET_SRC}/include")
  get_target_property(_defs darknet_lib INTERFACE_COMPILE_DEFINITIONS)
  if(_defs)
    target_compile_definitions(${p} PRIVATE ${_defs})
  endif()
  set_target_properties(${p} PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests")
  # GPU build: darknet.h includes CUDA's and cuDNN's headers.
  if(TARGET fsdp_gpu)
    target_link_libraries(${p} PRIVATE fsdp_gpu)
  endif()
endforeach()
add_executable(fsdp_wdiff wdiff.c)
target_link_libraries(fsdp_wdiff PRIVATE m)
set_target_properties(fsdp_wdiff PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}")

fsdp_script_test(hooks_and_seed test_hooks.sh)
fsdp_script_test(cfg_errors test_errors.sh)
fsdp_unit_test(test_flat test_flat.c)
fsdp_unit_test(test_grad test_grad.c)
fsdp_unit_test(test_mem test_mem.c)
# The layers above the core: dn/'s modules on a parsed network, and the
# engine running its step plan over the null backend.
fsdp_unit_test(test_dn test_dn.c)
fsdp_unit_test(test_engine test_engine.c)
# One Criterion file per feature.
foreach(t cfg plan optim abi hash watch agree backend hosts wire devices bn frozen_order io clock report)
  fsdp_unit_test(test_${t} test_${t}.c)
endforeach()
fsdp_script_test(setup_refusals test_setup.sh)
# Label ci: it needs build-gpu/, which only tools/test --gpu (every CI run) builds.
add_test(NAME abi_refusal COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_abi.sh)
set_tests_properties(abi_refusal PROPERTIES LABELS "script;ci" SKIP_RETURN_CODE 77 ENVIRONMENT "${FSDP_TEST_ENV}")
