# Builds Darknet's library and the `darknet` command from the prepared source,
# the way its Makefile would, without using the Makefile.
set(DN_LIB_SOURCES gemm utils cuda deconvolutional_layer convolutional_layer list image
    activations im2col col2im blas crop_layer dropout_layer maxpool_layer softmax_layer data
    matrix network connected_layer cost_layer parser option_list detection_layer route_layer
    upsample_layer box normalization_layer avgpool_layer layer local_layer shortcut_layer
    logistic_layer activation_layer rnn_layer gru_layer crnn_layer demo batchnorm_layer
    region_layer reorg_layer tree lstm_layer l2norm_layer yolo_layer iseg_layer
    dn_plugin dn_rand)
set(DN_EXE_SOURCES captcha lsd super art tag cifar go rnn segmenter regressor classifier
    coco yolo detector nightmare instance-segmenter darknet)
list(TRANSFORM DN_LIB_SOURCES PREPEND "${DARKNET_SRC}/src/")
list(TRANSFORM DN_LIB_SOURCES APPEND ".c")
list(TRANSFORM DN_EXE_SOURCES PREPEND "${DARKNET_SRC}/examples/")
list(TRANSFORM DN_EXE_SOURCES APPEND ".c")

add_library(darknet_lib STATIC ${DN_LIB_SOURCES})
set_target_properties(darknet_lib PROPERTIES OUTPUT_NAME darknet)
target_include_directories(darknet_lib PUBLIC "${DARKNET_SRC}/include" "${DARKNET_SRC}/src"
    "${CMAKE_SOURCE_DIR}/plugin")
# Darknet's own flags, minus -Ofast: fast-math would let the compiler reorder
# float sums differently in the plugin and in Darknet.
target_compile_options(darknet_lib PRIVATE -Wno-unused-result -Wno-unknown-pragmas
    -Wno-unused-variable -Wno-unused-but-set-variable -Wno-misleading-indentation
    -Wno-stringop-overflow -Wno-format-overflow -Wno-alloc-size-larger-than
    -Wno-maybe-uninitialized -Wno-unused-function -Wno-stringop-truncation)
# -O3, still without fast-math, in optimised builds: at -O2 GCC's vectorizer
# (its "very cheap" cost model) leaves Darknet's element loops scalar
# (activations, pooling, bias); -O3 vectorizes them, and without -ffast-math it
# reorders no float operation, so results are the same bits.
target_compile_options(darknet_lib PRIVATE
    $<$<AND:$<COMPILE_LANGUAGE:C>,$<NOT:$<CONFIG:Debug>>>:-O3>)
target_link_libraries(darknet_lib PUBLIC m Threads::Threads ${CMAKE_DL_LIBS})

if(FSDP_OPENBLAS)
  find_library(OPENBLAS_LIB NAMES openblas REQUIRED)
  find_path(CBLAS_INCLUDE NAMES cblas.h PATH_SUFFIXES openblas REQUIRED)
  target_compile_definitions(darknet_lib PRIVATE DARKNET_CBLAS)
  target_include_directories(darknet_lib PRIVATE "${CBLAS_INCLUDE}")
  target_link_libraries(darknet_lib PUBLIC "${OPENBLAS_LIB}")
endif()

if(FSDP_OPENCV)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(OPENCV REQUIRED IMPORTED_TARGET opencv4)
  target_sources(darknet_lib PRIVATE "${DARKNET_SRC}/src/image_opencv.cpp")
  target_compile_definitions(darknet_lib PUBLIC OPENCV)
  target_link_libraries(darknet_lib PUBLIC PkgConfig::OPENCV stdc++)
endif()

if(FSDP_GPU)
  include(cmake/gpu.cmake)
endif()

add_executable(darknet ${DN_EXE_SOURCES})
target_compile_options(darknet PRIVATE -Wno-unused-result -Wno-unused-variable
    -Wno-unused-but-set-variable -Wno-format-overflow -Wno-stringop-overflow
    -Wno-misleading-indentation -Wno-unknown-pragmas -Wno-maybe-uninitialized)
target_link_libraries(darknet PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,darknet_lib>")
# The plugin resolves Darknet's functions from the executable.
set_target_properties(darknet PROPERTIES ENABLE_EXPORTS ON
    RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}")
