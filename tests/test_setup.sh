#!/usr/bin/env bash
# tools/setup refuses a failing patch, a patch missing from patches/, a file
# under darknet/ that would replace one of Darknet's and a wrong Darknet
# version with a message naming it; a change under darknet/ prepares the tree
# again; and a second run with nothing changed does no work (no
# re-extraction, nothing rebuilt).
. "$(dirname "$0")/lib.sh"
copy() { # a copy of the repository's sources with the fetched Debian package
  local d=$WORK/$1
  mkdir -p "$d/deps"
  (cd "$S" && tar cf - --exclude=./build --exclude=./build-* --exclude=./deps --exclude=./demo --exclude=./.git .) | tar xf - -C "$d"
  cp -r "$S/deps/cache" "$d/deps/"
  echo "$d"
}
run_setup() { (cd "$1" && FSDP_BUILD_DIR=$WORK/b-$(basename "$1") tools/setup 2>&1); }

d=$(copy broken)
sed -i 's/^ #include <math.h>$/ #include <mathematics.h>/' "$d/patches/0001-cblas-gemm.patch"
out=$(run_setup "$d") && rc=0 || rc=$?
check "a patch that does not apply stops setup, naming it (exit $rc)" \
  grep -q "patch 0001-cblas-gemm.patch does not apply to Darknet" <<< "$out"
check "and leaves no prepared tree behind" [ ! -d "$d/deps/darknet" ]

d=$(copy missing)
echo 0099-nothing.patch >> "$d/patches/series"
out=$(run_setup "$d") && rc=0 || rc=$?
check "a series entry with no file stops setup (exit $rc)" grep -q "patches/series names 0099-nothing.patch" <<< "$out"

d=$(copy clash)
echo '/* ours */' > "$d/darknet/src/network.c"
out=$(run_setup "$d") && rc=0 || rc=$?
check "a file under darknet/ that Darknet has too stops setup, naming it (exit $rc)" \
  grep -q "darknet/src/network.c is also in Darknet's source" <<< "$out"
check "and leaves no prepared tree behind" [ ! -d "$d/deps/darknet" ]

# The stamp covers darknet/: from a prepared tree, an edit there prepares it
# again.  A build folder that is a file stops setup at cmake, after that.
d=$(copy stamp)
cp -a "$S/deps/darknet" "$d/deps/"
echo '/* edited */' >> "$d/darknet/src/dn_rand.c"
touch "$WORK/not-a-folder"
out=$(cd "$d" && FSDP_BUILD_DIR=$WORK/not-a-folder tools/setup 2>&1) && rc=0 || rc=$?
check "an edit under darknet/ prepares deps/darknet again" grep -q "preparing deps/darknet" <<< "$out"
check "with the edited file" cmp -s "$d/darknet/src/dn_rand.c" "$d/deps/darknet/src/dn_rand.c"

d=$(copy version)
rm -rf "$d/deps/cache"
sed -i 's/^DARKNET_VERSION=.*/DARKNET_VERSION="0.0.0+git20990101.deadbeef-9"/' "$d/tools/setup"
out=$(run_setup "$d") && rc=0 || rc=$?
check "a Darknet version Debian does not have stops setup, saying which (exit $rc)" \
  grep -q "apt-get source darknet=0.0.0+git20990101.deadbeef-9 failed" <<< "$out"

# Idempotent: the real tree, a second run, prepares nothing and builds nothing.
out=$(cd "$S" && FSDP_BUILD_DIR=$B tools/setup 2>&1)
check "a second setup run only checks" [ "$(grep -c "preparing\|installing\|fetching" <<< "$out")" = 0 ]
check_not "and rebuilds nothing" grep -qE "Building|Linking" "$B/build.log"
finish
