# Darknet's own classifier cfgs with [dropout] and [crop] (deps/darknet/cfg)
# on 2 and 4 ranks against stock Darknet with the 2- and 4-times batch:
# forward's draws keyed like the data (patch 0045) make them exact; a crop
# larger than its input is refused by its line (patch 0046).  cifar has
# batch norm, whose sums in another order the tolerance covers.
foreach(np 2 4)
  fsdp_script_test(darknet_cfgs_dropout_np${np} test_darknet_cfgs.sh ${np} 64 1e-4 alexnet strided vgg-16)
  fsdp_script_test(darknet_cfgs_cifar_np${np} test_darknet_cfgs.sh ${np} 32 5e-3 cifar)
endforeach()
# yolov1-tiny.cfg under `detector train`: refused (patch 0047), where stock
# Darknet corrupted its heap.
fsdp_script_test(darknet_cfgs_yolov1_np2 test_yolov1.sh 2)
# Darknet's whole cfg folder (tests/test_cfg_folder.sh all): each classifier
# and detector cfg within what stock Darknet's own rounding moves it (nudged
# by an ulp, batch norm summed in double, patch 0048, or 2 BLAS threads), or
# refused or left out by name with its reason (docs/testing.md, "Darknet's
# own cfgs").  About 7 minutes on 2 cores: in CI, not the everyday run.
fsdp_script_test(cfg_folder_all_np2 test_cfg_folder.sh 2 all)
set_tests_properties(cfg_folder_all_np2 PROPERTIES TIMEOUT 1500)
set_property(TEST cfg_folder_all_np2 APPEND PROPERTY LABELS slow)
