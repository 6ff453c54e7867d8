# shellcheck shell=bash
# tests/hosts.sh: simulated machines for a test.  Source it after
# tests/lib.sh, then call hosts_up TAG N.
#
# Each machine is a network namespace whose processes run under their own
# hostname (unshare --uts); each has one link (a veth pair, HOSTS_DEV inside
# the machine) to a switch: a bridge in a namespace of its own.  The
# addresses, 10.231.0.K/24, exist only inside these namespaces (nothing is
# routed to or from any other network).  mpirun runs on the first machine;
# Open MPI reaches the others through a plm_rsh_agent script in place of
# ssh, and speaks TCP only, over the links.  Everything is removed when the
# test ends, passes, fails or is killed.  Where namespaces cannot be made
# the test prints why and exits 77 (CTest: skipped).
#
# After hosts_up: HOSTS_NS[K] (machine K's namespace), HOSTS_ADDR[K],
# HOSTS_DEV (the link's name in each machine), and HOSTS_MPIRUN: mpirun with
# the shared flags and those of the machines, 8 slots each (add -np N
# [--map-by node] ...), run through on_host 0.
HOSTS_DEV=fsdp0
HOSTS_PREFIX=fsdpm-
HOSTS_NS=()
HOSTS_ADDR=()
HOSTS_SWITCH=

hosts_skip() { echo "skipped: $*"; exit 77; }

# hosts_remove NS: ends every process still in namespace NS (ours: started
# by this test), then removes it, which removes its ends of the links and
# their qdiscs.
hosts_remove() {
  local p
  for p in $(ip netns pids "$1" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  ip netns del "$1" 2>/dev/null || true
}

# hosts_clear_stale TAG: namespaces of this test's name left by a run that
# could not clean up (its pid, in the name, no longer alive).
hosts_clear_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep "^$HOSTS_PREFIX$1-[0-9]*-[a-z0-9]*\$"); do
    pid=${ns#"$HOSTS_PREFIX$1-"}; pid=${pid%-*}
    kill -0 "$pid" 2>/dev/null || hosts_remove "$ns"
  done
}

hosts_down() {
  local ns
  for ns in "${HOSTS_NS[@]}" $HOSTS_SWITCH; do hosts_remove "$ns"; done
  HOSTS_NS=() HOSTS_ADDR=() HOSTS_SWITCH=
  return 0
}

# on_host K CMD...: CMD inside machine K (hostname fsdp-host-K).
# shellcheck disable=SC2016 # "$0" and "$@" are the inner shell's
on_host() { local k=$1; shift; ip netns exec "${HOSTS_NS[$k]}" unshare --uts sh -c 'hostname "$0" && exec "$@"' "fsdp-host-$k" "$@"; }

# hosts_agent: Open MPI's stand-in for ssh.  mpirun calls it as it would
# call ssh (HOST COMMAND...); it enters that host's namespace and runs the
# command through a shell, as sshd would.
hosts_agent() {
  local k cases=""
  for k in "${!HOSTS_NS[@]}"; do cases+="  ${HOSTS_ADDR[$k]}) ns=${HOSTS_NS[$k]} name=fsdp-host-$k ;;"$'\n'; done
  cat > "$WORK/hosts-agent" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
case \$1 in
$cases  *) echo "hosts-agent: unknown host \$1" >&2; exit 255 ;;
esac
shift
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$1"' "\$name" "\$*"
EOF
  chmod +x "$WORK/hosts-agent"
}

# hosts_reaper: removes the namespaces once this shell is gone, however it
# ends (a SIGKILL runs no trap: CTest's timeout); in its own session, so
# that a kill of the test's process group does not reach it.
hosts_reaper() {
  # shellcheck disable=SC2016 # the watcher's own arguments
  setsid sh -c 'pid=$0; while kill -0 "$pid" 2> /dev/null; do sleep 1; done
    for ns in "$@"; do
      for p in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$p" 2> /dev/null; done
      ip netns del "$ns" 2> /dev/null
    done; exit 0' "$$" "$@" < /dev/null > /dev/null 2>&1 &
}

# hosts_tcp NS: the machine's TCP picks its rate by loss, as Linux's
# default (cubic) does, where a namespace may choose it, else reno.  A
# host may default to BBR, which a namespace inherits: over a link limited
# by tbf and loaded both ways, each direction's acknowledgements wait
# behind the other's queue while BBR sizes its window by the link's bare
# round trip (microseconds here), and it carried plain TCP sockets, no MPI,
# at 0.87-0.94 of the rate where reno carried them at the full rate.
hosts_tcp() {
  local cc
  for cc in cubic reno; do
    ip netns exec "$1" sysctl -qw net.ipv4.tcp_congestion_control=$cc 2> /dev/null && return 0
  done
  return 0
}

# hosts_up TAG N: N machines and their switch, named after TAG (one per
# test, so that CTest may run tests side by side) and this shell's pid.
hosts_up() {
  local tag=$1 n=$2 k why
  [ "$(id -u)" = 0 ] || hosts_skip "simulated machines need root (network namespaces)"
  command -v ip > /dev/null || hosts_skip "no ip command (iproute2) to make network namespaces"
  command -v unshare > /dev/null || hosts_skip "no unshare command (util-linux) for a hostname per machine"
  hosts_clear_stale "$tag"
  HOSTS_SWITCH=$HOSTS_PREFIX$tag-$$-sw
  for ((k = 0; k < n; k++)); do HOSTS_NS[k]=$HOSTS_PREFIX$tag-$$-$k HOSTS_ADDR[k]=10.231.0.$((k + 1)); done
  trap 'hosts_down; rm -rf "$WORK"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  why=$(ip netns add "$HOSTS_SWITCH" 2>&1) || { HOSTS_SWITCH=; HOSTS_NS=(); hosts_skip "cannot make a network namespace: $why"; }
  for ((k = 0; k < n; k++)); do ip netns add "${HOSTS_NS[$k]}"; done
  hosts_reaper "$HOSTS_SWITCH" "${HOSTS_NS[@]}"
  ip netns exec "${HOSTS_NS[0]}" unshare --uts true 2> /dev/null || hosts_skip "unshare --uts refused inside a namespace"
  ip -n "$HOSTS_SWITCH" link add br0 type bridge
  ip -n "$HOSTS_SWITCH" link set br0 up
  ip -n "$HOSTS_SWITCH" link set lo up
  for ((k = 0; k < n; k++)); do
    ip link add "$HOSTS_DEV" netns "${HOSTS_NS[$k]}" type veth peer name "p$k" netns "$HOSTS_SWITCH"
    ip -n "$HOSTS_SWITCH" link set "p$k" master br0
    ip -n "$HOSTS_SWITCH" link set "p$k" up
    ip -n "${HOSTS_NS[$k]}" addr add "${HOSTS_ADDR[$k]}/24" dev "$HOSTS_DEV"
    ip -n "${HOSTS_NS[$k]}" link set lo up
    ip -n "${HOSTS_NS[$k]}" link set "$HOSTS_DEV" up
    hosts_tcp "${HOSTS_NS[$k]}"
  done
  hosts_agent
  local list=""
  for ((k = 0; k < n; k++)); do list+="${list:+,}${HOSTS_ADDR[$k]}:8"; done
  # The environment reaches the other machines' daemons through the agent
  # (mpirun's child); the flags keep Open MPI to the links and to TCP.
  # The machines share this one's cores, which their ranks together
  # outnumber, but each offers 8 slots, so Open MPI cannot see it: a rank
  # waiting for a message yields its core, as Open MPI makes it do on one
  # machine with more ranks than cores.  Polling ranks starved the kernel's
  # network work: `full` at 1000 Mbit/s took 0.14-0.18 s a step, 0.137-0.138
  # yielding.
  # shellcheck disable=SC2034,SC2054 # used by the scripts that source this; --host takes a comma list
  HOSTS_MPIRUN=("${MPIRUN[@]}" --host "$list" --mca plm_rsh_agent "$WORK/hosts-agent"
                --mca btl tcp,self --mca btl_tcp_if_include "$HOSTS_DEV" --mca oob_tcp_if_include "$HOSTS_DEV"
                --mca mpi_yield_when_idle 1)
}

# hosts_tx K: bytes machine K has sent on its link so far.
hosts_tx() { ip netns exec "${HOSTS_NS[$1]}" cat "/sys/class/net/$HOSTS_DEV/statistics/tx_bytes"; }

# hosts_limit K MBIT: machine K sends at most MBIT Mbit/s on its link
# (tc tbf, 400 ms of queue); hosts_limit K 0 lifts it.  The bucket holds a
# whole GSO packet (64 KB), or tbf segments every TCP burst in software,
# and 10 ms of the rate, or its timer limits high rates: with 32 KB, a
# 1000 Mbit/s link carried the training runs' bursts at about 600.
hosts_limit() {
  local ns=${HOSTS_NS[$1]} mbit=$2 burst
  ip netns exec "$ns" tc qdisc del dev "$HOSTS_DEV" root 2>/dev/null || true
  [ "$mbit" = 0 ] && return 0
  burst=$(( mbit * 1250 / 1000 )); [ "$burst" -lt 64 ] && burst=64
  ip netns exec "$ns" tc qdisc add dev "$HOSTS_DEV" root tbf rate "${mbit}mbit" burst "${burst}kb" latency 400ms
}
