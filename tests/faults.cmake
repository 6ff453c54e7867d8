# Faults (tests/test_faults.sh): one rank's failure stops every rank, in time,
# naming the cause, with no file that was already written changed.
foreach(np 2 3)
  foreach(part startup agree save checkpoint watchdog)
    fsdp_script_test(faults_${part}_np${np} test_faults.sh ${np} ${part})
  endforeach()
endforeach()
# Resume on another world size or strategy (global batch kept): equal to the
# uninterrupted run to float tolerance, optimizer state carried.
fsdp_script_test(resume_2to4 test_resume.sh 2 4 full full)
fsdp_script_test(resume_4to2 test_resume.sh 4 2 full full)
fsdp_script_test(resume_4to1 test_resume.sh 4 1 full full)
fsdp_script_test(resume_full_to_grad_op_2to3 test_resume.sh 2 3 full grad_op)
fsdp_script_test(resume_none_to_full_3to2 test_resume.sh 3 2 none full)
fsdp_script_test(resume_adam_4to2_grad_op_to_full test_resume.sh 4 2 grad_op full adam)
# cfg fuzzer (tests/cfg_fuzz.py): no hang, no crash of the plugin's making,
# every refusal names the file; one process, then 2 ranks.
fsdp_script_test(cfg_fuzz_np1 test_cfg_fuzz.sh 1 200 1)
fsdp_script_test(cfg_fuzz_np2 test_cfg_fuzz.sh 2 24 2)
# A few hundred more on 2 ranks, in CI (label slow): four parts that CTest
# can run side by side, each its own seed.
foreach(part 3 4 5 6)
  fsdp_script_test(cfg_fuzz_np2_${part} test_cfg_fuzz.sh 2 60 ${part})
  set_property(TEST cfg_fuzz_np2_${part} APPEND PROPERTY LABELS slow)
endforeach()
# The checksum, -fsdp-timeout's values, the bound on group nesting.
# The longest tests (each 15-45 s on 2 cores): CI runs them; the everyday
# tools/test leaves them out (tools/test --gpu, or ctest -L slow, runs them).
foreach(np 2 3)
  foreach(part startup agree save checkpoint)
    set_property(TEST faults_${part}_np${np} APPEND PROPERTY LABELS slow)
  endforeach()
endforeach()
set_property(TEST cfg_fuzz_np1 cfg_fuzz_np2 APPEND PROPERTY LABELS slow)
