#!/usr/bin/env bash
# apicheck.sh: compares the API of every released module (versions.yaml)
# in the work tree with the module's previous release tag, using
# golang.org/x/exp/cmd/apidiff, and prints the incompatible changes.
#
#   scripts/apicheck.sh [--strict] [BASE]
#
# BASE is a release version (vX.Y.Z) to compare with instead of each
# module's latest tag (root: vX.Y.Z; others: <dir>/vX.Y.Z). A module with no
# previous tag is reported as such and skipped. Commands (package main) and
# internal packages have no API and are skipped.
#
# Before 1.0 a minor release may break the API (CONTRIBUTING.md, "API
# compatibility before 1.0"), so the default is to print and exit 0;
# --strict exits 1 when any incompatible change is found (for a patch
# release, which must break nothing).
#
# APIDIFF names the apidiff binary (default: apidiff on PATH, else
# $(go env GOPATH)/bin/apidiff); `make apicheck` installs it.
set -euo pipefail

strict=0
base=""
while [ $# -gt 0 ]; do
  case "$1" in
    --strict) strict=1 ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "apicheck: unknown flag $1" >&2; exit 2 ;;
    *) base=$1 ;;
  esac
  shift
done

cd "$(git rev-parse --show-toplevel)"
apidiff=${APIDIFF:-$(command -v apidiff || echo "$(go env GOPATH)/bin/apidiff")}
[ -x "$apidiff" ] || { echo "apicheck: no apidiff at $apidiff (make apicheck installs it)" >&2; exit 2; }

mapfile -t released < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' versions.yaml | awk '
  /^[^[:space:]-]/ { in_list = ($0 == "modules:"); next }
  in_list && $1 == "-" { print $2 }')

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

semver='v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)'
broken=0
compared=0
for d in "${released[@]}"; do
  mod=$(awk '$1 == "module" { print $2; exit }' "$d/go.mod")
  if [ "$d" = . ]; then prefix=""; else prefix="$d/"; fi
  if [ -n "$base" ]; then
    tag=$prefix$base
    git rev-parse -q --verify "refs/tags/$tag" >/dev/null || tag=""
  else
    tag=$(git tag -l "${prefix}v*" | grep -E "^${prefix//./\\.}${semver}\$" | sort -V | tail -n 1 || true)
  fi
  if [ -z "$tag" ]; then
    echo "apicheck: $mod: no previous release tag (${prefix}${base:-vX.Y.Z}); nothing to compare"
    continue
  fi

  # The tagged tree, unpacked once per tag (lockstep tags share a commit).
  old=$tmp/tree-$(git rev-parse "$tag^{commit}")
  if [ ! -d "$old" ]; then
    mkdir -p "$old"
    git archive "$tag" | tar -x -C "$old"
  fi

  pkgs() { # $1: module dir; the module's importable packages (no main, no internal)
    (cd "$1" && go list -f '{{if ne .Name "main"}}{{.ImportPath}}{{end}}' ./... 2>/dev/null | grep -v -E '(^|/)internal(/|$)' || true)
  }
  mapfile -t old_pkgs < <(pkgs "$old/$d")
  mapfile -t new_pkgs < <(pkgs "$d")
  compared=$((compared + 1))
  echo "apicheck: $mod: work tree against $tag (${#old_pkgs[@]} packages then, ${#new_pkgs[@]} now)"
  for p in "${old_pkgs[@]}"; do
    [ -n "$p" ] || continue
    if ! printf '%s\n' "${new_pkgs[@]}" | grep -qxF "$p"; then
      echo "  $p: package removed"
      broken=1
      continue
    fi
    x=$tmp/$(echo "$p" | tr / _)
    (cd "$old/$d" && "$apidiff" -w "$x.old" "$p")
    (cd "$d" && "$apidiff" -w "$x.new" "$p")
    out=$("$apidiff" -incompatible "$x.old" "$x.new")
    if [ -n "$out" ]; then
      broken=1
      echo "  $p:"
      echo "$out" | sed 's/^/    /'
    fi
  done
  for p in "${new_pkgs[@]}"; do
    [ -n "$p" ] || continue
    printf '%s\n' "${old_pkgs[@]}" | grep -qxF "$p" || echo "  $p: package added"
  done
done

if [ $broken = 1 ]; then
  echo "apicheck: incompatible changes above; before 1.0 they are allowed in a minor release and must be listed in CHANGELOG.md"
  [ $strict = 0 ] || exit 1
elif [ $compared = 0 ]; then
  echo "apicheck: no module has a previous release tag; nothing to compare"
else
  echo "apicheck: no incompatible change"
fi
