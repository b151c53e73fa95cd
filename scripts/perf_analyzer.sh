#!/usr/bin/env bash
# Triton's perf_analyzer driving a model slot of a running gateway, over HTTP (and, with PROTOCOL=grpc, over
# gRPC): the rows per second and latency percentiles perf_analyzer reports at each concurrency.
#
#   scripts/perf_analyzer.sh HOST:PORT MODEL [perf_analyzer flags…]
#   scripts/perf_analyzer.sh 127.0.0.1:8080 shop.m --concurrency-range 1:4
#   PROTOCOL=grpc scripts/perf_analyzer.sh 127.0.0.1:8081 shop.m
#
# perf_analyzer reads the model's metadata and configuration (GET /v2/models/MODEL and …/config, or the
# ModelMetadata and ModelConfig RPCs: the plan's largest batch as max_batch_size, the inputs' dims) to make its
# inputs, and its statistics for the server-side split. It comes with Triton's client SDK (the
# tritonserver:*-py3-sdk image, or `pip install perf-analyzer` where PyPI has a build for the machine; this
# repository's machines have none, so it was not run here). A gateway with an `invoke_token` takes it as
# JIG_TOKEN.
set -euo pipefail

if [ $# -lt 2 ]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
url=$1 model=$2
shift 2
if ! command -v perf_analyzer >/dev/null; then
    echo "perf_analyzer: not installed; see the top of $0 for where it comes from" >&2
    exit 2
fi
auth=()
if [ -n "${JIG_TOKEN:-}" ]; then
    auth=(-H "Authorization: Bearer $JIG_TOKEN")
fi
exec perf_analyzer -m "$model" -u "$url" -i "${PROTOCOL:-http}" "${auth[@]}" --measurement-interval 5000 "$@"
