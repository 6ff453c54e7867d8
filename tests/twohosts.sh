# shellcheck shell=bash
# tests/twohosts.sh: two simulated machines for a test.  Source it after
# tests/lib.sh, then call twohosts_up TAG.
#
# Each machine is a network namespace whose processes run under their own
# hostname (unshare --uts); one veth link joins them, addressed from
# 10.231.0.0/30, which exists only inside the two namespaces (nothing is
# routed to or from any other network).  mpirun runs in machine a; Open MPI
# reaches machine b through a plm_rsh_agent script in place of ssh, and
# speaks TCP only, over the link.  Everything is removed when the test ends,
# passes, fails or is killed.  Where namespaces cannot be made the test
# prints why and exits 77 (CTest: skipped).
#
# After twohosts_up: TH_A, TH_B (the namespaces), TH_DEV (the link's name in
# both), TH_ADDR_A, TH_ADDR_B, and TH_MPIRUN: mpirun with the shared flags
# and those of the two machines (add -np N [--map-by node] ...), run through
# on_a.
TH_DEV=fsdp0
TH_ADDR_A=10.231.0.1
TH_ADDR_B=10.231.0.2
TH_PREFIX=fsdpm-

twohosts_skip() { echo "skipped: $*"; exit 77; }

# th_remove NS: ends every process still in namespace NS (ours: started by
# this test), then removes it, which removes its end of the link and its qdisc.
th_remove() {
  local p
  for p in $(ip netns pids "$1" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  ip netns del "$1" 2>/dev/null || true
}

# th_clear_stale TAG: namespaces of this test's name left by a run that
# could not clean up (its pid, in the name, no longer alive).
th_clear_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep "^$TH_PREFIX$1-[0-9]*-[ab]\$"); do
    pid=${ns#"$TH_PREFIX$1-"}; pid=${pid%-?}
    kill -0 "$pid" 2>/dev/null || th_remove "$ns"
  done
}

twohosts_down() {
  [ -n "${TH_A:-}" ] && th_remove "$TH_A"
  [ -n "${TH_B:-}" ] && th_remove "$TH_B"
  return 0
}

# on_a CMD... / on_b CMD...: CMD inside machine a (hostname fsdp-host-a) or b.
# shellcheck disable=SC2016 # "$0" and "$@" are the inner shell's
on_a() { ip netns exec "$TH_A" unshare --uts sh -c 'hostname "$0" && exec "$@"' fsdp-host-a "$@"; }
# shellcheck disable=SC2016
on_b() { ip netns exec "$TH_B" unshare --uts sh -c 'hostname "$0" && exec "$@"' fsdp-host-b "$@"; }

# th_agent: Open MPI's stand-in for ssh.  mpirun calls it as it would call
# ssh (HOST COMMAND...); it enters that host's namespace and runs the
# command through a shell, as sshd would.
th_agent() {
  cat > "$WORK/th-agent" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
case \$1 in
  $TH_ADDR_A) ns=$TH_A name=fsdp-host-a ;;
  $TH_ADDR_B) ns=$TH_B name=fsdp-host-b ;;
  *) echo "th-agent: unknown host \$1" >&2; exit 255 ;;
esac
shift
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$1"' "\$name" "\$*"
EOF
  chmod +x "$WORK/th-agent"
}

# th_reaper: removes the two namespaces once this shell is gone, however it
# ends (a SIGKILL runs no trap: CTest's timeout); in its own session, so
# that a kill of the test's process group does not reach it.
th_reaper() {
  # shellcheck disable=SC2016 # the watcher's own arguments
  setsid sh -c 'while kill -0 "$0" 2> /dev/null; do sleep 1; done
    for ns in "$1" "$2"; do
      for p in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$p" 2> /dev/null; done
      ip netns del "$ns" 2> /dev/null
    done; exit 0' "$$" "$TH_A" "$TH_B" < /dev/null > /dev/null 2>&1 &
}

# twohosts_up TAG: the two machines, named after TAG (one per test, so that
# CTest may run tests side by side) and this shell's pid.
twohosts_up() {
  local tag=$1
  [ "$(id -u)" = 0 ] || twohosts_skip "two simulated machines need root (network namespaces)"
  command -v ip > /dev/null || twohosts_skip "no ip command (iproute2) to make network namespaces"
  command -v unshare > /dev/null || twohosts_skip "no unshare command (util-linux) for a hostname per machine"
  th_clear_stale "$tag"
  TH_A=$TH_PREFIX$tag-$$-a TH_B=$TH_PREFIX$tag-$$-b
  trap 'twohosts_down; rm -rf "$WORK"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  local why
  why=$(ip netns add "$TH_A" 2>&1) || { TH_A=; twohosts_skip "cannot make a network namespace: $why"; }
  ip netns add "$TH_B"
  th_reaper
  ip netns exec "$TH_A" unshare --uts true 2> /dev/null || twohosts_skip "unshare --uts refused inside a namespace"
  ip link add "$TH_DEV" netns "$TH_A" type veth peer name "$TH_DEV" netns "$TH_B"
  ip -n "$TH_A" addr add "$TH_ADDR_A/30" dev "$TH_DEV"
  ip -n "$TH_B" addr add "$TH_ADDR_B/30" dev "$TH_DEV"
  local ns
  for ns in "$TH_A" "$TH_B"; do
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$TH_DEV" up
  done
  th_agent
  # The environment reaches machine b's daemon through the agent (it is
  # mpirun's child); the flags keep Open MPI to the link and to TCP.
  # shellcheck disable=SC2034,SC2054 # used by the scripts that source this; --host takes a comma list
  TH_MPIRUN=("${MPIRUN[@]}" --host "$TH_ADDR_A:4,$TH_ADDR_B:4" --mca plm_rsh_agent "$WORK/th-agent"
             --mca btl tcp,self --mca btl_tcp_if_include "$TH_DEV" --mca oob_tcp_if_include "$TH_DEV")
}

# th_bytes NS: bytes sent on NS's end of the link so far (for measuring by hand).
th_bytes() { ip netns exec "$1" cat "/sys/class/net/$TH_DEV/statistics/tx_bytes"; }
