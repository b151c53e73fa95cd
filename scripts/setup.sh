#!/usr/bin/env bash
# Install what building and testing jig needs and the machine lacks. Idempotent: a second run only checks.
#   - the wasm32-wasip2 Rust target (glue functions are built for it)
#   - Debian packages: cmake and libclang-dev (HiGHS, the planner's solver, builds from source with them)
set -euo pipefail

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    echo "setup: adding the wasm32-wasip2 Rust target"
    rustup target add wasm32-wasip2
fi

missing=()
for pkg in cmake libclang-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
