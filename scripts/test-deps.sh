#!/usr/bin/env bash
# test-deps.sh: makes sure the tools the test suite needs are on this
# machine, installing them with apt-get where it can (Debian, as root or
# with password-less sudo), and fails naming what is still missing.
#
#   redis-server  redisstore's tests start their own servers (and a Cluster)
#   chromium      stormsim's HTML report is checked in a headless browser
#   promtool      the alert rules in ops/ are checked and unit-tested
#
# `make test` runs it first; `make test-nodeps` skips it (the tests that need
# a missing tool then skip, or fail when CI=true).
set -euo pipefail

declare -A package=([redis-server]=redis-server [redis-cli]=redis-tools [chromium]=chromium [promtool]=prometheus)
tools=(redis-server redis-cli chromium promtool)

missing() {
  local out=()
  for t in "${tools[@]}"; do command -v "$t" >/dev/null 2>&1 || out+=("$t"); done
  echo "${out[@]:-}"
}

need=$(missing)
[ -z "$need" ] && exit 0

pkgs=()
for t in $need; do pkgs+=("${package[$t]}"); done
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; fi
fi
if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
  echo "test-deps: installing ${pkgs[*]} (for ${need})"
  $sudo apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${pkgs[@]}" >/dev/null || true
fi

need=$(missing)
if [ -n "$need" ]; then
  echo "test-deps: missing tools: ${need}" >&2
  for t in $need; do echo "  $t: install the Debian package ${package[$t]} (apt-get install ${package[$t]})" >&2; done
  echo "test-deps: or run 'make test-nodeps' to skip the tests that need them (outside CI)" >&2
  exit 1
fi
