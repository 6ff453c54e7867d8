# Activation checkpointing (recompute=1, fsdp_recompute.h): byte-identical
# weights with and without at world 1 and on N ranks under each strategy,
# the same bytes moved, the activation bytes saved against the theory;
# subdivisions=2, Adam, prefetch, a dropout scaling a kept output in
# place; world 1 under valgrind; a resizing
# detector; the refusals, by cfg line; Darknet's own resnet18, yolov3-tiny
# and yolov3 at worlds 1, 2 and 4.
fsdp_script_test(recompute_np2 test_recompute.sh 2)
fsdp_script_test(recompute_subdiv2_adam_np3 test_recompute.sh 3 subdiv2 adam)
fsdp_script_test(recompute_prefetch_dropout_np2 test_recompute.sh 2 prefetch dropout_after)
fsdp_script_test(recompute_dropout_inside_np2 test_recompute.sh 2 dropout_inside)
fsdp_script_test(recompute_memcheck test_recompute.sh 2 memcheck)
set_tests_properties(recompute_memcheck PROPERTIES SKIP_RETURN_CODE 77)
fsdp_script_test(recompute_detector_np2 test_recompute.sh detector)
fsdp_script_test(recompute_refusals test_recompute.sh refusals)
fsdp_script_test(recompute_darknet_resnet18 test_recompute.sh darknet resnet18)
fsdp_script_test(recompute_darknet_yolov3_tiny test_recompute.sh darknet yolov3-tiny)
fsdp_script_test(recompute_darknet_yolov3 test_recompute.sh darknet yolov3)
