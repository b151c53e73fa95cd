#!/usr/bin/env bash
# Check the Kubernetes manifests in deploy/kubernetes offline (part of `make test`; no cluster needed):
#   - every object of every *.yaml against the Kubernetes JSON schemas that the PyPI package
#     kubernetes-validate bundles (K8S_VERSION, default 1.30), strict: an unknown field is an error, and so is
#     a kind the schemas do not know;
#   - kustomization.yaml lists files that exist, and every manifest except the *.example.yaml ones; where
#     kubectl is installed, `kubectl kustomize` renders it;
#   - each Deployment's and DaemonSet's selector matches its pod template, each Service's selector the pods of
#     one of them, and a named targetPort is a port of their containers;
#   - the ConfigMap jig-gateway's gateway.toml parses (tomllib) and uses only the keys the deployment sets;
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
GATEWAY_KEYS = {"listen": str, "state_dir": str, "token": str, "nodes": list, "node_token_file": str}
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
    return errors


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
    """(pod template labels, named container ports) of each Deployment and DaemonSet."""
    for obj in objects:
        if obj.get("kind") in ("Deployment", "DaemonSet"):
            template = obj["spec"]["template"]
            labels = template["metadata"].get("labels", {})
            ports = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", []) if "name" in p}
            yield labels, ports


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
# Checks across files: the gateway's ConfigMap and the example MIG config exist; Services select pods.
errors = []
configmaps = {o["metadata"]["name"]: o for o in everything if o["kind"] == "ConfigMap"}
if "gateway.toml" not in (configmaps.get("jig-gateway") or {}).get("data", {}):
    errors.append("no ConfigMap jig-gateway with a gateway.toml")
if "config.yaml" not in (configmaps.get("jig-mig-parted-config") or {}).get("data", {}):
    errors.append("no ConfigMap jig-mig-parted-config with a config.yaml (mig-config.example.yaml)")
for workload in (o for o in everything if o["kind"] in ("Deployment", "DaemonSet")):
    wanted = workload["spec"]["selector"].get("matchLabels", {})
    if not wanted.items() <= workload["spec"]["template"]["metadata"].get("labels", {}).items():
        errors.append(f"{name_of(workload)}: spec.selector.matchLabels {wanted} are not all labels of its pod template")
for service in (o for o in everything if o["kind"] == "Service"):
    selector = service["spec"].get("selector", {})
    matches = [ports for labels, ports in workload_ports(everything) if selector.items() <= labels.items()]
    if not matches:
        errors.append(f"{name_of(service)}: its selector {selector} matches no Deployment's or DaemonSet's pods")
    for port in service["spec"].get("ports", []):
        target = port.get("targetPort")
        if matches and isinstance(target, str) and not any(target in ports for ports in matches):
            errors.append(f"{name_of(service)}: targetPort `{target}` is no named port of the pods it selects")
report(f"{directory} (across files)", errors, "ConfigMaps present; workloads select their pods; every Service selects pods and named ports")

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
