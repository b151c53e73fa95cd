#!/usr/bin/env bash
# Check the Kubernetes manifests in deploy/kubernetes offline (part of `make test`; no cluster needed):
#   - every object of every *.yaml against the Kubernetes JSON schemas that the PyPI package
#     kubernetes-validate bundles (K8S_VERSION, default 1.30), strict: an unknown field is an error, and so is
#     a kind the schemas do not know;
#   - kustomization.yaml lists files that exist, and every manifest except the *.example.yaml ones; where
#     kubectl is installed, `kubectl kustomize` renders it;
#   - each Deployment's, DaemonSet's and StatefulSet's selector matches its pod template, each Service's,
#     PodDisruptionBudget's and NetworkPolicy's (pod) selector the pods of one of them, and a named
#     targetPort or NetworkPolicy port is a port of their containers; a StatefulSet's serviceName names a
#     headless Service that selects its pods;
#   - a workload of more than one replica mounts only ReadWriteMany PersistentVolumeClaims, which exist;
#   - the ConfigMap jig-gateway's gateway.toml parses (tomllib) and uses only the keys the deployment sets;
#     its `nodes` and `etcd` entries that name NAME.NAMESPACE.svc.cluster.local name a Service here with that
#     port; a jig-gateway Deployment of more than one replica needs `etcd` (the replicas' shared state);
#   - the example nvidia-mig-parted config parses as YAML, `version: v1` with a `mig-configs` map.
# The validator goes into .jig/python-manifests once (from PyPI, pinned with its dependencies); later runs
# only check. MANIFESTS=DIR (absolute, or relative to the repository root) checks another directory. One line
# per file; exit 1 on any error.
set -euo pipefail
cd "$(dirname "$0")/.."

MANIFESTS=${MANIFESTS:-deploy/kubernetes}
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

if PYTHONPATH="$KV_DIR" python3 - "$MANIFESTS" "$K8S_VERSION" <<'PY'
import glob
import os
import sys
import tomllib

import yaml
from kubernetes_validate import utils as kv

directory, version = sys.argv[1], sys.argv[2]
# The gateway.toml keys this deployment may use (see deploy/README.md), and their types.
GATEWAY_KEYS = {"listen": str, "grpc_listen": str, "state_dir": str, "token": str, "nodes": list, "node_token_file": str, "etcd": list}
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet")
failed = False


def name_of(obj):
    return f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


def report(path, errors, summary):
    global failed
    if errors:
        failed = True
        for error in errors:
            print(f"FAIL {path}: {error}")
    else:
        print(f"ok   {path}: {summary}")


def gateway_toml_errors(text):
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return [f"gateway.toml is not TOML: {e}"]
    errors = [f"gateway.toml: unknown key `{k}` (allowed: {', '.join(GATEWAY_KEYS)})" for k in config if k not in GATEWAY_KEYS]
    for key, ty in GATEWAY_KEYS.items():
        if key in config and not isinstance(config[key], ty):
            errors.append(f"gateway.toml: `{key}` must be a {ty.__name__}")
    if isinstance(config.get("nodes"), list) and not all(isinstance(n, str) and ":" in n for n in config["nodes"]):
        errors.append("gateway.toml: `nodes` entries must be \"HOST:PORT\" strings")
    if isinstance(config.get("etcd"), list):
        if not config["etcd"]:
            errors.append("gateway.toml: `etcd` must list at least one endpoint (or be left out)")
        for endpoint in config["etcd"]:
            if not (isinstance(endpoint, str) and endpoint.startswith(("http://", "https://")) and host_port(endpoint)):
                errors.append(f"gateway.toml: `etcd` entries must be \"http://HOST:PORT\" strings, not {endpoint!r}")
    return errors


def host_port(address):
    """(host, port) of "HOST:PORT" or "http://HOST:PORT", or None."""
    address = address.split("://", 1)[-1].rstrip("/")
    host, _, port = address.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else None


def mig_parted_errors(text):
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as e:
        return [f"config.yaml is not YAML: {e}"]
    if not isinstance(config, dict) or config.get("version") != "v1":
        return ["config.yaml: `version: v1` is missing"]
    configs = config.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        return ["config.yaml: `mig-configs` must be a non-empty map of config name to device entries"]
    errors = []
    for name, entries in configs.items():
        if not isinstance(entries, list) or not all(isinstance(e, dict) and "devices" in e and "mig-enabled" in e for e in entries):
            errors.append(f"config.yaml: mig-configs `{name}` must be a list of entries with `devices` and `mig-enabled`")
    return errors


def workload_ports(objects):
    """(pod template labels, named container ports) of each Deployment, DaemonSet and StatefulSet."""
    for obj in objects:
        if obj.get("kind") in WORKLOADS:
            template = obj["spec"]["template"]
            labels = template["metadata"].get("labels", {})
            ports = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", []) if "name" in p}
            yield labels, ports


def selects_pods(selector, objects):
    """Whether matchLabels `selector` (not empty) selects the pods of one of `objects`' workloads."""
    return bool(selector) and any(selector.items() <= labels.items() for labels, _ in workload_ports(objects))


def namespace_of(obj):
    return (obj.get("metadata") or {}).get("namespace")


files = sorted(glob.glob(os.path.join(directory, "*.yaml")) + glob.glob(os.path.join(directory, "*.yml")))
kustomization = os.path.join(directory, "kustomization.yaml")
manifests = [f for f in files if f != kustomization]
if not manifests:
    print(f"FAIL {directory}: no manifests")
    sys.exit(1)

objects = {}  # path -> its objects
for path in manifests:
    errors = []
    try:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
    except yaml.YAMLError as e:
        report(path, [f"not YAML: {e}"], "")
        continue
    objects[path] = []
    for doc in docs:
        if not isinstance(doc, dict) or not all(k in doc for k in ("apiVersion", "kind", "metadata")):
            errors.append("a document without apiVersion, kind and metadata")
            continue
        objects[path].append(doc)
        try:
            kv.validate(doc, version, strict=True)
        except kv.ValidationError as e:
            field = ".".join(str(p) for p in e.path) or "(top level)"
            errors.append(f"{name_of(doc)}: {field}: {e.message}")
        except kv.SchemaNotFoundError as e:
            errors.append(f"{name_of(doc)}: {e.message}")
        except kv.VersionNotSupportedError:
            print(f"FAIL kubernetes-validate has no schemas for Kubernetes {version}")
            sys.exit(1)
        data = doc.get("data") or {}
        if doc["kind"] == "ConfigMap" and "gateway.toml" in data:
            errors += gateway_toml_errors(data["gateway.toml"])
        if doc["kind"] == "ConfigMap" and path.endswith(".example.yaml") and "config.yaml" in data:
            errors += mig_parted_errors(data["config.yaml"])
    report(path, errors, f"{len(objects[path])} objects valid against Kubernetes {version} ({', '.join(map(name_of, objects[path]))})")

everything = [o for objs in objects.values() for o in objs]
# Checks across files: the gateway's ConfigMap and the example MIG config exist; Services, PodDisruptionBudgets
# and NetworkPolicies select pods; StatefulSets have their headless Service; shared claims are ReadWriteMany;
# gateway.toml names Services that exist.
errors = []
services = {(namespace_of(o), o["metadata"]["name"]): o for o in everything if o["kind"] == "Service"}
claims = {(namespace_of(o), o["metadata"]["name"]): o for o in everything if o["kind"] == "PersistentVolumeClaim"}
configmaps = {o["metadata"]["name"]: o for o in everything if o["kind"] == "ConfigMap"}
if "gateway.toml" not in (configmaps.get("jig-gateway") or {}).get("data", {}):
    errors.append("no ConfigMap jig-gateway with a gateway.toml")
if "config.yaml" not in (configmaps.get("jig-mig-parted-config") or {}).get("data", {}):
    errors.append("no ConfigMap jig-mig-parted-config with a config.yaml (mig-config.example.yaml)")
for workload in (o for o in everything if o["kind"] in WORKLOADS):
    wanted = workload["spec"]["selector"].get("matchLabels", {})
    labels = workload["spec"]["template"]["metadata"].get("labels", {})
    if not wanted.items() <= labels.items():
        errors.append(f"{name_of(workload)}: spec.selector.matchLabels {wanted} are not all labels of its pod template")
    if workload["kind"] == "StatefulSet":
        service = services.get((namespace_of(workload), workload["spec"].get("serviceName")))
        if service is None:
            errors.append(f"{name_of(workload)}: spec.serviceName `{workload['spec'].get('serviceName')}` is no Service here")
        elif service["spec"].get("clusterIP") != "None":
            errors.append(f"{name_of(workload)}: its Service {service['metadata']['name']} is not headless (clusterIP: None)")
        elif not service["spec"].get("selector") or not service["spec"]["selector"].items() <= labels.items():
            errors.append(f"{name_of(workload)}: its Service {service['metadata']['name']} does not select its pods")
    # Pods that share a claim (a DaemonSet's run on every machine; a StatefulSet's volumeClaimTemplates are
    # per pod and not looked at here).
    pods = "its pods" if workload["kind"] == "DaemonSet" else f"{workload['spec'].get('replicas', 1)} replicas"
    if workload["kind"] != "DaemonSet" and workload["spec"].get("replicas", 1) <= 1:
        continue
    for volume in workload["spec"]["template"]["spec"].get("volumes", []):
        claim_name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim_name is None:
            continue
        claim = claims.get((namespace_of(workload), claim_name))
        if claim is None:
            errors.append(f"{name_of(workload)}: volume `{volume['name']}` claims {claim_name}, no PersistentVolumeClaim here")
        elif "ReadWriteMany" not in claim["spec"].get("accessModes", []):
            errors.append(f"{name_of(workload)}: {pods} share PersistentVolumeClaim "
                          f"{claim_name}, which is not ReadWriteMany")
for budget in (o for o in everything if o["kind"] == "PodDisruptionBudget"):
    selector = (budget["spec"].get("selector") or {}).get("matchLabels", {})
    if not selects_pods(selector, everything):
        errors.append(f"{name_of(budget)}: its selector {selector} matches no Deployment's, DaemonSet's or StatefulSet's pods")
for policy in (o for o in everything if o["kind"] == "NetworkPolicy"):
    # The pods it applies to, and those its ingress rules admit from this namespace.
    own = (policy["spec"].get("podSelector") or {}).get("matchLabels", {})
    peers = [peer["podSelector"].get("matchLabels", {}) for rule in policy["spec"].get("ingress", [])
             for peer in rule.get("from", []) if "podSelector" in peer and "namespaceSelector" not in peer]
    for selector in [own] + peers:
        if not selects_pods(selector, everything):
            errors.append(f"{name_of(policy)}: its pod selector {selector} matches no Deployment's, DaemonSet's or StatefulSet's pods")
    targets = [ports for labels, ports in workload_ports(everything) if own and own.items() <= labels.items()]
    for rule in policy["spec"].get("ingress", []):
        for port in (p.get("port") for p in rule.get("ports", [])):
            if isinstance(port, str) and targets and not any(port in ports for ports in targets):
                errors.append(f"{name_of(policy)}: port `{port}` is no named port of the pods it selects")
# gateway.toml: in-cluster names of `nodes` and `etcd` are Services here, with that port; replicas need etcd.
try:
    gateway_config = tomllib.loads((configmaps.get("jig-gateway") or {}).get("data", {}).get("gateway.toml", ""))
except tomllib.TOMLDecodeError:
    gateway_config = {}  # reported with its file above
for key in ("nodes", "etcd"):
    entries = gateway_config.get(key)
    for entry in entries if isinstance(entries, list) else []:
        address = host_port(entry) if isinstance(entry, str) else None
        if address is None or not address[0].endswith(".svc.cluster.local"):
            continue
        parts = address[0].split(".")  # [POD.]SERVICE.NAMESPACE.svc.cluster.local
        service = services.get((parts[-4], parts[-5])) if len(parts) >= 5 else None
        if service is None:
            errors.append(f"gateway.toml: `{key}` entry {entry} names no Service here")
        elif not any(p.get("port") == address[1] for p in service["spec"].get("ports", [])):
            errors.append(f"gateway.toml: `{key}` entry {entry}: Service {parts[-5]} has no port {address[1]}")
for gateway in (o for o in everything if o["kind"] == "Deployment" and o["metadata"]["name"] == "jig-gateway"):
    if gateway["spec"].get("replicas", 1) > 1 and not gateway_config.get("etcd"):
        errors.append(f"{name_of(gateway)}: {gateway['spec']['replicas']} replicas need `etcd` in gateway.toml (shared state)")
for service in (o for o in everything if o["kind"] == "Service"):
    selector = service["spec"].get("selector", {})
    matches = [ports for labels, ports in workload_ports(everything) if selector.items() <= labels.items()]
    if not matches:
        errors.append(f"{name_of(service)}: its selector {selector} matches no Deployment's, DaemonSet's or StatefulSet's pods")
    for port in service["spec"].get("ports", []):
        target = port.get("targetPort")
        if matches and isinstance(target, str) and not any(target in ports for ports in matches):
            errors.append(f"{name_of(service)}: targetPort `{target}` is no named port of the pods it selects")
report(f"{directory} (across files)", errors, "ConfigMaps present; workloads select their pods; every Service, "
       "PodDisruptionBudget and NetworkPolicy selects pods (and named ports); StatefulSets have headless Services; "
       "shared claims ReadWriteMany; gateway.toml's in-cluster names are Services")

# kustomization.yaml: not a Kubernetes object; its resources exist, and list every manifest but the examples.
errors = []
try:
    with open(kustomization) as f:
        resources = (yaml.safe_load(f) or {}).get("resources") or []
except FileNotFoundError:
    resources = None
    errors.append("missing")
if resources is not None:
    listed = {os.path.normpath(os.path.join(directory, r)) for r in resources}
    errors += [f"lists `{r}`, which does not exist" for r in resources if not os.path.exists(os.path.join(directory, r))]
    for path in manifests:
        example = path.endswith(".example.yaml")
        if not example and os.path.normpath(path) not in listed:
            errors.append(f"does not list {os.path.basename(path)}")
        if example and os.path.normpath(path) in listed:
            errors.append(f"lists the example {os.path.basename(path)}")
report(kustomization, errors, f"{len(resources or [])} resources, all present; every manifest but the examples listed")
sys.exit(1 if failed else 0)
PY
then status=0; else status=$?; fi

# Where kubectl is installed, its built-in kustomize must render the directory (offline).
if ! command -v kubectl >/dev/null; then
    echo "skip $MANIFESTS/kustomization.yaml: no kubectl here to render it with kustomize"
elif rendered=$(kubectl kustomize "$MANIFESTS" 2>&1); then
    echo "ok   $MANIFESTS/kustomization.yaml: kubectl kustomize renders $(grep -c '^kind:' <<< "$rendered") objects"
else
    echo "FAIL $MANIFESTS/kustomization.yaml: kubectl kustomize: $rendered"
    status=1
fi
exit "$status"
