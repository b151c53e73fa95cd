# Sourced by the scripts that need a gateway: `start_gateway JIG OUT [ARGS...]` runs `JIG up ARGS...` on a free
# loopback port with its state in OUT/state and its log in OUT/gateway.log, waits until it listens, exports
# JIG_GATEWAY, and stops it when the script exits (or at `stop_gateway`); `gateway_rss_mb` is its resident
# memory, `planned_capacity JIG APP` the capacity (req/s) of the app's plan.
start_gateway() {
    local jig=$1 out=$2 url=
    shift 2
    "$jig" up --listen 127.0.0.1:0 --state-dir "$out/state" "$@" >"$out/gateway.log" 2>&1 &
    gateway_pid=$!
    trap 'kill $gateway_pid 2>/dev/null || true' EXIT
    for _ in $(seq 100); do
        url=$(grep -o 'http://[0-9.:]*' "$out/gateway.log" | head -1 || true)
        [ -n "$url" ] && break
        kill -0 $gateway_pid 2>/dev/null || { cat "$out/gateway.log"; exit 1; }
        sleep 0.1
    done
    [ -n "$url" ] || { echo "the gateway did not start:"; cat "$out/gateway.log"; exit 1; }
    export JIG_GATEWAY=$url
}

stop_gateway() {
    kill "$gateway_pid" 2>/dev/null || true
    wait "$gateway_pid" 2>/dev/null || true
}

gateway_rss_mb() {
    awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$gateway_pid/status"
}

planned_capacity() {
    "$1" status "$2" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["deployment"]["capacity_rps"])'
}
