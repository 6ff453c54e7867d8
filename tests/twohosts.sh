# shellcheck shell=bash
# tests/twohosts.sh: two simulated machines (tests/hosts.sh) under the names
# the two-machine tests and tools/bench use.  Source it after tests/lib.sh,
# then call twohosts_up TAG.
#
# After twohosts_up: TH_A, TH_B (the machines' namespaces), TH_DEV (each
# one's link), TH_ADDR_A, TH_ADDR_B, and TH_MPIRUN: mpirun with the shared
# flags and those of the two machines (add -np N [--map-by node] ...), run
# through on_a.  Each machine's link leads to the switch; what a sends
# there goes to b.
. "$(dirname "${BASH_SOURCE[0]}")/hosts.sh"
TH_DEV=$HOSTS_DEV

twohosts_up() {
  hosts_up "$1" 2
  # shellcheck disable=SC2034 # used by the scripts that source this
  TH_A=${HOSTS_NS[0]} TH_B=${HOSTS_NS[1]} TH_ADDR_A=${HOSTS_ADDR[0]} TH_ADDR_B=${HOSTS_ADDR[1]}
  # shellcheck disable=SC2034
  TH_MPIRUN=("${HOSTS_MPIRUN[@]}")
}
twohosts_down() { hosts_down; }

# on_a CMD... / on_b CMD...: CMD inside machine a (hostname fsdp-host-0) or b.
on_a() { on_host 0 "$@"; }
on_b() { on_host 1 "$@"; }

# th_bytes NS: bytes sent on NS's link so far (for measuring by hand).
th_bytes() { ip netns exec "$1" cat "/sys/class/net/$TH_DEV/statistics/tx_bytes"; }
