#!/usr/bin/env bash
# release.sh: releases every module of versions.yaml at one version, in
# lockstep, as OpenTelemetry-Go's release tooling does.
#
#   scripts/release.sh [--dry-run] [--skip-tests] vX.Y.Z
#
# It
#   1. refuses a dirty work tree, a version that is not vMAJOR.MINOR.PATCH,
#      a version not greater than the last release (the greatest root tag
#      vX.Y.Z), and any tag it would create that exists already;
#   2. sets every sibling require (github.com/stormguard/stormguard/...) in
#      every go.mod of versions.yaml (released and excluded modules) to
#      vX.Y.Z, moves go.work's replace block to vX.Y.Z, and writes vX.Y.Z
#      into versions.yaml;
#   3. runs `make test` (the offline install test in it installs cmd/stormsim
#      at vX.Y.Z from a proxy built from the tree); --skip-tests leaves it
#      out. If the tests fail, the edits are undone and nothing is tagged;
#   4. commits the edits ("release vX.Y.Z") and creates an annotated tag for
#      each released module: vX.Y.Z for the root, <dir>/vX.Y.Z for the others.
#
# Nothing is pushed; the last line says how. --dry-run makes the checks of
# step 1, prints every require edit and every tag, and changes nothing.
set -euo pipefail

root_path=github.com/stormguard/stormguard

usage() {
  echo "usage: scripts/release.sh [--dry-run] [--skip-tests] vX.Y.Z" >&2
  exit 2
}
die() {
  echo "release: $*" >&2
  exit 1
}

dry=0
skip_tests=0
version=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --skip-tests) skip_tests=1 ;;
    -h | --help) usage ;;
    -*) echo "release: unknown flag $1" >&2; usage ;;
    *) [ -z "$version" ] || usage; version=$1 ;;
  esac
  shift
done
[ -n "$version" ] || usage
[[ "$version" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]] ||
  die "version $version is not of the form vMAJOR.MINOR.PATCH"

cd "$(git rev-parse --show-toplevel)"
[ -f versions.yaml ] || die "no versions.yaml at the repository root"

# versions.yaml: "version: vX.Y.Z", then "modules:" and "excluded:" lists of
# "  - dir" items (comments after #).
read_list() { # $1: list name
  sed -e 's/#.*//' -e 's/[[:space:]]*$//' versions.yaml | awk -v want="$1:" '
    /^[^[:space:]-]/ { in_list = ($0 == want); next }
    in_list && $1 == "-" { print $2 }'
}
current=$(sed -n -e 's/#.*//' -e 's/^version:[[:space:]]*\([^[:space:]]*\).*/\1/p' versions.yaml)
mapfile -t released < <(read_list modules)
mapfile -t excluded < <(read_list excluded)
[ ${#released[@]} -gt 0 ] || die "versions.yaml lists no modules"
all_dirs=("${released[@]}" "${excluded[@]}")

# go.work's use block must be exactly the modules of versions.yaml.
mapfile -t uses < <(awk '
  /^use[[:space:]]*\(/ { block = 1; next }
  block && /^\)/ { block = 0; next }
  block { print $1; next }
  /^use[[:space:]]/ { print $2 }' go.work | sed -e 's#^\./##' -e 's#/$##' -e 's#^$#.#' | sort)
listed=$(printf '%s\n' "${all_dirs[@]}" | sort)
[ "$(printf '%s\n' "${uses[@]}")" = "$listed" ] ||
  die "go.work's use block and versions.yaml's modules+excluded differ:
$(diff <(printf '%s\n' "${uses[@]}") <(echo "$listed") || true)"

module_path() { awk '$1 == "module" { print $2; exit }' "$1/go.mod"; }
declare -A path_of dir_of
for d in "${all_dirs[@]}"; do
  [ -f "$d/go.mod" ] || die "versions.yaml names $d, which has no go.mod"
  p=$(module_path "$d")
  path_of[$d]=$p
  dir_of[$p]=$d
done
tag_of() { if [ "$1" = . ]; then echo "$version"; else echo "$1/$version"; fi; }

# Step 1: refusals.
if [ -n "$(git status --porcelain)" ]; then
  die "the work tree is dirty; commit or stash first:
$(git status --short)"
fi
last=$(git tag -l 'v*' | grep -E '^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$' | sort -V | tail -n 1 || true)
if [ -n "$last" ]; then
  greatest=$(printf '%s\n%s\n' "$last" "$version" | sort -V | tail -n 1)
  if [ "$version" = "$last" ] || [ "$greatest" != "$version" ]; then
    die "version $version is not greater than the last release $last"
  fi
fi
for d in "${released[@]}"; do
  t=$(tag_of "$d")
  if git rev-parse -q --verify "refs/tags/$t" >/dev/null; then
    die "tag $t exists already"
  fi
done

# Step 2: the require edits, as "dir path old".
edits=()
for d in "${all_dirs[@]}"; do
  while read -r p v; do
    [ -n "${dir_of[$p]:-}" ] || die "$d/go.mod requires $p, which versions.yaml does not list"
    edits+=("$d $p $v")
  done < <(awk -v root="$root_path" '
    /^require[[:space:]]*\(/ { block = 1; next }
    block && /^\)/ { block = 0; next }
    { line = $0; sub(/\/\/.*/, "", line); n = split(line, f, /[[:space:]]+/) }
    block { i = (f[1] == "" ? 2 : 1) }
    !block && f[1] == "require" { i = 2 }
    (block || f[1] == "require") && (f[i] == root || index(f[i], root "/") == 1) { print f[i], f[i+1] }' "$d/go.mod")
done

prefix=""
[ $dry = 1 ] && prefix="would "
echo "release $version (versions.yaml: $current; last release: ${last:-none})"
for e in "${edits[@]}"; do
  read -r d p v <<<"$e"
  if [ "$v" = "$version" ]; then
    echo "${prefix}keep   $d/go.mod: require $p $version (already)"
  else
    echo "${prefix}set    $d/go.mod: require $p $v -> $version"
  fi
done
echo "${prefix}set    go.work: replace <module> $version => <dir>, for every module of go.work"
if [ "$current" = "$version" ]; then
  echo "${prefix}keep   versions.yaml: version $version (already)"
else
  echo "${prefix}set    versions.yaml: version $current -> $version"
fi
for d in "${released[@]}"; do
  echo "${prefix}tag    $(tag_of "$d")   (${path_of[$d]})"
done
for d in "${excluded[@]}"; do
  echo "${prefix}skip   $d   (excluded in versions.yaml: not tagged)"
done
if [ $dry = 1 ]; then
  echo "dry run: nothing changed"
  exit 0
fi

for e in "${edits[@]}"; do
  read -r d p v <<<"$e"
  [ "$v" = "$version" ] || (cd "$d" && go mod edit -require="$p@$version")
done
sed -E -i "s#^([[:space:]]*$root_path(/[^[:space:]]*)?)[[:space:]]+v[^[:space:]]+[[:space:]]+=>#\1 $version =>#" go.work
sed -E -i "s#^version:[[:space:]]*[^[:space:]]+#version: $version#" versions.yaml

undo() {
  echo "release: undoing the edits; nothing is committed or tagged" >&2
  git checkout -- .
}

# Step 3: the tests. An interrupt undoes the edits too.
trap 'undo; exit 130' INT TERM
if [ $skip_tests = 0 ]; then
  if ! make test; then
    undo
    die "make test failed at $version"
  fi
else
  echo "tests skipped (--skip-tests)"
fi

# Step 4: commit and tags.
if [ -n "$(git status --porcelain)" ]; then
  git commit -q -a -m "release $version" || { undo; die "git commit failed"; }
fi
trap - INT TERM
head=$(git rev-parse HEAD)
# All tags or none: a tag that cannot be made (signing, a race with another
# tagger) removes the ones made before it; the release commit stays.
tags=()
for d in "${released[@]}"; do
  t=$(tag_of "$d")
  if ! git tag -a -m "${path_of[$d]} $version" "$t" "$head"; then
    [ ${#tags[@]} -eq 0 ] || git tag -d "${tags[@]}" >/dev/null
    die "could not create tag $t; no tag of $version is left (the commit \"release $version\" is, at ${head:0:12})"
  fi
  tags+=("$t")
  echo "tagged $t at ${head:0:12}"
done
echo "push with: git push origin HEAD ${tags[*]}"
