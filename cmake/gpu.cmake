# The GPU build needs Darknet's CUDA code ported to CUDA 13 / cuDNN 9; those
# patches are not in patches/ yet.  Refuse rather than silently build for CPU.
message(FATAL_ERROR "FSDP_GPU=ON: the CUDA 13 / cuDNN 9 patches for Darknet are not in "
  "patches/ yet, so a GPU build is not possible.  Configure without -DFSDP_GPU=ON.")
