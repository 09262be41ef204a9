#!/usr/bin/env bash
# Enforces the import rules of DESIGN.md §2: libs never import services; no
# service imports another (only the waggle composition root wires them);
# only libs/embednats imports nats-server; only sessionstore and approval
# import pgx (and libs/pgtest, libs/pgmigrate and libs/pgerr, their shared helpers); only gateway
# imports chi.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=github.com/waggle-os/core
fail=0
list=$(mktemp)
trap 'rm -f "$list"' EXIT
# Every module of go.work, listed explicitly: ./services/... alone matches
# no module in a workspace.
pkgs=$(sed -n 's#^\t\./\(.*\)$#./\1/...#p' go.work)
if ! go list -test -f '{{.ImportPath}} {{join .Imports " "}}' $pkgs > "$list"; then
  echo "import rules: go list failed" >&2
  exit 1
fi
if [ ! -s "$list" ]; then
  echo "import rules: no packages listed" >&2
  exit 1
fi
sed -i 's/ \[.*\]//' "$list"
while read -r pkg imports; do
  [ -z "$pkg" ] && continue
  case "$pkg" in *.test) continue ;; esac   # generated test mains
  pkg=${pkg%_test}                         # external test packages obey their package's rules
  case "$pkg" in
    $mod/libs/*) own=libs ;;
    $mod/services/*) own=$(echo "${pkg#$mod/services/}" | cut -d/ -f1) ;;
    *) continue ;;
  esac
  for imp in $imports; do
    bad=""
    case "$imp" in
      $mod/services/*)
        target=$(echo "${imp#$mod/services/}" | cut -d/ -f1)
        if [ "$own" = libs ]; then bad="libs must not import services"
        elif [ "$own" != waggle ] && [ "$target" != "$own" ]; then bad="services talk over NATS, not imports"; fi ;;
      github.com/nats-io/nats-server/*)
        case "$pkg" in $mod/libs/embednats) ;; *) bad="only libs/embednats imports nats-server" ;; esac ;;
      github.com/jackc/pgx/*)
        case "$pkg" in $mod/libs/pgtest|$mod/libs/pgmigrate|$mod/libs/pgerr) ;; *)
          case "$own" in sessionstore|approval) ;; *) bad="only sessionstore and approval import pgx" ;; esac ;;
        esac ;;
      github.com/go-chi/chi/*)
        case "$own" in gateway) ;; *) bad="only gateway imports chi" ;; esac ;;
    esac
    if [ -n "$bad" ]; then echo "import rule: $pkg imports $imp: $bad"; fail=1; fi
  done
done < "$list"
if [ "$fail" = 0 ]; then echo "import rules: ok ($(wc -l < "$list") packages checked)"; fi
exit $fail
