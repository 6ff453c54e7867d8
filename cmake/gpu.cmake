# GPU build of Darknet (CUDA 12 or 13, cuDNN 9) and what the plugin needs for its
# NCCL backend.  Included from cmake/darknet.cmake when FSDP_GPU=ON, after
# darknet_lib exists and before the darknet executable and the plugin
# (cmake/plugin.cmake) are defined.
#   FSDP_CUDA_ARCHS  GPU architectures, CMake's CUDA_ARCHITECTURES syntax
#                    ("80;90": SASS and PTX for sm_80 and sm_90; the PTX lets
#                    newer GPUs run the kernels after a JIT compile)
#   FSDP_CUDNN       cuDNN convolutions (default ON)

set(FSDP_CUDA_ARCHS "80;90" CACHE STRING "CUDA architectures for Darknet's kernels")

# --- Compiler and toolkit ----------------------------------------------------
# Look where NVIDIA installs by default when nvcc is not already on PATH.
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(FATAL_ERROR "FSDP_GPU=ON but no CUDA compiler (nvcc) was found.  Install the "
    "CUDA 12 or 13 toolkit in /usr/local/cuda, put its bin/ on PATH or pass "
    "-DCMAKE_CUDA_COMPILER=/path/to/nvcc; or configure without -DFSDP_GPU=ON.")
endif()
# Must be set before enable_language so CMake's compiler check uses them too.
set(CMAKE_CUDA_ARCHITECTURES "${FSDP_CUDA_ARCHS}")
# One shared CUDA runtime for darknet and the plugin: with the static runtime
# (CMake's default) each would have its own, and the plugin's streams and
# events would be meaningless to Darknet's.
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
# The toolkit found decides the CUDA major (nothing in the code needs 13): a
# CUDA 13 build needs driver R580 or newer, a CUDA 12 one R525 (many GPU
# machines still run 535-570).  Older toolkits lack the stream-ordered pool
# attributes and NCCL's non-blocking start that the plugin uses.
if(CUDAToolkit_VERSION VERSION_LESS 12)
  message(FATAL_ERROR "CUDA ${CUDAToolkit_VERSION} found (${CMAKE_CUDA_COMPILER}); the GPU build needs "
    "CUDA 12 or 13: point CMAKE_CUDA_COMPILER (or CUDACXX, or PATH) at such a toolkit's nvcc.")
endif()
string(REGEX MATCH "^[0-9]+" FSDP_CUDA_MAJOR "${CUDAToolkit_VERSION}")

# Stops configuring when `header` defines `macro` as a number below
# `minimum` (a header without it passes: the link decides then).
function(fsdp_require_version what header macro minimum need)
  file(STRINGS "${header}" _line REGEX "define ${macro} ")
  string(REGEX MATCH "[0-9]+" _found "${_line}")
  if(_found AND _found LESS ${minimum})
    get_filename_component(_dir "${header}" DIRECTORY)
    message(FATAL_ERROR "${what} ${_found} found in ${_dir}; ${need}")
  endif()
endfunction()

# --- cuDNN -------------------------------------------------------------------
if(FSDP_CUDNN)
  # Also where Python's nvidia-cudnn wheel puts it (CUDNN_HOME=.../nvidia/cudnn),
  # which ships only the versioned library name.
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_HOME
    PATH_SUFFIXES cudnn include)
  find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${CUDAToolkit_LIBRARY_DIR}
    ENV CUDNN_HOME PATH_SUFFIXES lib lib64)
  if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)
    message(FATAL_ERROR "FSDP_CUDNN=ON but cuDNN was not found (cudnn.h: "
      "${CUDNN_INCLUDE_DIR}, libcudnn: ${CUDNN_LIBRARY}).  Install cuDNN 9 for CUDA ${FSDP_CUDA_MAJOR} "
      "(headers and libcudnn.so next to CUDA's, set CUDNN_HOME, or pass -DCUDNN_INCLUDE_DIR= and "
      "-DCUDNN_LIBRARY=), or configure with -DFSDP_CUDNN=OFF.")
  endif()
  fsdp_require_version(cuDNN "${CUDNN_INCLUDE_DIR}/cudnn_version.h" CUDNN_MAJOR 8
    "the patched Darknet needs cuDNN 8 or newer (9 tested).")
endif()

# --- NCCL (the plugin's GPU backend) -----------------------------------------
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME
  PATH_SUFFIXES lib lib64)
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  message(FATAL_ERROR "FSDP_GPU=ON but NCCL was not found (nccl.h: ${NCCL_INCLUDE_DIR}, "
    "libnccl: ${NCCL_LIBRARY}).  Install NCCL 2 (e.g. Debian/Ubuntu libnccl-dev, or into "
    "/usr/local/cuda), set NCCL_HOME, or pass -DNCCL_INCLUDE_DIR= and -DNCCL_LIBRARY=.")
endif()

# ncclCommInitRankConfig (the non-blocking start the watchdog times) is NCCL 2.14's.
fsdp_require_version(NCCL "${NCCL_INCLUDE_DIR}/nccl.h" NCCL_VERSION_CODE 21400
  "the plugin needs NCCL 2.14 or newer (ncclCommInitRankConfig).")

# --- Finding the libraries at run time ----------------------------------------
# Programs built here run without LD_LIBRARY_PATH or an ld.so.conf entry for
# CUDA: nvcc links CUDA's lib folder implicitly, so CMake would leave it out of
# the build tree's RPATH (it also drops a folder it takes for one of the
# compiler's own, such as targets/x86_64-linux/lib: hence also lib64 as the
# toolkit names it).  Targets defined from here on (darknet, the plugin, the
# tests) get these folders.
get_filename_component(_fsdp_lib64 "${CUDAToolkit_BIN_DIR}/../lib64" ABSOLUTE)
set(_fsdp_rpath "${CUDAToolkit_LIBRARY_DIR}" "${_fsdp_lib64}")
foreach(_lib NCCL_LIBRARY CUDNN_LIBRARY)
  if(${_lib})
    get_filename_component(_dir "${${_lib}}" DIRECTORY)
    list(APPEND _fsdp_rpath "${_dir}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _fsdp_rpath)
list(APPEND CMAKE_BUILD_RPATH ${_fsdp_rpath})

# --- Darknet ------------------------------------------------------------------
set(DN_CUDA_SOURCES convolutional_kernels deconvolutional_kernels activation_kernels
    im2col_kernels col2im_kernels blas_kernels crop_layer_kernels dropout_layer_kernels
    maxpool_layer_kernels avgpool_layer_kernels)
list(TRANSFORM DN_CUDA_SOURCES PREPEND "${DARKNET_SRC}/src/")
list(TRANSFORM DN_CUDA_SOURCES APPEND ".cu")
target_sources(darknet_lib PRIVATE ${DN_CUDA_SOURCES})
# darknet_lib existed before the variables above were set: set its properties.
set_target_properties(darknet_lib PROPERTIES CUDA_ARCHITECTURES "${FSDP_CUDA_ARCHS}"
  CUDA_RUNTIME_LIBRARY Shared)
# PUBLIC: GPU and CUDNN change the layout of `layer` and `network`; the plugin
# copies these definitions (cmake/plugin.cmake) so it sees the same structs.
target_compile_definitions(darknet_lib PUBLIC GPU)
target_link_libraries(darknet_lib PUBLIC CUDA::cudart CUDA::cublas CUDA::curand)
if(FSDP_CUDNN)
  target_compile_definitions(darknet_lib PUBLIC CUDNN)
  target_include_directories(darknet_lib PUBLIC "${CUDNN_INCLUDE_DIR}")
  target_link_libraries(darknet_lib PUBLIC "${CUDNN_LIBRARY}")
endif()

# --- What the plugin needs ----------------------------------------------------
# The plugin's libraries are defined later (cmake/plugin.cmake) and do not link
# darknet_lib (Darknet's symbols come from the executable), so it gets CUDA's
# headers, cuDNN's (darknet.h includes cudnn.h under CUDNN) and NCCL from this
# interface target.  cudart is the same shared library darknet links.
add_library(fsdp_gpu INTERFACE)
target_include_directories(fsdp_gpu INTERFACE "${NCCL_INCLUDE_DIR}")
target_link_libraries(fsdp_gpu INTERFACE CUDA::cudart "${NCCL_LIBRARY}")
if(FSDP_CUDNN)
  target_include_directories(fsdp_gpu INTERFACE "${CUDNN_INCLUDE_DIR}")
endif()
# cuBLAS and cuRAND headers come in through darknet.h.
target_include_directories(fsdp_gpu INTERFACE ${CUDAToolkit_INCLUDE_DIRS})

message(STATUS "GPU build: CUDA ${CUDAToolkit_VERSION}, archs ${FSDP_CUDA_ARCHS}, "
  "cuDNN ${FSDP_CUDNN}, NCCL ${NCCL_LIBRARY}")
