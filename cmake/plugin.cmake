# libdarknet_fsdp.so: the sharding engine.  Its Darknet symbols resolve from
# the darknet executable at dlopen time; it is built with Darknet's flags so
# the structs it sees have Darknet's layout (checked again at load).
#
# Each folder of plugin/ is one static library that links only the folders
# below it (docs/DESIGN.md, "Layers"):
#
#   base < comm < cuda < core < dn < engine < io < report < session < plugin_main.c
#
# A library sees the headers of its own folder, of the folders it links and
# plugin/darknet_plugin.h, nothing else: an include of a folder above fails
# to compile, and so does a call into it (implicit declarations are errors).
# plugin/*/fsdp_*_gpu.c and *.cu read the device fields of Darknet's structs
# or run on the device, which only GPU builds have: they build only there.

get_target_property(_dn_defs darknet_lib INTERFACE_COMPILE_DEFINITIONS)

# fsdp_layer(NAME BELOW...): plugin/NAME/ as the library fsdp_NAME.
function(fsdp_layer name)
  set(dir "${CMAKE_SOURCE_DIR}/plugin/${name}")
  file(GLOB srcs CONFIGURE_DEPENDS "${dir}/*.c")
  if(TARGET fsdp_gpu)
    file(GLOB cu CONFIGURE_DEPENDS "${dir}/*.cu")
    list(APPEND srcs ${cu})
  else()
    list(FILTER srcs EXCLUDE REGEX "_gpu\\.c$")
  endif()
  if(NOT srcs)
    # Headers alone (cuda/ in a CPU build: each guards itself with GPU).
    add_library(fsdp_${name} INTERFACE)
    target_include_directories(fsdp_${name} INTERFACE "${dir}")
    target_link_libraries(fsdp_${name} INTERFACE ${ARGN})
    return()
  endif()
  add_library(fsdp_${name} STATIC ${srcs})
  target_include_directories(fsdp_${name} PUBLIC "${dir}")
  target_link_libraries(fsdp_${name} PUBLIC ${ARGN})
  target_compile_options(fsdp_${name} PRIVATE
      $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wno-unused-parameter
        # Errors: each of these was once a real bug that stayed a warning.
        -Werror=int-conversion -Werror=incompatible-pointer-types
        -Werror=implicit-function-declaration -Werror=return-type>)
  # -O3 as for Darknet (cmake/darknet.cmake): the optimizer's and the
  # shared-memory collectives' element loops vectorize; no fast-math, so no
  # float operation is reordered.
  target_compile_options(fsdp_${name} PRIVATE
      $<$<AND:$<COMPILE_LANGUAGE:C>,$<NOT:$<CONFIG:Debug>>>:-O3>)
  target_compile_definitions(fsdp_${name} PRIVATE _GNU_SOURCE)
  if(FSDP_CHECKS)
    target_compile_definitions(fsdp_${name} PUBLIC FSDP_CHECKS)
  endif()
  if(TARGET fsdp_gpu)
    set_target_properties(fsdp_${name} PROPERTIES CUDA_ARCHITECTURES "${FSDP_CUDA_ARCHS}"
      CUDA_RUNTIME_LIBRARY Shared)
    target_compile_options(fsdp_${name} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
  endif()
endfunction()

# What every layer sees: Darknet's headers and definitions, the hook
# interface, MPI (comm's backends and the entry point call it), and in GPU
# builds CUDA, cuDNN and NCCL (cmake/gpu.cmake).
add_library(fsdp_darknet INTERFACE)
target_include_directories(fsdp_darknet INTERFACE "${CMAKE_SOURCE_DIR}/plugin"
    "${DARKNET_SRC}/include" "${DARKNET_SRC}/src")
if(_dn_defs)
  target_compile_definitions(fsdp_darknet INTERFACE ${_dn_defs})
endif()
target_link_libraries(fsdp_darknet INTERFACE MPI::MPI_C m)
if(TARGET fsdp_gpu)
  target_link_libraries(fsdp_darknet INTERFACE fsdp_gpu)
endif()

fsdp_layer(base fsdp_darknet)
fsdp_layer(comm fsdp_base)
fsdp_layer(cuda fsdp_comm)
fsdp_layer(core fsdp_cuda)
fsdp_layer(dn fsdp_core)
fsdp_layer(engine fsdp_dn)
fsdp_layer(io fsdp_engine)
fsdp_layer(report fsdp_io)
fsdp_layer(session fsdp_report)

# Every layer, for the entry point and the tests: each layer links the one
# below it, so what a caller needs comes in, in an order the linker resolves
# in one pass (calls go only downward).
add_library(fsdp_plugin INTERFACE)
target_link_libraries(fsdp_plugin INTERFACE fsdp_session)

add_library(darknet_fsdp MODULE "${CMAKE_SOURCE_DIR}/plugin/plugin_main.c")
target_link_libraries(darknet_fsdp PRIVATE fsdp_plugin)
set_target_properties(darknet_fsdp PROPERTIES PREFIX "lib" OUTPUT_NAME darknet_fsdp
    LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}")
