# A user's first hour (docs/DESIGN.md, "Command line" and "Log file"): the
# plugin's keys and flags refused without it, help, what each rank prints,
# -fsdp-log and tools/plot, the README's commands naming only what exists.
fsdp_script_test(no_plugin_refusals test_no_plugin.sh)
fsdp_script_test(help_and_flags test_help.sh)
fsdp_script_test(rank0_output_np3 test_output.sh)
fsdp_script_test(log_and_plot_np2 test_log.sh)
fsdp_script_test(readme_commands test_readme.sh)
fsdp_script_test(docs_reference test_reference.sh)
fsdp_script_test(tools_help test_tools_help.sh)
