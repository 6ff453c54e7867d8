# shellcheck shell=bash
# tools/lib.sh: what the scripts in tools/ and tests/ share.  Source it; it
# defines variables and functions and changes no shell option.

FSDP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# fsdp_list FILE: the words of a list file (tools/packages.txt,
# tools/mpirun-flags.txt), one a line; # starts a comment.
fsdp_list() { awk '{ sub(/#.*/, ""); for (i = 1; i <= NF; i++) print $i }' "$1"; }

# fsdp_installed PACKAGE: whether dpkg lists it as installed.
fsdp_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# fsdp_missing_packages: those of tools/packages.txt (tools/setup's) not installed.
fsdp_missing_packages() {
  local p
  while read -r p; do fsdp_installed "$p" || echo "$p"; done < <(fsdp_list "$FSDP_ROOT/tools/packages.txt")
}

# mpirun as every multi-rank run here starts it: as root, more ranks than
# cores, the flags of tools/mpirun-flags.txt.  FSDP_MPIEXEC (set by CTest)
# names the mpirun CMake found.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mapfile -t FSDP_MPIRUN_FLAGS < <(fsdp_list "$FSDP_ROOT/tools/mpirun-flags.txt")
# shellcheck disable=SC2034 # used by the scripts that source this
MPIRUN=("${FSDP_MPIEXEC:-mpirun}" "${FSDP_MPIRUN_FLAGS[@]}")

# step_times LOG: the per-step seconds Darknet printed in LOG, one a line,
# the first step (warm-up) left out.
step_times() {
  awk -F', ' '/ avg, .* rate, .* seconds, / { for (i = 1; i <= NF; ++i) if ($i ~ / seconds$/) { split($i, a, " "); print a[1] } }' "$1" |
    tail -n +2
}

# median_step LOG: their median; nan when there is none.
median_step() {
  step_times "$1" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else printf "%.4f\n", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# fsdp_help SCRIPT "$@": where the first argument is -h or --help, print
# SCRIPT's header comment (its usage) and exit 0.  Each tool calls it before
# anything else, so that asking for help installs, builds and runs nothing.
fsdp_help() {
  case ${2:-} in
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$1"; exit 0 ;;
  esac
}

# fsdp_refuse SCRIPT ARG: ARG is not one SCRIPT takes: say so, exit 2.
fsdp_refuse() {
  echo "$(basename "$1"): unknown argument $2 (usage: $(basename "$1") --help)" >&2
  exit 2
}
