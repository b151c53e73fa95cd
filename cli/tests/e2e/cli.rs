//! `jig run` as a user runs it: the real binary, real files, real components.

use std::process::{Command, Output, Stdio};

use jig_test_support::{component, jig, model, root};

fn run(cmd: &mut Command, stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn run_crops_a_photo_and_writes_each_crop_as_png() {
    let out_dir = tempfile::tempdir().unwrap();
    let output = run(
        jig()
            .arg("run")
            .arg(component("crop"))
            .arg(root().join("tests/data/f3-board.jpg"))
            .args(["--meta", r#"{"boxes": [{"x0": 10, "y0": 10, "x1": 90, "y1": 50}, {"x0": 100, "y0": 100, "x1": 140, "y1": 180}]}"#])
            .args(["--config", "encoding=png", "--emit-dir"])
            .arg(out_dir.path()),
        b"",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result, serde_json::json!({"crops": 2, "skipped": 0}));
    assert!(stderr.contains("2 payload(s) emitted"), "{stderr}");

    let png = std::fs::read(out_dir.path().join("crops-1.png")).unwrap();
    let image = jig_sdk::image::decode(&png).unwrap();
    assert_eq!(image.dimensions(), (40, 80));
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.path().join("crops-1.json")).unwrap()).unwrap();
    assert_eq!(meta["index"], 1);
}

#[test]
fn run_reads_the_payload_from_stdin() {
    let output = run(
        jig().arg("run").arg(component("select")).args(["-c", "labels=cat", "-c", "min-score=0.5"]),
        br#"{"detections": [{"label": "cat", "score": 0.9}, {"label": "dog", "score": 0.99}]}"#,
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["dropped"], 1);
    assert_eq!(result["selected"][0]["label"], "cat");
}

#[test]
fn a_failing_function_exits_1_naming_it_and_the_cause() {
    let output = run(jig().arg("run").arg(component("select")), b"not json");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("function `select` failed: invalid input"), "{stderr}");
}

#[test]
fn a_file_that_is_not_a_component_exits_2_with_advice() {
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let output = run(jig().arg("run").arg(&core), b"");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("function `core`") && stderr.contains("wasm32-wasip2"), "{stderr}");

    let output = run(jig().arg("run").arg(dir.path().join("missing.wasm")), b"");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("missing.wasm"));

    let output = run(jig().arg("run").arg(component("echo")).args(["--config", "novalue"]), b"");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("KEY=VALUE"));
}

#[test]
fn a_bundle_missing_or_broken_is_named_by_its_directory_before_any_gateway_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-bundle");
    let broken = dir.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(broken.join("jig.toml"), "name = \"broken\"\n[[tasks]]\nname = \"t\"\nglue = \"glue/t.wasm\"\n")
        .unwrap();
    for (bundle, cause) in [(&missing, "cannot read the bundle's jig.toml"), (&broken, "glue/t.wasm")] {
        for command in ["deploy", "profile", "build"] {
            // A gateway nobody listens on: the bundle's error comes first, from this machine.
            let output = run(jig().arg(command).arg(bundle).env("JIG_GATEWAY", "http://127.0.0.1:9"), b"");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "jig {command}: {stderr}");
            assert!(stderr.contains(&format!("bundle {}: ", bundle.display())), "jig {command}: {stderr}");
            assert!(stderr.contains(cause), "jig {command}: {stderr}");
        }
    }
}

#[test]
fn a_voice_stage_that_is_not_one_or_an_input_it_cannot_take_is_named() {
    let output = run(jig().arg("run").arg(component("tts_frame")).args(["--config", "stage=bogus"]), b"hello");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("config key `stage` is \"bogus\"") && stderr.contains("`vocoder`"), "{stderr}");

    let output = run(jig().arg("run").arg(component("tts_frame")).args(["--config", "stage=vocoder"]), b"hello");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("stage `vocoder` takes what a `front` stage emits"), "{stderr}");
}

#[test]
fn run_serves_a_model_slot_with_onnx_runtime() {
    let payload =
        serde_json::json!({"op": "infer-f32", "slot": "classifier", "shape": [2, 64], "values": vec![0.25; 128]});
    let output = run(
        jig()
            .arg("run")
            .arg(component("jig_probe"))
            .arg("--model")
            .arg(format!("classifier={}", model("mlp").display())),
        payload.to_string().as_bytes(),
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result[0]["shape"], serde_json::json!([2, 16]));
    let values = result[0]["values"].as_array().unwrap();
    assert_eq!(values.len(), 32);
    assert_eq!(values[..16], values[16..], "equal rows give equal outputs");
}

#[test]
fn a_missing_onnx_runtime_names_the_fix() {
    let output = run(
        jig()
            .arg("run")
            .arg(component("jig_probe"))
            .arg("--model")
            .arg(format!("classifier={}", model("mlp").display()))
            .env("JIG_ORT_LIB", "/nonexistent/libonnxruntime.so"),
        b"{}",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("/nonexistent/libonnxruntime.so") && stderr.contains("make setup"), "{stderr}");
}

/// A share the planner charges for more of the GPU than it holds (sevenths, rounded up) is named before anything
/// runs, with the shares that fill a GPU; one in sevenths is not. (Without a GPU the profile then stops.)
#[test]
fn profile_notes_a_share_the_planner_charges_more_than_it_holds() {
    let bundle = tempfile::tempdir().unwrap();
    let manifest = "name = \"t\"\n[[variants]]\nslot = \"classifier\"\nname = \"mlp\"\nmodel = \"mlp.onnx\"\n";
    jig_test_support::bundle(bundle.path(), manifest, &[("mlp.onnx", &model("mlp"))]);
    let profile = |segment: &str| {
        let output = run(
            jig().arg("profile").arg(bundle.path()).args(["--segment", segment, "--max-batch", "1", "--runs", "1"]),
            b"",
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let stderr = profile("mps:0:25");
    assert!(stderr.contains("charges mps:0:25 2 of a GPU's 7 slices (28.6%, 3.6 points more"), "{stderr}");
    assert!(stderr.contains("shares in sevenths (14, 28, 42, 57, 71, 85 or 100%)"), "{stderr}");
    let stderr = profile("mps:0:14");
    assert!(!stderr.contains("charges"), "{stderr}");
}

#[test]
fn profile_writes_a_table_the_planner_reads() {
    let bundle = tempfile::tempdir().unwrap();
    let manifest = "name = \"t\"\n[[variants]]\nslot = \"classifier\"\nname = \"mlp\"\nmodel = \"mlp.onnx\"\n";
    jig_test_support::bundle(bundle.path(), manifest, &[("mlp.onnx", &model("mlp"))]);
    let output = run(
        jig().arg("profile").arg(bundle.path()).args(["--segment", "cpu:1", "--max-batch", "4", "--runs", "3"]),
        b"",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("classifier/mlp on cpu:1: batch   4"), "progress is shown: {stderr}");
    let rows =
        jig_planner::profile::from_csv(&std::fs::read_to_string(bundle.path().join("profiles.csv")).unwrap()).unwrap();
    assert_eq!(rows.iter().map(|r| r.batch).collect::<Vec<_>>(), vec![1, 2, 4]);
    assert!(rows.iter().all(|r| r.segment == "cpu:1" && r.p95_ms >= r.p50_ms && r.throughput_rps > 0.0));

    // A manifest naming a model that is not there is refused with the file and the variant.
    std::fs::write(
        bundle.path().join("jig.toml"),
        "name = \"t\"\n[[variants]]\nslot = \"s\"\nname = \"v\"\nmodel = \"nope.onnx\"\n",
    )
    .unwrap();
    let output = run(jig().arg("profile").arg(bundle.path()), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("jig.toml") && stderr.contains("`v`") && stderr.contains("nope.onnx"), "{stderr}");
}

/// `jig profile --slot` measures one slot's variants and keeps the rest of the table: the rows it measures again
/// are replaced, the others (other slots, the slot on other segments) stay.
#[test]
fn profiling_one_slot_keeps_the_rest_of_the_table() {
    let bundle = tempfile::tempdir().unwrap();
    let manifest = "name = \"t\"\n[[variants]]\nslot = \"a\"\nname = \"mlp\"\nmodel = \"mlp.onnx\"\n\
                    [[variants]]\nslot = \"b\"\nname = \"mlp-b\"\nmodel = \"mlp.onnx\"\n";
    jig_test_support::bundle(bundle.path(), manifest, &[("mlp.onnx", &model("mlp"))]);
    let profile = |args: &[&str]| {
        let output =
            run(jig().arg("profile").arg(bundle.path()).args(["--max-batch", "1", "--runs", "1"]).args(args), b"");
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let table = || {
        let text = std::fs::read_to_string(bundle.path().join("profiles.csv")).unwrap();
        let rows = jig_planner::profile::from_csv(&text).unwrap();
        rows.into_iter().map(|r| (r.slot, r.segment)).collect::<Vec<_>>()
    };
    let row = |slot: &str, segment: &str| (slot.to_string(), segment.to_string());

    let (code, stderr) = profile(&["--segment", "cpu:1"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(table(), [row("a", "cpu:1"), row("b", "cpu:1")]);
    let (code, stderr) = profile(&["--slot", "b", "--segment", "cpu:2"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("a/mlp on"), "only slot b is measured: {stderr}");
    assert!(stderr.contains("wrote 3 rows (1 measured now, 2 kept)"), "{stderr}");
    assert_eq!(table(), [row("a", "cpu:1"), row("b", "cpu:1"), row("b", "cpu:2")]);
    let (code, stderr) = profile(&["--slot", "b", "--segment", "cpu:1"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(table(), [row("a", "cpu:1"), row("b", "cpu:2"), row("b", "cpu:1")], "b on cpu:1 replaced, not added");

    let (code, stderr) = profile(&["--slot", "voice"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--slot voice") && stderr.contains("its slots: a, b"), "{stderr}");
    std::fs::write(bundle.path().join("profiles.csv"), "not,a,table\n").unwrap();
    let (code, stderr) = profile(&["--slot", "a", "--segment", "cpu:1"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("is not a profile table, so --slot cannot keep its other rows"), "{stderr}");
    assert_eq!(std::fs::read_to_string(bundle.path().join("profiles.csv")).unwrap(), "not,a,table\n", "kept as it was");
}

/// A table with a share measured alone and processes of its size measured together (kept from a GPU's profile
/// while one slot is measured again here) names the share the planner reads as they ran together.
#[test]
fn profile_notes_a_share_slower_beside_others_of_its_size() {
    let bundle = tempfile::tempdir().unwrap();
    let manifest = "name = \"t\"\n[[variants]]\nslot = \"a\"\nname = \"mlp\"\nmodel = \"mlp.onnx\"\n\
                    [[variants]]\nslot = \"b\"\nname = \"mlp-b\"\nmodel = \"mlp.onnx\"\n";
    jig_test_support::bundle(bundle.path(), manifest, &[("mlp.onnx", &model("mlp"))]);
    let table = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n\
                 b,mlp-b,mps:0:14,8,12.5,13.0,634,H200\n\
                 b,mlp-b,mps:0:57x4,8,14.4,16.6,2171,H200\n\
                 b,mlp-b,mps:0:28,8,8.7,10.0,901,H200\n";
    std::fs::write(bundle.path().join("profiles.csv"), table).unwrap();
    let output = run(
        jig().arg("profile").arg(bundle.path()).args(["--slot", "a", "--segment", "cpu:1", "--max-batch", "1"]),
        b"",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("note: b/mlp-b on mps:0:14 runs batches up to 1.28× as long"), "{stderr}");
    assert!(!stderr.contains("on mps:0:28 runs"), "no 28% processes were measured together: {stderr}");
}

/// `jig profile --pairs` (gpu-lets' co-run measurement): each slot's model alone, then every pair at once, each
/// on a one-core segment of its own, written as the `interference` table a `[gpulet]` spec reads.
#[test]
fn pairs_measure_each_slot_alone_and_beside_every_other() {
    let bundle = tempfile::tempdir().unwrap();
    let manifest = "name = \"t\"\n[[variants]]\nslot = \"a\"\nname = \"mlp\"\nmodel = \"mlp.onnx\"\n\
                    [[variants]]\nslot = \"b\"\nname = \"big\"\nmodel = \"big.onnx\"\n";
    jig_test_support::bundle(bundle.path(), manifest, &[("mlp.onnx", &model("mlp")), ("big.onnx", &model("big"))]);
    let args = ["--pairs", "--segment", "cpu:1", "--batch", "2", "--seconds", "0.3"];
    let output = run(jig().arg("profile").arg(bundle.path()).args(args), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("a beside b on cpu:1"), "progress is shown: {stderr}");
    let table = std::fs::read_to_string(bundle.path().join("pairs.csv")).unwrap();
    let mut lines = table.lines();
    assert_eq!(lines.next(), Some("model,neighbour,segment,batch,solo_ms,corun_ms,slowdown"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let pairs: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(pairs, [("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")], "{table}");
    for r in &rows {
        let [solo, corun, slowdown] = [r[4], r[5], r[6]].map(|v| v.parse::<f64>().unwrap());
        assert_eq!((r[2], r[3]), ("cpu:1", "2"), "{table}");
        assert!(solo > 0.0 && corun > 0.0 && (slowdown - (corun / solo - 1.0)).abs() < 1e-3, "{table}");
    }
    let output =
        run(jig().arg("profile").arg(bundle.path()).args(["--pairs", "--segment", "cpu:1", "--segment", "cpu:2"]), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--pairs measures on one segment size"), "{stderr}");
}

#[test]
fn adaptive_profiling_samples_each_point_until_its_verdict_and_counts_what_it_saved() {
    let bundle = tempfile::tempdir().unwrap();
    let manifest = "name = \"t\"\nslo = { latency_ms = 10000 }\n[[variants]]\nslot = \"c\"\nname = \"mlp\"\nmodel = \"mlp.onnx\"\n";
    jig_test_support::bundle(bundle.path(), manifest, &[("mlp.onnx", &model("mlp"))]);
    let args = ["--segment", "cpu:1", "--segment", "cpu:2", "--max-batch", "2", "--adaptive", "--max-runs", "200"];
    let output = run(jig().arg("profile").arg(bundle.path()).args(args), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // Far within a 5 s budget: 90 runs make the verdict 99% certain.
    assert!(
        stderr.contains("c/mlp on cpu:2: batch   2") && stderr.contains("(90 runs, within the budget)"),
        "{stderr}"
    );
    // Trimming probes batch 1 on one core (within), so no segment is skipped: 5 points in all.
    assert!(stderr.contains("adaptive: 450 timed runs for 5 points, 55% fewer than 1000 at a fixed 200"), "{stderr}");
    let rows =
        jig_planner::profile::from_csv(&std::fs::read_to_string(bundle.path().join("profiles.csv")).unwrap()).unwrap();
    assert_eq!(rows.len(), 4, "batches 1 and 2 on both segments");

    // Without a latency SLO there is nothing to decide.
    std::fs::write(bundle.path().join("jig.toml"), manifest.replace("slo = { latency_ms = 10000 }\n", "")).unwrap();
    let output = run(jig().arg("profile").arg(bundle.path()).args(args), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--adaptive") && stderr.contains("latency_ms"), "{stderr}");
}

#[test]
fn profiling_a_gpu_segment_the_machine_lacks_names_it() {
    let bundle = tempfile::tempdir().unwrap();
    let manifest = "name = \"t\"\n[[variants]]\nslot = \"c\"\nname = \"mlp\"\nmodel = \"mlp.onnx\"\n";
    jig_test_support::bundle(bundle.path(), manifest, &[("mlp.onnx", &model("mlp"))]);
    let output = run(jig().arg("profile").arg(bundle.path()).args(["--segment", "mps:7:50"]), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("segment mps:7:50: no GPU 7 on this machine"), "{stderr}");
}

#[test]
fn plan_places_a_paper_application_and_names_a_missing_spec() {
    let output = run(jig().args(["plan", "--app", "social", "--json"]), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).expect("--json prints JSON");
    assert!(plan.to_string().contains("social-media"), "{plan}");

    let output = run(jig().args(["plan", "no-such-spec.toml", "--profiles", "p.csv"]), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no-such-spec.toml"), "{stderr}");
}

#[test]
fn plan_plans_a_bundle_directory_as_a_deployment_would() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = "name = \"scale\"\nslo = { latency_ms = 500, accuracy = 0.9 }\n\
        [[tasks]]\nname = \"score\"\nglue = \"glue/echo.wasm\"\nslot = \"m\"\n\
        [[variants]]\nslot = \"m\"\nname = \"exact\"\nmodel = \"models/mlp.onnx\"\naccuracy = 1.0\n\
        [[variants]]\nslot = \"m\"\nname = \"rough\"\nmodel = \"models/mlp.onnx\"\naccuracy = 0.95\n";
    jig_test_support::bundle(
        dir.path(),
        manifest,
        &[("glue/echo.wasm", &component("echo")), ("models/mlp.onnx", &model("mlp"))],
    );
    let output = run(jig().arg("plan").arg(dir.path()), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no profiles.csv to plan with; run `jig profile"), "{stderr}");
    for command in ["plan", "simulate"] {
        let output = run(jig().arg(command).arg(dir.path()).args(["--app", "social"]), b"");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("give either a bundle directory") && stderr.contains("--app social"), "{stderr}");
    }

    // `exact` serves 20 req/s on one core, `rough` 60: at 40 req/s on one core only `rough` keeps up.
    std::fs::write(
        dir.path().join("profiles.csv"),
        "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n\
         m,exact,cpu:1,1,50,50,20,test\nm,rough,cpu:1,1,16,16,60,test\n",
    )
    .unwrap();
    let output = run(jig().arg("plan").arg(dir.path()).args(["--slices", "1", "--demand", "40"]), b"");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("plan for `scale`"), "{stdout}");
    assert!(stdout.contains("1 × rough on cpu:1"), "{stdout}");
}

#[test]
fn trace_writes_a_day_and_bench_names_the_bad_line_of_a_trace() {
    let output = run(jig().args(["trace", "--peak", "10", "--bins", "24"]), b"");
    assert!(output.status.success());
    let csv = String::from_utf8(output.stdout).unwrap();
    let trace = jig_sim::trace::Trace::from_csv(&csv).unwrap();
    assert_eq!((trace.rates.len(), trace.bin_s), (24, 3600.0));
    assert!((trace.peak() - 10.0).abs() < 0.01);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("day.csv");
    let output = run(jig().args(["trace", "--peak", "10", "--bins", "24", "-o"]).arg(&file), b"");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success() && said.contains("trace: wrote 24 bins, peak 10 req/s, to "), "{said}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), csv);

    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "start_s,rps\n0,1\n300,lots\n").unwrap();
    let output = run(jig().args(["bench", "app", "input.bin", "--trace"]).arg(&bad), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bad.csv: line 3: `rps` is not a number"), "{stderr}");
}

#[test]
fn simulate_replays_a_trace_through_plans_and_names_the_bad_line_of_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let day = dir.path().join("day.csv");
    std::fs::write(&day, "start_s,rps\n0,40\n300,40\n600,80\n900,80\n").unwrap();
    let (csv, svg) = (dir.path().join("bins.csv"), dir.path().join("bins.svg"));
    let output = run(
        jig()
            .args(["simulate", "--app", "social", "--slices", "28", "--features", "A+S+T", "--sample", "500"])
            .arg("--trace")
            .arg(&day)
            .arg("--csv")
            .arg(&csv)
            .arg("--plot")
            .arg(&svg),
        b"",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("social-media on 28 slices, β 0.0350: 4 bins of 300 s, peak 80.0 req/s"), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("A+S+T")), "{stdout}");
    let bins = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(bins.lines().count(), 5, "{bins}");
    assert!(bins.starts_with("features,start_s,rate_rps,planned_rps,slices"), "{bins}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<polyline"));

    // Nodes failing: four nodes of 7 slices, one lost every 10 minutes from the 10th.
    let output = run(
        jig()
            .args(["simulate", "--app", "social", "--slices", "28", "--features", "A+S+T", "--sample", "500"])
            .args(["--node-failures", "4", "--failure-every-s", "600", "--trace"])
            .arg(&day),
        b"",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("A+S+T: a node lost in 1 bin: violations"), "{stdout}");

    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "start_s,rps\n0,1\n300,-4\n").unwrap();
    let output = run(jig().args(["simulate", "--app", "social", "--slices", "28", "--trace"]).arg(&bad), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("bad.csv: line 3"), "{stderr}");
}

/// A PPipe spec (`[ppipe]`): its block profile table in `jig profile`'s format, two classes; `jig plan --each`
/// prints PPipe's, NP's and DART-r's plans, `jig simulate` the load each serves at 99%; a block the table lacks
/// on a class's segment is named.
#[test]
fn a_ppipe_spec_plans_and_simulates_pooled_pipelines() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n");
    // The slow class is close on block 0 and far behind on block 1.
    for (segment, block0, block1) in [("mps:0:100", 10.0, 10.0), ("cpu:4", 12.0, 60.0)] {
        for batch in [1u32, 2, 4] {
            let scale = f64::from(batch).powf(0.6);
            for (slot, ms) in [("b0", block0 * scale), ("b1", block1 * scale)] {
                csv.push_str(&format!("{slot},m,{segment},{batch},{ms},{ms},{},test\n", f64::from(batch) * 1e3 / ms));
            }
        }
    }
    std::fs::write(dir.path().join("blocks.csv"), csv).unwrap();
    let spec = r#"
[ppipe]
model = "cnn"
blocks = ["b0", "b1"]
output_bytes = [1000000, 4000]
profiles = "blocks.csv"
slo_ms = 100
max_partitions = 2
classes = [
  { name = "gpu", units = 1, segments = { 1 = "mps:0:100" } },
  { name = "cores", units = 3, segments = { 1 = "cpu:4" } },
]
"#;
    let path = dir.path().join("ppipe.toml");
    std::fs::write(&path, spec).unwrap();
    let output = run(jig().arg("plan").arg(&path).arg("--each"), b"");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("model cnn: ppipe plan") && stdout.contains("blocks 0–0 on"), "{stdout}");
    assert!(stdout.contains("model cnn: np plan") && stdout.contains("model cnn: dart-r plan"), "{stdout}");

    let output = run(jig().arg("simulate").arg(&path), b"");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let factor = |scheme: &str| -> f64 {
        let line = stdout.lines().find(|l| l.starts_with(scheme)).unwrap_or_else(|| panic!("{stdout}"));
        line.split_whitespace().last().unwrap().parse().unwrap()
    };
    assert!(factor("ppipe ") > factor("np "), "{stdout}");

    std::fs::write(&path, spec.replace("cpu:4", "cpu:8")).unwrap();
    let output = run(jig().arg("plan").arg(&path), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no row of block `b0` on segment `cpu:8` (class `cores`"), "{stderr}");
}

/// A gpu-lets spec (`[gpulet]`) over a profile table of MPS shares: `jig plan --each` prints gpu-lets' and SBP's
/// schedules (and gpu-lets' with measured interference, given its tables), `jig simulate` the rates each plans
/// and serves and its schedule served; a model without whole-GPU rows is named.
#[test]
fn a_gpulet_spec_schedules_gpu_shares_and_serves_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n");
    // `fixed` ms no share shortens, `per_item` ms a row on the whole GPU.
    for (slot, fixed, per_item) in [("light", 1.5, 0.01), ("heavy", 4.0, 0.5)] {
        for share in [20u32, 40, 50, 60, 80, 100] {
            for batch in [1u32, 2, 4, 8, 16, 32] {
                let ms = fixed + per_item * f64::from(batch) * 100.0 / f64::from(share);
                csv.push_str(&format!(
                    "{slot},v,mps:0:{share},{batch},{ms},{ms},{},test\n",
                    f64::from(batch) * 1e3 / ms
                ));
            }
        }
    }
    std::fs::write(dir.path().join("profiles.csv"), csv).unwrap();
    let spec = "[gpulet]\nprofiles = \"profiles.csv\"\ngpus = 2\nmodels = [\n  { name = \"light\", rate_rps = 500 },\n  \
                { name = \"heavy\", rate_rps = 200 },\n]\n";
    let path = dir.path().join("gpulet.toml");
    std::fs::write(&path, spec).unwrap();
    let output = run(jig().arg("plan").arg(&path).arg("--each"), b"");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("gpulet schedule: 700.0 req/s of 2 models") && stdout.contains("sbp schedule"), "{stdout}");
    assert!(stdout.contains("GPU 0") && stdout.contains("light 500.0 req/s"), "{stdout}");

    let output = run(jig().arg("simulate").arg(&path), b"");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let fits = |scheduler: &str| -> f64 {
        let line = stdout.lines().find(|l| l.starts_with(scheduler)).unwrap_or_else(|| panic!("{stdout}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert!(fits("gpulet ") >= fits("sbp ") && fits("sbp ") > 700.0, "{stdout}");
    let serves = |scheduler: &str| -> f64 {
        let line = stdout.lines().find(|l| l.starts_with(scheduler)).unwrap_or_else(|| panic!("{stdout}"));
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    assert!(serves("sbp ") > 0.0 && serves("sbp ") <= fits("sbp "), "{stdout}");
    assert!(fits("ideal ") >= 0.999 * fits("gpulet "), "the exhaustive search fits at least Algorithm 1's: {stdout}");

    // The paper's schedulability study: every combination of the levels over the two models but 0 and 0.
    let output = run(jig().arg("simulate").arg(&path).args(["--rate-levels", "0,1500,3000"]), b"");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.starts_with("8 scenarios: each of the 2 models at 0, 1500, 3000 req/s"), "{stdout}");
    let schedulable = |scheduler: &str| -> u64 {
        let line = stdout.lines().find(|l| l.starts_with(scheduler)).unwrap_or_else(|| panic!("{stdout}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert!(schedulable("ideal ") >= schedulable("gpulet ") && schedulable("ideal ") < 8, "{stdout}");
    std::fs::write(&path, spec.replace("gpus = 2", "gpus = 7")).unwrap();
    let output = run(jig().arg("simulate").arg(&path).args(["--rate-levels", "0,1500"]), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("searches at most 6 GPUs; the spec has 7"), "{stderr}");
    std::fs::write(&path, spec).unwrap();
    let output = run(jig().args(["simulate", "--app", "social", "--rate-levels", "0,1"]), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("--rate-levels is gpu-lets'"), "{stderr}");

    // Measured interference (scripts/gpulet_interference.py's tables): gpu-lets plans with it too.
    std::fs::write(
        dir.path().join("util.csv"),
        "model,batch,l2,dram\nlight,8,0.1,0.1\nheavy,8,0.4,0.3\nthird,8,0.2,0.5\n",
    )
    .unwrap();
    let mut pairs = String::from("model,neighbour,segment,batch,solo_ms,corun_ms,slowdown\n");
    for (i, (a, b)) in
        ["light", "heavy", "third"].iter().flat_map(|a| ["light", "heavy", "third"].map(|b| (*a, b))).enumerate()
    {
        pairs.push_str(&format!("{a},{b},mps:0:50,8,1,1,{}\n", 0.05 + 0.03 * i as f64));
    }
    std::fs::write(dir.path().join("pairs.csv"), pairs).unwrap();
    let measured = spec.replace("gpus = 2", "gpus = 2\nutilisation = \"util.csv\"\ninterference = \"pairs.csv\"");
    std::fs::write(&path, &measured).unwrap();
    let output = run(jig().arg("plan").arg(&path).arg("--each"), b"");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("gpulet+int schedule: 700.0 req/s"), "{stdout}");
    let output = run(jig().arg("simulate").arg(&path), b"");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("fitted to 9 co-runs") && stdout.contains("\ngpulet+int "), "{stdout}");
    // Re-scheduled through waves of load (--adapt): a line a minute, and the two runs' violations.
    let output = run(jig().arg("simulate").arg(&path).arg("--adapt"), b"");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(stdout.lines().filter(|l| l.split_whitespace().count() == 5).count(), 30, "{stdout}");
    assert!(stdout.contains("re-scheduled (") && stdout.contains("with the first schedule kept"), "{stdout}");
    let output = run(jig().args(["simulate", "--app", "social", "--adapt"]), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("--adapt re-schedules gpu-lets"), "{stderr}");
    std::fs::write(&path, measured.replace("interference = \"pairs.csv\"", "")).unwrap();
    let output = run(jig().arg("plan").arg(&path), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("give both `utilisation` and `interference`"), "{stderr}");

    std::fs::write(&path, spec.replace("gpus = 2", "gpus = 2\ngpu = 3")).unwrap();
    let output = run(jig().arg("plan").arg(&path), b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("model `light`: no row of slot `light` on `mps:3:100`"), "{stderr}");
}
