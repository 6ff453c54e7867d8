# libdarknet_fsdp.so: the sharding engine.  Its Darknet symbols resolve from
# the darknet executable at dlopen time; it is built with Darknet's flags so
# the structs it sees have Darknet's layout (checked again at load).
# plugin/fsdp_*_gpu.c read the device fields of Darknet's structs, which only
# GPU builds have: they build with the kernels, below.
file(GLOB FSDP_SOURCES CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/plugin/fsdp_*.c")
list(FILTER FSDP_SOURCES EXCLUDE REGEX "_gpu\\.c$")
add_library(fsdp_core STATIC ${FSDP_SOURCES})
target_include_directories(fsdp_core PUBLIC "${CMAKE_SOURCE_DIR}/plugin"
    "${DARKNET_SRC}/include" "${DARKNET_SRC}/src")
target_compile_options(fsdp_core PRIVATE
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wno-unused-parameter
      # Errors: each of these was once a real bug that stayed a warning.
      -Werror=int-conversion -Werror=incompatible-pointer-types
      -Werror=implicit-function-declaration -Werror=return-type>)
# -O3 as for Darknet (cmake/darknet.cmake): the optimizer's and the
# shared-memory collectives' element loops vectorize; no fast-math, so no
# float operation is reordered.
target_compile_options(fsdp_core PRIVATE
    $<$<AND:$<COMPILE_LANGUAGE:C>,$<NOT:$<CONFIG:Debug>>>:-O3>)
target_compile_definitions(fsdp_core PRIVATE _GNU_SOURCE)
target_link_libraries(fsdp_core PUBLIC MPI::MPI_C m)
get_target_property(_dn_defs darknet_lib INTERFACE_COMPILE_DEFINITIONS)
if(_dn_defs)
  target_compile_definitions(fsdp_core PUBLIC ${_dn_defs})
endif()
# GPU build: the plugin's kernels (plugin/fsdp_*.cu, for FSDP_CUDA_ARCHS, on
# the shared CUDA runtime Darknet uses) and its device halves in C
# (plugin/fsdp_*_gpu.c); CUDA, cuDNN and NCCL headers, cudart and NCCL
# (cmake/gpu.cmake).  The CPU build never sees either.
if(TARGET fsdp_gpu)
  file(GLOB FSDP_GPU_SOURCES CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/plugin/fsdp_*.cu"
       "${CMAKE_SOURCE_DIR}/plugin/fsdp_*_gpu.c")
  target_sources(fsdp_core PRIVATE ${FSDP_GPU_SOURCES})
  set_target_properties(fsdp_core PROPERTIES CUDA_ARCHITECTURES "${FSDP_CUDA_ARCHS}"
    CUDA_RUNTIME_LIBRARY Shared)
  target_compile_options(fsdp_core PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
  target_link_libraries(fsdp_core PUBLIC fsdp_gpu)
endif()

add_library(darknet_fsdp MODULE "${CMAKE_SOURCE_DIR}/plugin/plugin_main.c")
target_link_libraries(darknet_fsdp PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,fsdp_core>")
set_target_properties(darknet_fsdp PROPERTIES PREFIX "lib" OUTPUT_NAME darknet_fsdp
    LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}")
