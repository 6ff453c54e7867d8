# Synchronized batch norm (tests/test_sync_bn.sh): Darknet's own resnet18 and
# darknet19 with trainable batch norm on N ranks against one process with the
# N-times batch.
fsdp_script_test(sync_bn_resnet18_np2 test_sync_bn.sh resnet18 2)
fsdp_script_test(sync_bn_darknet19_np2 test_sync_bn.sh darknet19 2)
fsdp_script_test(sync_bn_resnet18_np4 test_sync_bn.sh resnet18 4)
fsdp_script_test(sync_bn_subdiv2_np2 test_sync_bn.sh subdiv2 2)
fsdp_script_test(sync_bn_frozen_np2 test_sync_bn.sh frozen 2)
fsdp_script_test(sync_bn_refused_np2 test_sync_bn.sh refused 2)
fsdp_script_test(sync_bn_default_groups_np2 test_sync_bn.sh default_groups 2)
