# libdarknet_fsdp.so: the sharding engine.  Its Darknet symbols resolve from
# the darknet executable at dlopen time; it is built with Darknet's flags so
# the structs it sees have Darknet's layout (checked again at load).
file(GLOB FSDP_SOURCES CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/plugin/fsdp_*.c")
add_library(fsdp_core STATIC ${FSDP_SOURCES})
target_include_directories(fsdp_core PUBLIC "${CMAKE_SOURCE_DIR}/plugin"
    "${DARKNET_SRC}/include" "${DARKNET_SRC}/src")
target_compile_options(fsdp_core PRIVATE -Wall -Wextra -Wno-unused-parameter)
target_compile_definitions(fsdp_core PRIVATE _GNU_SOURCE)
target_link_libraries(fsdp_core PUBLIC MPI::MPI_C m)
get_target_property(_dn_defs darknet_lib INTERFACE_COMPILE_DEFINITIONS)
if(_dn_defs)
  target_compile_definitions(fsdp_core PUBLIC ${_dn_defs})
endif()
# GPU build: CUDA, cuDNN and NCCL headers, cudart and NCCL (cmake/gpu.cmake).
if(TARGET fsdp_gpu)
  target_link_libraries(fsdp_core PUBLIC fsdp_gpu)
endif()

add_library(darknet_fsdp MODULE "${CMAKE_SOURCE_DIR}/plugin/plugin_main.c")
target_link_libraries(darknet_fsdp PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,fsdp_core>")
set_target_properties(darknet_fsdp PROPERTIES PREFIX "lib" OUTPUT_NAME darknet_fsdp
    LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}")
