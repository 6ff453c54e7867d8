#!/usr/bin/env bash
# tools_help: every program in tools/ answers -h and --help with its usage
# and exit 0, and refuses an unknown argument by name with a non-zero exit;
# neither installs, builds, runs or writes anything (the source tree and the
# folder it runs in are checked unchanged).
. "$(dirname "$0")/lib.sh"
here=$WORK/cwd
mkdir -p "$here"
# The source tree as it is, leaving out the build folders and .git.
tree() { (cd "$S" && find . \( -path ./.git -o -path './build*' -o -path ./demo \) -prune -o -type f -newer "$WORK/mark" -print); }
answered() { [ "$1" = 0 ] && grep -qi "usage" <<< "$2"; }
refused() { [ "$1" != 0 ] && [ "$1" != 124 ] && grep -qF -- "$3" <<< "$2"; }
programs=$(cd "$S/tools" && for f in *; do [ -f "$f" ] && [ -x "$f" ] && echo "$f"; done)
[ -n "$programs" ] || fail "no programs in tools/"
for t in $programs; do
  if [ "$t" = bench ] && [ ! -d "$S/tools/bench.d" ]; then
    # tools/bench answers --help once it is the dispatcher of tools/bench.d/.
    echo "skip - tools/bench --help: tools/bench.d/ does not exist yet"; continue
  fi
  touch "$WORK/mark"
  for h in -h --help; do
    out=$(cd "$here" && timeout 10 "$S/tools/$t" $h 2>&1) && rc=0 || rc=$?
    check "tools/$t $h: exit 0 with its usage (exit $rc)" answered "$rc" "$out"
  done
  out=$(cd "$here" && timeout 10 "$S/tools/$t" --no-such-argument 2>&1) && rc=0 || rc=$?
  check "tools/$t --no-such-argument: refused by name (exit $rc)" refused "$rc" "$out" --no-such-argument
  changed=$(tree; ls -A "$here")
  check "tools/$t: nothing written${changed:+: $changed}" [ -z "$changed" ]
done
finish
