#!/usr/bin/env bash
# The README's commands name only what exists: every -fsdp-* flag in them is
# one the plugin explains in -fsdp-help, and every file under cfg/, tools/,
# docs/ or deps/darknet/ (Darknet's tree, after tools/setup) that they or the
# README's links name is there (tools/ ones executable).  Running them needs
# tools/demo's data: done by hand from a fresh clone.
. "$(dirname "$0")/lib.sh"
R=$S/README.md
blocks=$(awk '/^```sh$/ { f = 1; next } /^```$/ { f = 0 } f' "$R")
[ -n "$blocks" ] || fail "no sh blocks in the README"
help=$("$DN" -plugin "$PLUGIN" -fsdp-help 2>&1)
for f in $(grep -oE -- '-fsdp-[a-z-]+' <<< "$blocks" | sort -u); do
  check "README command flag $f is one -fsdp-help explains" grep -qE -- "^  $f( |$)" <<< "$help"
done
for p in $( { grep -oE '(^|[ =])(cfg|tools|docs|deps/darknet)/[A-Za-z0-9_./-]+' <<< "$blocks" | sed 's/^[ =]//';
             grep -oE '\]\((docs|cfg|tools)/[^)]+\)' "$R" | sed 's/^](//; s/)$//'; } | sort -u); do
  case $p in tools/*.*) check "README names $p, which is in the tree" [ -e "$S/$p" ] ;;
             tools/*) check "README names $p, an executable in the tree" [ -x "$S/$p" ] ;;
             *) check "README names $p, which is in the tree" [ -e "$S/$p" ] ;; esac
done
finish
