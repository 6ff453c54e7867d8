# `detector train` on N ranks against stock Darknet with the N-times batch:
# yolov3-tiny and yolov2-tiny style, multi-scale (random=1), the frozen YOLO
# backbone; training commands that cannot be exact refused.
foreach(case yolov3 yolov2 random frozen)
  fsdp_script_test(detector_${case}_np2 test_detector.sh ${case} 2)
endforeach()
fsdp_script_test(detector_yolov3_np3 test_detector.sh yolov3 3)
fsdp_script_test(detector_frozen_random_np2 test_detector.sh frozen 2 random)
# The YOLO linear probe and a whole detector with shard_node_shared=1.
fsdp_script_test(detector_frozen_node_np2 test_detector.sh frozen 2 node)
fsdp_script_test(detector_yolov3_node_np3 test_detector.sh yolov3 3 node)
fsdp_script_test(detector_refuse_np2 test_detector.sh refuse 2)
fsdp_script_test(regressor_np2 test_detector.sh regressor 2)
# `rnn train` (character streams) on N ranks against one process with N times the streams.
fsdp_script_test(rnn_train_np2 test_rnn.sh 2)
fsdp_script_test(rnn_train_bn_np2 test_rnn.sh 2 bn)
