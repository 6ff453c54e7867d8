# Layers that need no backward keep no activations (fsdp_acts.h): byte-
# identical weights with and without, N ranks against one process with the
# N-times batch, the bytes against the theory; subdivisions=2; the world-1
# run under valgrind (a layer pointing into a buffer given back shows here).
fsdp_script_test(activations_frozen_np2 test_activations.sh 2)
fsdp_script_test(activations_frozen_subdiv2_np3 test_activations.sh 3 subdiv2)
fsdp_script_test(activations_frozen_memcheck test_activations.sh 2 memcheck)
set_tests_properties(activations_frozen_memcheck PROPERTIES SKIP_RETURN_CODE 77)
fsdp_script_test(activations_route_into_dropout_np2 test_activations.sh 2 route_into_dropout)
