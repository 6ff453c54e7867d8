# A user's first hour (docs/DESIGN.md, "Command line" and "cfg keys"): the
# plugin's keys and flags refused without it.
fsdp_script_test(no_plugin_refusals test_no_plugin.sh)
