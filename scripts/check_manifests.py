"""The checks of scripts/check_manifests.sh (which installs what this needs and runs it; see its header).

    check_manifests.py check DIR VERSION [--chart NAME]
        every *.yaml of DIR against Kubernetes VERSION's schemas, and across objects; --chart: DIR holds a
        rendered Helm chart (no kustomization.yaml, no example MIG config), reported as NAME
    check_manifests.py same KUSTOMIZED RENDERED NAME
        the objects of two rendered streams are the same, apart from what Helm adds (its labels, the config
        checksum, its test) and the Namespace
"""
import glob
import os
import sys
import tomllib

import yaml
from kubernetes_validate import utils as kv

# gateway.toml's keys (gateway/src/config.rs, the configuration reference) and their TOML types: the gateway
# refuses any other at start, so a misspelt key is an error here rather than a crash-looping pod.
NUMBER = (int, float)
GATEWAY_KEYS = {
    "listen": str, "grpc_listen": str, "state_dir": str, "token": str, "invoke_token": str,
    "max_request_mib": int, "max_bundle_mib": int, "cores": int, "gpus": list, "max_invocations": int,
    "max_instances": int, "demand_window_s": NUMBER, "replan_threshold": NUMBER, "header_timeout_s": NUMBER,
    "body_timeout_s": NUMBER, "max_connections": int, "max_connections_per_peer": int, "max_timeout_s": NUMBER,
    "ipa_predictor": str, "nodes": list, "node_token_file": str, "node_tls_ca": str, "node_tls_server_name": str,
    "etcd": list,
}
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
            errors.append(f"gateway.toml: `{key}` must be a {'number' if ty is NUMBER else ty.__name__}")
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


def component_of(obj):
    return ((obj.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/component")


def check(directory, version, chart=None):
    """chart: the name to report a rendered Helm chart's objects by (DIR holds them, without a kustomization.yaml
    or an example MIG config); None for kustomize manifests."""
    files = sorted(glob.glob(os.path.join(directory, "*.yaml")) + glob.glob(os.path.join(directory, "*.yml")))
    kustomization = os.path.join(directory, "kustomization.yaml")
    manifests = files if chart else [f for f in files if f != kustomization]
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
            report(chart or path, [f"not YAML: {e}"], "")
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
        report(chart or path, errors, f"{len(objects[path])} objects valid against Kubernetes {version} ({', '.join(map(name_of, objects[path]))})")

    everything = [o for objs in objects.values() for o in objs]
    # Names Kubernetes takes: a Service's is a DNS label; a StatefulSet's pods carry a controller-revision-hash
    # label of its name and 11 more characters.
    errors = [f"{name_of(o)}: its name is longer than {most}"
              for o in everything
              for most in [52 if o["kind"] == "StatefulSet" else 63]
              if len(o["metadata"]["name"]) > most]
    report(f"{chart or directory} (names)", errors, "every name within Kubernetes' lengths")
    # Checks across files: the gateway's ConfigMap and the example MIG config exist; Services, PodDisruptionBudgets
    # and NetworkPolicies select pods; StatefulSets have their headless Service; shared claims are ReadWriteMany;
    # gateway.toml names Services that exist.
    errors = []
    services = {(namespace_of(o), o["metadata"]["name"]): o for o in everything if o["kind"] == "Service"}
    claims = {(namespace_of(o), o["metadata"]["name"]): o for o in everything if o["kind"] == "PersistentVolumeClaim"}
    configmaps = {o["metadata"]["name"]: o for o in everything if o["kind"] == "ConfigMap"}
    gateway_tomls = [o["data"]["gateway.toml"] for o in configmaps.values() if "gateway.toml" in (o.get("data") or {})]
    if len(gateway_tomls) != 1:
        errors.append(f"{len(gateway_tomls)} ConfigMaps with a gateway.toml, not one")
    if not chart and "config.yaml" not in (configmaps.get("jig-mig-parted-config") or {}).get("data", {}):
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
    for ingress in (o for o in everything if o["kind"] == "Ingress"):
        for rule in ingress["spec"].get("rules", []):
            for path in (rule.get("http") or {}).get("paths", []):
                backend = path["backend"].get("service") or {}
                service = services.get((namespace_of(ingress), backend.get("name")))
                port = backend.get("port") or {}
                if service is None:
                    errors.append(f"{name_of(ingress)}: its backend {backend.get('name')} is no Service here")
                elif not any(p.get("name") == port.get("name") if "name" in port else p.get("port") == port.get("number")
                             for p in service["spec"].get("ports", [])):
                    errors.append(f"{name_of(ingress)}: Service {backend['name']} has no port {port}")
    # gateway.toml: in-cluster names of `nodes` and `etcd` are Services here, with that port; replicas need etcd.
    try:
        gateway_config = tomllib.loads(gateway_tomls[0] if gateway_tomls else "")
    except tomllib.TOMLDecodeError:
        gateway_config = {}  # reported with its file above
    # [POD.]SERVICE.NAMESPACE.svc.DOMAIN names a Service of these objects where NAMESPACE is one of theirs (an
    # etcd of one's own may live in another).
    namespaces = {namespace_of(o) for o in everything}
    for key in ("nodes", "etcd"):
        entries = gateway_config.get(key)
        for entry in entries if isinstance(entries, list) else []:
            address = host_port(entry) if isinstance(entry, str) else None
            parts = address[0].split(".") if address else []
            at = parts.index("svc") if "svc" in parts[2:] else None
            if at is None or parts[at - 1] not in namespaces:
                continue
            service = services.get((parts[at - 1], parts[at - 2]))
            if service is None:
                errors.append(f"gateway.toml: `{key}` entry {entry} names no Service here")
            elif not any(p.get("port") == address[1] for p in service["spec"].get("ports", [])):
                errors.append(f"gateway.toml: `{key}` entry {entry}: Service {parts[at - 2]} has no port {address[1]}")
    for gateway in (o for o in everything if o["kind"] == "Deployment" and component_of(o) == "gateway"):
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
    report(f"{chart or directory} (across {'objects' if chart else 'files'})", errors, "ConfigMaps present; workloads select their pods; every Service, "
           "PodDisruptionBudget and NetworkPolicy selects pods (and named ports); StatefulSets have headless Services; "
           "shared claims ReadWriteMany; gateway.toml's in-cluster names are Services")

    if chart:
        return
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


# What Helm adds to an object that plain manifests lack: its labels, the annotation that rolls the gateways when
# gateway.toml changes, and the one that keeps the bundles' claim through `helm uninstall`.
HELM_KEYS = {"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart", "checksum/config",
             "helm.sh/resource-policy"}


def without_helm(value):
    """`value` without HELM_KEYS in any mapping (and annotations left empty), and gateway.toml parsed (its
    comments and layout aside)."""
    if isinstance(value, dict):
        kept = {k: (tomllib.loads(v) if k == "gateway.toml" else without_helm(v))
                for k, v in value.items() if k not in HELM_KEYS}
        return {k: v for k, v in kept.items() if not (k == "annotations" and v == {})}
    if isinstance(value, list):
        return [without_helm(v) for v in value]
    return value


def differences(a, b, path=""):
    """Where `a` and `b` differ, as "path: a != b" lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in differences(a.get(k, "(absent)"), b.get(k, "(absent)"), f"{path}.{k}" if path else str(k))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def same(kustomized, rendered, name):
    """Report whether the objects of the two streams are the same (by kind and name) apart from HELM_KEYS;
    the kustomized stream's Namespace (Helm's --create-namespace makes it) and Helm's hooks (`helm test`) aside."""
    def objects(path):
        with open(path) as f:
            docs = [without_helm(d) for d in yaml.safe_load_all(f) if d]
        return {name_of(d): d for d in docs
                if d["kind"] != "Namespace" and "helm.sh/hook" not in d["metadata"].get("annotations", {})}
    a, b = objects(kustomized), objects(rendered)
    errors = [f"{name} only in {kustomized}" for name in sorted(set(a) - set(b))]
    errors += [f"{name} only in {rendered}" for name in sorted(set(b) - set(a))]
    errors += [f"{name}: {d}" for name in sorted(set(a) & set(b)) for d in differences(a[name], b[name])]
    report(name, errors, f"the same {len(b)} objects as kubectl kustomize renders, field for field, apart from Helm's "
           "labels and test, and the Namespace")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], chart=sys.argv[5] if sys.argv[4:5] == ["--chart"] and len(sys.argv) == 6 else None)
    elif len(sys.argv) == 5 and sys.argv[1] == "same":
        same(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
    sys.exit(1 if failed else 0)
