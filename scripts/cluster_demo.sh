#!/usr/bin/env bash
# `make cluster-demo`: a jig cluster on this machine, every part a real process on loopback: etcd (the cluster
# state), three `jig node`s (one core each) and two gateways sharing a state directory for the bundles. It
# deploys the sign reader through one gateway, reads a sign through each, then kills (-9) the node that holds
# the detector and the leading gateway, and reads the sign again through the gateway that is left once it has
# taken the lead and re-planned. Everything is in out/cluster-demo; all of it is stopped when the script ends.
set -euo pipefail
cd "$(dirname "$0")/.."

jig=target/debug/jig
out=out/cluster-demo
rm -rf "$out" && mkdir -p "$out"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# The first address WHAT printed to LOG (`listening on ADDR` or `http://ADDR`), once it did.
address_in() {
    local log=$1 pid=$2 found=
    for _ in $(seq 200); do
        found=$(grep -oE '(listening on |http://)[0-9.]+:[0-9]+' "$log" | head -1 | sed -E 's/^(listening on |http:\/\/)//' || true)
        [ -n "$found" ] && { echo "$found"; return; }
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "did not start:" >&2
    cat "$log" >&2
    exit 1
}

echo "== etcd: the cluster state"
client=$(free_port) peer=$(free_port)
etcd --name demo --data-dir "$out/etcd" --listen-client-urls "http://127.0.0.1:$client" \
    --advertise-client-urls "http://127.0.0.1:$client" --listen-peer-urls "http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" --initial-cluster "demo=http://127.0.0.1:$peer" \
    >"$out/etcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$client") 2>/dev/null && break; sleep 0.1; done
echo "etcd on http://127.0.0.1:$client"

echo
echo "== three jig nodes"
head -c 32 /dev/urandom | base64 >"$out/token"
nodes=()
for n in 1 2 3; do
    "$jig" node --listen 127.0.0.1:0 --name "node$n" --cores 1 --token-file "$out/token" \
        --cache-dir "$out/node$n" >"$out/node$n.log" 2>&1 &
    pid=$!
    disown $pid # killed on purpose below: no job-control notice
    pids+=($pid)
    node_pid[$n]=$pid
    addr=$(address_in "$out/node$n.log" $pid)
    node_addr[$n]=$addr
    nodes+=("\"$addr\"")
    echo "node$n on $addr"
done

echo
echo "== two gateways (replicas), state in etcd, bundles in $out/state"
cat >"$out/gateway.toml" <<TOML
etcd = ["http://127.0.0.1:$client"]
nodes = [$(IFS=,; echo "${nodes[*]}")]
node_token_file = "$out/token"
demand_window_s = 5
TOML
for g in 1 2; do
    "$jig" up --listen 127.0.0.1:0 --state-dir "$out/state" --config "$out/gateway.toml" >"$out/gateway$g.log" 2>&1 &
    pid=$!
    disown $pid
    pids+=($pid)
    gateway_pid[$g]=$pid
    gateway[$g]="http://$(address_in "$out/gateway$g.log" $pid)"
    echo "gateway$g on ${gateway[$g]}"
done

leader() {
    for g in 1 2; do
        kill -0 "${gateway_pid[$g]}" 2>/dev/null || continue
        if "$jig" status --json --gateway "${gateway[$g]}" 2>/dev/null | grep -q '"leader": *true'; then echo $g; return; fi
    done
}
for _ in $(seq 100); do [ -n "$(leader)" ] && break; sleep 0.2; done

echo
echo "== jig deploy examples/sign-reader, through gateway1"
"$jig" deploy examples/sign-reader --gateway "${gateway[1]}"

sign=.jig/samples/stop.png
for g in 1 2; do
    echo
    echo "== jig invoke sign-reader $sign, through gateway$g"
    for _ in $(seq 100); do "$jig" status sign-reader --gateway "${gateway[$g]}" >/dev/null 2>&1 && break; sleep 0.2; done
    "$jig" invoke sign-reader "$sign" --output-dir "$out/read$g" --gateway "${gateway[$g]}"
done

# The node the detector's first instance runs on, and the leading gateway.
det_node=$("$jig" status sign-reader --json --gateway "${gateway[1]}" | python3 -c '
import json, sys
status = json.load(sys.stdin)
print(next(i["places"][0]["node"] for i in status["deployment"]["instances"] if i["slot"] == "det"))')
lead=$(leader)
survivor=$((3 - lead))
for n in 1 2 3; do [ "${node_addr[$n]}" = "$det_node" ] && victim=$n; done
echo
echo "== kill -9 node$victim ($det_node, the detector's) and gateway$lead (the leader)"
kill -9 "${node_pid[$victim]}" "${gateway_pid[$lead]}"
for _ in $(seq 150); do
    [ "$(leader)" = "$survivor" ] &&
        ! "$jig" status sign-reader --json --gateway "${gateway[$survivor]}" 2>/dev/null | grep -q "\"$det_node\"" && break
    sleep 0.2
done
echo "gateway$survivor leads and has re-planned:"
"$jig" status sign-reader --gateway "${gateway[$survivor]}" | grep -E "node|planned" || true

echo
echo "== jig invoke sign-reader $sign, through gateway$survivor"
"$jig" invoke sign-reader "$sign" --output-dir "$out/read-after" --gateway "${gateway[$survivor]}"

echo
echo "Logs, the etcd data and the shared bundles are in $out."
