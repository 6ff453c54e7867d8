#!/usr/bin/env bash
# docs_reference: the reference pages (docs/usage.md's flags, docs/cfg-keys.md's
# keys, docs/environment.md) are what the code's tables make, every
# environment variable the sources read is in the table, and every flag or
# variable a page names is in the reference (tools/reference says which).
# The fix is one command: tools/reference --write.
. "$(dirname "$0")/lib.sh"
out=$("$S/tools/reference" --build "$B" 2>&1) && rc=0 || rc=$?
echo "$out"
check "the pages, the help and the code's tables agree (else: tools/reference --write, and fix the table it names)" \
  [ "$rc" = 0 ]
help=$("$DN" -plugin "$PLUGIN" -fsdp-help)
# The plugin's own variables for users: the page's first table, less "tests only".
vars=$(awk '/^### /{n++} n==1 && /^\| `FSDP_/ && !/tests only/' "$S/docs/environment.md" | sed 's/^| `\([A-Z_]*\)=.*/\1/')
[ -n "$vars" ] || fail "docs/environment.md lists none of the plugin's variables"
for v in $vars; do
  check "-fsdp-help lists the plugin's variable $v with its default" grep -qE "^  $v=.*\(default: [^)]+\)$" <<< "$help"
done
finish
