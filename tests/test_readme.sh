#!/usr/bin/env bash
# The README's and every docs/*.md page's commands and paths name only what
# exists: every -fsdp-* flag in their sh blocks is one the plugin explains in
# -fsdp-help; every file under cfg/, tools/, docs/, tests/, plugin/,
# patches/, cmake/, .ci/ or deps/darknet/ (Darknet's tree, after tools/setup)
# that a code block, a code span or a link names is there (tools/ ones
# executable; a name with * must match something); every relative link leads
# to a file, and its #anchor to a heading there; the README's map names every
# page of docs/; and every docs/ page the plugin's messages or the tools name
# is there.  Running the commands needs tools/demo's data: done by hand from a
# fresh clone.
. "$(dirname "$0")/lib.sh"
help=$("$DN" -plugin "$PLUGIN" -fsdp-help 2>&1)
PATHS='(cfg|tools|docs|tests|plugin|patches|cmake|\.ci|deps/darknet)/[A-Za-z0-9_.*/-]+'

# fenced FILE [sh]: the lines of FILE's fenced blocks (only ```sh ones with sh).
fenced() {
  if [ "${2:-}" = sh ]; then awk '/^```sh$/ { f = 1; next } /^```/ { f = 0 } f' "$1"
  else awk '/^```/ { f = !f; next } f' "$1"; fi
}
# prose FILE: the lines outside fenced blocks.
prose() { awk '/^```/ { f = !f; next } !f' "$1"; }
# anchors FILE: the #anchor of each heading, as GitHub makes them.
anchors() {
  prose "$1" | awk '/^#+ / { s = tolower($0); sub(/^#+ /, "", s); gsub(/[^a-z0-9 _-]/, "", s);
                             gsub(/ /, "-", s); n = seen[s]++; print (n ? s "-" n : s) }'
}
# names_path WHAT P: P, a path from the tree's root, is there.
names_path() {
  local what=$1 p=${2%.} m
  case $p in
    *'*'*) m=$(cd "$S" && compgen -G "$p" | head -n 1 || true)
           check "$what names $p, which matches a file in the tree" [ -n "$m" ] ;;
    tools/*.*|tools/*/) check "$what names $p, which is in the tree" [ -e "$S/$p" ] ;;
    tools/*) check "$what names $p, an executable in the tree" [ -x "$S/$p" ] ;;
    *) check "$what names $p, which is in the tree" [ -e "$S/$p" ] ;;
  esac
}

pages=("$S/README.md" "$S"/docs/*.md)
[ -e "${pages[1]}" ] || fail "no pages in docs/"
for page in "${pages[@]}"; do
  rel=${page#"$S"/}
  dir=$(dirname "$page")
  [ "$rel" != README.md ] || [ -n "$(fenced "$page" sh)" ] || fail "no sh blocks in the README"
  for f in $(fenced "$page" sh | grep -oE -- '-fsdp-[a-z-]+' | sort -u); do
    check "$rel command flag $f is one -fsdp-help explains" grep -qE -- "^  $f( |$)" <<< "$help"
  done
  # Paths in code blocks and code spans, from the tree's root.
  while read -r p; do
    names_path "$rel" "$p"
  done < <( { fenced "$page" | grep -oE "(^|[ =(])$PATHS" | sed 's/^[ =(]//' || true;
              prose "$page" | grep -oE '`[^`]+`' | grep -oE "(^|[ =(\`])$PATHS" | sed 's/^[ =(`]//' || true; } | sort -u)
  # Relative links, from the page's folder; anchors against the target's headings.
  for l in $(prose "$page" | grep -oE '\]\([^) ]+\)' | sed 's/^](//; s/)$//' | sort -u); do
    case $l in http://*|https://*|mailto:*) continue ;; esac
    file=${l%%#*}; anchor=; [ "$file" = "$l" ] || anchor=${l#*#}
    target=$page; [ -z "$file" ] || target=$dir/$file
    check "$rel links to $l, whose file is in the tree" [ -e "$target" ]
    if [ -n "$anchor" ] && [ -f "$target" ]; then
      check "$rel links to $l, whose #$anchor is a heading there" grep -qxF -- "$anchor" <<< "$(anchors "$target")"
    fi
  done
done

# The README's map of docs/: one line per page.
for page in "$S"/docs/*.md; do
  name=docs/$(basename "$page")
  check "the README's map of docs/ names $name" grep -qF "]($name)" "$S/README.md"
done

# Pages the plugin's messages and the tools point users to.
for p in $(grep -ohE 'docs/[A-Za-z0-9_-]+\.md' "$S"/plugin/*.[ch] "$S"/plugin/*/*.[ch] "$S"/tools/* | sort -u); do
  names_path "the plugin or a tool" "$p"
done
check_not "no plugin message points to a README section" grep -qE 'README: ' "$S"/plugin/*.[ch] "$S"/plugin/*/*.[ch]
finish
