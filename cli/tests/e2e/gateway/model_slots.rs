//! Model slots served directly: metrics per slot, model control, and Triton's and KServe's clients over the Open
//! Inference Protocol.

use super::*;

#[test]
fn a_model_slot_is_served_and_reported_in_metrics() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    probe_bundle(dir.path(), "classify");
    let gateway = Gateway::start(state.path(), &[]);
    let deployed = deploy(&gateway, dir.path(), &["--json"]);
    assert_ok(&deployed);
    let status: serde_json::Value = serde_json::from_slice(&deployed.stdout).unwrap();
    assert_eq!(status["deployment"]["instances"][0]["variant"], "mlp");

    let payload =
        serde_json::json!({"op": "infer-f32", "slot": "classifier", "shape": [2, 64], "values": vec![0.25; 128]});
    let reply = gateway.http("POST", "/v1/apps/classify/invoke", &[], payload.to_string().as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    let result = &reply.json()["outputs"][0]["json"];
    assert_eq!(result[0]["shape"], serde_json::json!([2, 16]));
    let metrics = gateway.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains("jig_instance_rows_total{app=\"classify\",slot=\"classifier\""), "{metrics}");
    // Counters docs/src/reference/metrics.md lists show at 0 before anything is dropped or late.
    let restarts = "jig_instance_restarts_total{app=\"classify\",slot=\"classifier\",instance=\"classify/classifier/";
    assert!(metrics.lines().any(|l| l.starts_with(restarts) && l.ends_with(" 0")), "{restarts} in {metrics}");
    for zero in ["jig_early_drops_total{app=\"classify\"} 0", "jig_slo_violations_total{app=\"classify\"} 0"] {
        assert!(metrics.contains(zero), "{zero} in {metrics}");
    }

    // `jig bench` reports the run and what served it: the default deployment holds this machine's cores.
    let input = dir.path().join("payload.json");
    std::fs::write(&input, payload.to_string()).unwrap();
    let bench = gateway
        .jig("bench")
        .args(["classify", input.to_str().unwrap(), "--rate", "20", "--duration", "1", "--json"])
        .output()
        .unwrap();
    assert_ok(&bench);
    let report: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
    assert!(report["ok"].as_u64().unwrap() > 5, "{report}");
    let instance = &status["deployment"]["instances"][0];
    let cores = instance["segment"].as_str().unwrap().strip_prefix("cpu:").unwrap().parse::<u64>().unwrap();
    assert_eq!(report["cores_used"].as_u64(), Some(cores * instance["count"].as_u64().unwrap()), "{report}");
    assert!(report["accuracy_drop"].is_null(), "not planned, so no accuracy to report: {report}");

    // The instances' batch latencies are observed: at the batch size they ran most, beside no profile row
    // (the bundle has no profile table).
    let status = gateway.http("GET", "/v1/apps/classify", &[], b"").json();
    let observed = &status["observed_latencies"][0];
    assert_eq!(
        (observed["slot"].as_str(), observed["variant"].as_str()),
        (Some("classifier"), Some("mlp")),
        "{status}"
    );
    assert!(observed["batches"].as_u64().unwrap() >= 1 && observed["p95_ms"].as_f64().unwrap() > 0.0, "{status}");
    assert!(observed["profiled_ms"].is_null(), "{status}");
    let glue = &status["observed_glue"][0];
    assert_eq!(glue["task"].as_str(), Some("probe"), "{status}");
    assert!(glue["invocations"].as_u64().unwrap() >= 5 && glue["mean_ms"].as_f64().unwrap() > 0.0, "{status}");
    let text = gateway.jig("status").arg("classify").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("latency    classifier/mlp on cpu:") && text.contains("glue       probe: "), "{text}");
}

/// The echo glue with the `mixed` model (y = x * ids) in slot `m`: the v2 model `shop.m`.
fn mixed_slot_bundle(dir: &Path) {
    let manifest = "name = \"shop\"\n[[tasks]]\nname = \"score\"\nglue = \"glue/echo.wasm\"\nslot = \"m\"\n\
        [[variants]]\nslot = \"m\"\nname = \"mixed\"\nmodel = \"models/mixed.onnx\"\n";
    bundle(dir, manifest, &[("glue/echo.wasm", &component("echo")), ("models/mixed.onnx", &model("mixed"))]);
}

/// A gateway serving `shop` ([`mixed_slot_bundle`]) over HTTP and gRPC, with the invoke token `let-me-in`; the
/// directory holds its state.
fn shop_over_http_and_grpc() -> (tempfile::TempDir, Gateway) {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    mixed_slot_bundle(dir.path());
    let gateway = start_with_config(state.path(), "invoke_token = \"let-me-in\"\ngrpc_listen = \"127.0.0.1:0\"\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    (state, gateway)
}

/// Model control of one slot restarts the app without it, and the other slot keeps its running instance (its
/// counters go on): a new copy loads only what changed.
#[test]
fn unloading_a_slot_keeps_the_other_slots_instances_running() {
    let (scratch, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    mixed_slot_bundle(dir.path());
    let manifest = std::fs::read_to_string(dir.path().join("jig.toml")).unwrap();
    let extra = "[[variants]]\nslot = \"n\"\nname = \"small\"\nmodel = \"models/mlp.onnx\"\n";
    std::fs::write(dir.path().join("jig.toml"), format!("{manifest}{extra}")).unwrap();
    std::fs::copy(model("mlp"), dir.path().join("models/mlp.onnx")).unwrap();
    let gateway = start_with_config(scratch.path(), "cores = 2\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    let infer = br#"{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]},
        {"name":"ids","shape":[1,4],"datatype":"INT64","data":[1,1,1,1]}]}"#;
    for _ in 0..3 {
        let reply = gateway.http("POST", "/v2/models/shop.m/infer", &[], infer);
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    let served_by_m = |gateway: &Gateway| -> u64 {
        let metrics = gateway.http("GET", "/metrics", &[], b"").text();
        let line = metrics.lines().find(|l| l.starts_with("jig_instance_requests_total{app=\"shop\",slot=\"m\""));
        line.and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or_else(|| panic!("no counter of m: {metrics}"))
    };
    assert_eq!(served_by_m(&gateway), 3);

    let unloaded = gateway.http("POST", "/v2/repository/models/shop.n/unload", &[], b"{}");
    assert_eq!(unloaded.status, 200, "{}", unloaded.text());
    assert_eq!(gateway.http("GET", "/v2/models/shop.n/ready", &[], b"").status, 503);
    assert_eq!(gateway.http("GET", "/v2/models/shop.m/ready", &[], b"").status, 200);
    assert_eq!(gateway.http("GET", "/readyz", &[], b"").status, 200, "an unloaded slot keeps the gateway ready");
    assert_eq!(served_by_m(&gateway), 3, "slot m's instance was started anew, not kept");
    let status = gateway.http("GET", "/v1/apps/shop", &[], b"").json();
    let slots: Vec<&str> =
        status["deployment"]["instances"].as_array().unwrap().iter().map(|i| i["slot"].as_str().unwrap()).collect();
    assert_eq!(slots, ["m"], "{status}");

    let loaded = gateway.http("POST", "/v2/repository/models/shop.n/load", &[], b"{}");
    assert_eq!(loaded.status, 200, "{}", loaded.text());
    assert_eq!(gateway.http("GET", "/v2/models/shop.n/ready", &[], b"").status, 200);
    let whole = gateway.http("POST", "/v2/repository/models/shop/unload", &[], b"{}");
    assert_eq!(whole.status, 400, "an app is unloaded by deleting it: {}", whole.text());
}

#[test]
fn triton_and_kserve_clients_run_a_model_slot_over_the_open_inference_protocol() {
    let (_state, gateway) = shop_over_http_and_grpc();

    // Health is open; the models are behind the invoke token, as /v1 invocations are.
    assert_eq!(gateway.http("GET", "/v2/health/live", &[], b"").status, 200);
    assert_eq!(gateway.http("GET", "/v2/health/ready", &[], b"").status, 200);
    assert_eq!(gateway.http("GET", "/v2/models/shop.m", &[], b"").status, 401);
    let auth = [("authorization", "Bearer let-me-in")];
    let unknown = gateway.http("GET", "/v2/models/shop.nope", &auth, b"");
    assert_eq!(unknown.status, 404);
    assert!(unknown.json()["error"].as_str().unwrap().contains("`shop` has the slots: m"), "{}", unknown.text());
    // An app is a v2 model itself only when it declares `[tensors]` (cli/tests/e2e/partition.rs serves one).
    let app = gateway.http("GET", "/v2/models/shop", &auth, b"");
    assert_eq!(app.status, 404);
    assert!(app.text().contains("app `shop` declares no `[tensors]`"), "{}", app.text());

    // Binary tensors after the JSON, a binary output back.
    let head = br#"{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","parameters":{"binary_data_size":16}},
        {"name":"ids","shape":[1,4],"datatype":"INT64","data":[[1,2,3,-4]]}],
        "outputs":[{"name":"y","parameters":{"binary_data":true}}]}"#;
    let mut body = head.to_vec();
    body.extend([0.5f32, 1.0, 1.5, 2.0].iter().flat_map(|v| v.to_le_bytes()));
    let length = head.len().to_string();
    let headers = [auth[0], ("inference-header-content-length", length.as_str())];
    let reply = gateway.http("POST", "/v2/models/shop.m/infer", &headers, &body);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let json_length: usize = reply.header("inference-header-content-length").unwrap().parse().unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&reply.body[..json_length]).unwrap();
    assert_eq!(answer["outputs"][0]["parameters"]["binary_data_size"], 16, "{answer}");
    let y: Vec<f32> = reply.body[json_length..].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(y, [0.5, 2.0, 4.5, -8.0]);

    // A size that disagrees with the body gets the protocol's error JSON, and the next request is served.
    let short = gateway.http("POST", "/v2/models/shop.m/infer", &headers, &body[..body.len() - 4]);
    assert_eq!(short.status, 400);
    assert!(short.json()["error"].as_str().unwrap().contains("only 12 bytes"), "{}", short.text());

    // A tensor of the wrong rank is refused in the model's terms: its v2 name and the protocol's type names,
    // not the instance serving it.
    let flat = br#"{"inputs":[{"name":"x","shape":[4],"datatype":"FP32","data":[1,2,3,4]},
        {"name":"ids","shape":[4],"datatype":"INT64","data":[1,2,3,4]}]}"#;
    let wrong = gateway.http("POST", "/v2/models/shop.m/infer", &auth, flat);
    assert_eq!(wrong.status, 400, "{}", wrong.text());
    let said = wrong.json()["error"].as_str().unwrap().to_string();
    assert!(said.starts_with("model `shop.m`: ") && said.contains("FP32"), "{said}");
    assert!(!said.contains("instance") && !said.contains("F32 ") && !said.contains('#'), "{said}");

    // The real clients users of Triton and KServe have (set-up installs them into .jig/python-clients), over
    // HTTP and over gRPC.
    let grpc = gateway.grpc_addr.clone().expect("the gateway serves gRPC on `grpc_listen`");
    for (client, addr) in [
        ("triton_client.py", &gateway.addr),
        ("kserve_client.py", &gateway.addr),
        ("triton_grpc_client.py", &grpc),
        ("kserve_grpc_client.py", &grpc),
    ] {
        let output = std::process::Command::new("python3")
            .arg(root().join("tests/oip").join(client))
            .args([addr.as_str(), "shop.m", "let-me-in"])
            .env("PYTHONPATH", root().join(".jig/python-clients"))
            .output()
            .unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(
            // KServe's client logs the refusals it is shown to standard error.
            output.status.success() && String::from_utf8_lossy(&output.stdout).trim_end().ends_with("ok"),
            "{client}: {said}\n(scripts/setup.sh installs the clients into .jig/python-clients)"
        );
    }
    // Direct model calls are counted as the model's, apart from the app's invocations; a scraper gets the text
    // format unless it asks for OpenMetrics, as Prometheus does.
    let metrics = gateway.http("GET", "/metrics", &[], b"");
    assert!(metrics.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"), "{metrics:?}");
    let text = metrics.text();
    assert!(text.contains(r#"jig_model_requests_total{app="shop",slot="m",code="200"}"#), "{text}");
    assert!(!text.contains(r#"jig_requests_total{app="shop""#), "{text}");
    assert!(text.contains("# TYPE jig_model_requests_total counter") && !text.contains("# EOF"), "{text}");
    let accept = [("accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")];
    let openmetrics = gateway.http("GET", "/metrics", &accept, b"");
    assert!(openmetrics.header("content-type").unwrap().starts_with("application/openmetrics-text"));
    assert!(openmetrics.text().trim_end().ends_with("# EOF"), "{}", openmetrics.text());
}

/// Triton's perf_analyzer (set-up installs it, `scripts/perf_analyzer.sh`) drives a model slot over HTTP and over
/// gRPC, and splits its requests' time from the model's statistics, which count per request as Triton's do: it
/// refuses statistics whose queue count does not move or whose compute counts differ.
#[test]
fn perf_analyzer_drives_a_model_slot_over_http_and_grpc_from_its_statistics() {
    let (_state, gateway) = shop_over_http_and_grpc();
    let grpc = gateway.grpc_addr.clone().expect("the gateway serves gRPC on `grpc_listen`");
    for (protocol, addr) in [("http", &gateway.addr), ("grpc", &grpc)] {
        let output = std::process::Command::new(root().join("scripts/perf_analyzer.sh"))
            .args([addr.as_str(), "shop.m", "--concurrency-range", "2", "--measurement-interval", "1000"])
            // Any three windows count as stable: this checks what it reads and reports, not how fast (the
            // suite's other tests share the machine).
            .args(["--stability-percentage", "1000", "--max-trials", "10"])
            .env("PROTOCOL", protocol)
            .env("JIG_TOKEN", "let-me-in")
            .output()
            .unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{protocol}: {said}\n(scripts/setup.sh installs perf_analyzer)");
        let server = said.lines().find(|l| l.contains("Avg request latency")).unwrap_or_default();
        assert!(server.contains("queue") && server.contains("compute infer"), "{protocol}: {said}");
    }

    let auth = [("authorization", "Bearer let-me-in")];
    let stats = gateway.http("GET", "/v2/models/shop.m/stats", &auth, b"").json();
    let model = &stats["model_stats"][0];
    let inference = &model["inference_stats"];
    let stat = |what: &str| (inference[what]["count"].as_u64().unwrap(), inference[what]["ns"].as_u64().unwrap());
    let answered = stat("success").0;
    assert!(answered >= 100, "{stats}");
    for what in ["queue", "compute_input", "compute_infer", "compute_output"] {
        assert_eq!(stat(what).0, answered, "{what}: {stats}");
    }
    let inside = stat("queue").1 + stat("compute_input").1 + stat("compute_infer").1 + stat("compute_output").1;
    assert!(stat("compute_infer").1 > 0 && inside <= stat("success").1, "a request's parts fit in its time: {stats}");
    let batches = model["execution_count"].as_u64().unwrap();
    assert!(batches <= answered, "{stats}");
    // Per batch size, as Triton gives them: here every batch succeeded, so they add up to the batches run.
    let by_size = model["batch_stats"].as_array().unwrap();
    let counted: u64 = by_size.iter().map(|b| b["compute_infer"]["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, batches, "{stats}");
    assert!(by_size.iter().all(|b| b["batch_size"].as_u64().unwrap() >= 1), "{stats}");
    let now_ms = std::time::SystemTime::UNIX_EPOCH.elapsed().unwrap().as_millis() as u64;
    let last = model["last_inference"].as_u64().unwrap();
    assert!(now_ms - 60_000 < last && last <= now_ms, "the last answer was within the minute: {stats}");
}
