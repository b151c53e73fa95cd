//! A gateway on a machine with an NVIDIA GPU, as jig sees one: through `nvidia-smi` and
//! `nvidia-cuda-mps-control`, here stand-ins on `PATH` that describe an H100 and keep an MPS control pipe. So
//! discovery, the segments offered, planning onto GPU shares, and what a deploy says when this machine's ONNX
//! Runtime has no CUDA provider all run on a machine without a GPU. CUDA itself runs in `make test-gpu`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use jig_test_support::{Gateway, probe_app};

/// The probe's app `name` with the profile table `profiles`.
fn app(dir: &Path, name: &str, profiles: &str) {
    probe_app(dir, name, 0.9, Some(profiles));
}

const GPU: &str = "NVIDIA H100 80GB HBM3";
/// Unique to these tests: the stand-in daemon's pipe lives under `/tmp/jig-mps/UUID`.
const UUID: &str = "GPU-7e57f00d-0000-4000-8000-000000000016";

/// A directory of stand-ins for the NVIDIA tools, to put first on `PATH`: an H100 with MIG mode `mig`
/// (`Enabled` or `Disabled`) and the MIG instances `nvidia-smi -L` lists, read from [`MIG_INSTANCES`] in that
/// directory at each call (none without it), so that a test can create and destroy them.
fn nvidia_tools(dir: &Path, mig: &str) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let smi = format!(
        "#!/bin/sh\ncase \"$*\" in\n  *--query-gpu*) echo '0, {GPU}, {UUID}, 81559, {mig}' ;;\n  \
         -L) echo 'GPU 0: {GPU} (UUID: {UUID})'; cat \"$(dirname \"$0\")/{MIG_INSTANCES}\" 2>/dev/null ;;\n  \
         *) exit 1 ;;\nesac\n"
    );
    // As the driver's MPS control: `-d` starts a daemon that listens on its control socket (in Python); `quit`
    // on stdin tells it to stop, and it removes the socket.
    let listen = "import os, socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\ns.listen()\n\
                  while not s.accept()[0].recv(8).startswith(b\"quit\"): pass\nos.unlink(sys.argv[1])";
    let quit = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ns.sendall(b\"quit\")";
    let mps = format!(
        "#!/bin/sh\ncontrol=\"$CUDA_MPS_PIPE_DIRECTORY/control\"\nif [ \"$1\" = -d ]; then\n  \
         python3 -c '{listen}' \"$control\" </dev/null >/dev/null 2>&1 &\nelse\n  read cmd\n  python3 -c '{quit}' \"$control\"\nfi\n"
    );
    for (name, script) in [("nvidia-smi", smi.as_str()), ("nvidia-cuda-mps-control", mps.as_str())] {
        std::fs::write(bin.join(name), script).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// The file beside the stand-in `nvidia-smi` whose lines it lists as GPU 0's MIG instances.
const MIG_INSTANCES: &str = "mig-instances";

/// `nvidia-smi -L`'s lines for 2g.20gb instances with these UUIDs, in this order.
fn mig_instances(uuids: &[&str]) -> String {
    let lines = uuids.iter().enumerate().map(|(i, uuid)| format!("  MIG 2g.20gb     Device  {i}: (UUID: {uuid})\n"));
    lines.collect()
}

/// A `PATH` that finds the stand-ins first.
fn path_with_a_gpu(scratch: &Path, mig: &str) -> std::ffi::OsString {
    let tools = nvidia_tools(scratch, mig);
    std::env::join_paths(std::iter::once(tools).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())))
        .unwrap()
}

/// `jig up` on a machine with a GPU without MIG.
fn gateway_with_a_gpu(scratch: &Path) -> Gateway {
    let path = path_with_a_gpu(scratch, "Disabled");
    let env: [(&str, &std::ffi::OsStr); 1] = [("PATH", &path)];
    Gateway::start_with_env(&scratch.join("state"), &["--cores", "2"], &env)
}

fn deploy(gateway: &Gateway, dir: &Path) -> Output {
    gateway.jig("deploy").arg(dir).output().unwrap()
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn a_gpu_is_offered_as_mps_shares_in_devices_status_and_metrics() {
    let scratch = tempfile::tempdir().unwrap();
    let gateway = gateway_with_a_gpu(scratch.path());

    let machine = gateway.http("GET", "/v1/devices", &[], b"").json();
    let gpus = machine["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 1, "{machine}");
    assert_eq!(gpus[0]["uuid"], UUID, "{machine}");
    assert_eq!(gpus[0]["name"], GPU, "{machine}");
    assert_eq!(gpus[0]["free_mps_percent"], 100, "{machine}");

    let metrics = gateway.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains("jig_gpu_mps_free_percent{gpu=\"0\"} 100\n"), "{metrics}");

    let status = gateway.jig("status").output().unwrap();
    let shown = text(&status);
    assert!(status.status.success(), "{shown}");
    assert!(shown.contains(&format!("gpu 0      {GPU} ({UUID}, 81559 MiB)")), "{shown}");
    assert!(shown.contains("MPS      100% free"), "{shown}");
}

/// `--gpus` naming a GPU the machine lacks stops `jig up` with what the machine has, rather than serving
/// without it.
#[test]
fn a_gateway_given_a_gpu_the_machine_lacks_says_which_it_has() {
    let scratch = tempfile::tempdir().unwrap();
    let path = path_with_a_gpu(scratch.path(), "Disabled");
    let state = scratch.path().join("state");
    let up = jig_test_support::jig()
        .args(["up", "--listen", "127.0.0.1:0", "--gpus", "0,3", "--state-dir"])
        .arg(&state)
        .env("PATH", &path)
        .output()
        .unwrap();
    let said = text(&up);
    assert!(!up.status.success(), "{said}");
    assert!(said.contains("`gpus` names GPU 3, but this machine has GPU 0"), "{said}");
}

#[test]
fn a_plan_on_a_gpu_share_without_onnx_runtimes_cuda_build_names_what_to_install_and_others_keep_serving() {
    let scratch = tempfile::tempdir().unwrap();
    let gateway = gateway_with_a_gpu(scratch.path());
    let (cpu, gpu) = (scratch.path().join("cpu-app"), scratch.path().join("gpu-app"));
    app(
        &cpu,
        "on-cores",
        "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\nclassifier,fast,cpu:1,1,1,2,500,test\n",
    );
    app(
        &gpu,
        "on-gpu",
        &format!(
            "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\nclassifier,fast,mps:0:50x2,1,1,2,900,{GPU}\n"
        ),
    );
    let deployed = deploy(&gateway, &cpu);
    assert!(deployed.status.success(), "{}", text(&deployed));

    // The plan puts the GPU app on half the GPU, served by two processes; the first's worker cannot load CUDA
    // (set-up installed the CPU build).
    let refused = deploy(&gateway, &gpu);
    let said = text(&refused);
    assert!(!refused.status.success(), "{said}");
    for named in ["on-gpu", "classifier", "mps:0:50x2#0.0", UUID, "onnxruntime-gpu"] {
        assert!(said.contains(named), "the error names {named}: {said}");
    }

    // Nothing of the GPU is held by the deploy that failed, and the other app still answers.
    let machine = gateway.http("GET", "/v1/devices", &[], b"").json();
    assert_eq!(machine["gpus"][0]["free_mps_percent"], 100, "{machine}");
    let reply = gateway.http("POST", "/v1/apps/on-cores/invoke", &[], br#"{"op": "echo", "text": "1"}"#);
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(!Path::new("/tmp/jig-mps").join(UUID).join("pipe/control").exists(), "the MPS daemon was stopped");
}

#[test]
fn a_bundle_needing_mig_instances_that_do_not_exist_is_refused_and_plan_writes_the_layout_that_serves_it() {
    let scratch = tempfile::tempdir().unwrap();
    let path = path_with_a_gpu(scratch.path(), "Enabled");
    let dir = scratch.path().join("mig-app");
    // 31.5 req/s (the manifest's 30 and 5%) at 20 req/s an instance: two 2g.20gb instances.
    let rows = format!(
        "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\nclassifier,fast,mig:0:2g.20gb:1,4,30,40,20,{GPU}\n"
    );
    app(&dir, "on-mig", &rows);
    let manifest = std::fs::read_to_string(dir.join("jig.toml")).unwrap();
    std::fs::write(dir.join("jig.toml"), manifest.replace("[slo]", "[demand]\nrps = 30\n\n[slo]")).unwrap();

    let env: [(&str, &std::ffi::OsStr); 1] = [("PATH", &path)];
    let gateway = Gateway::start_with_env(&scratch.path().join("state"), &["--cores", "2"], &env);
    let refused = deploy(&gateway, &dir);
    let said = text(&refused);
    assert!(!refused.status.success(), "{said}");
    // It names the slot and the segment it is measured on, what GPU 0 has, and prints the config that makes
    // the two instances its plan needs here.
    for says in [
        "app `on-mig`",
        "slot `classifier` on mig:2g.20gb:1",
        "GPU 0: MIG mode, no free MIG instance",
        "the plan needs 2× 2g.20gb on GPU 0; this machine has none",
        "sudo nvidia-mig-parted apply -f THIS_FILE -c jig-on-mig",
        "jig plan BUNDLE --mig-config FILE",
        "\"2g.20gb\": 2",
    ] {
        assert!(said.contains(says), "{says}: {said}");
    }

    // The command the refusal names works on this machine: it plans as if GPU 0 could take any layout.
    let config = scratch.path().join("mig.yaml");
    let planned =
        jig_test_support::jig().arg("plan").arg(&dir).arg("--mig-config").arg(&config).env("PATH", &path).output();
    let planned = planned.unwrap();
    assert!(planned.status.success(), "{}", text(&planned));
    let yaml = std::fs::read_to_string(&config).unwrap();
    assert!(yaml.contains("\"jig-on-mig\"") && yaml.contains("\"2g.20gb\": 2"), "{yaml}");
}

/// The machine's MIG instances are listed again at each deploy: a plan is placed on the instances that exist
/// then, never on one destroyed since the gateway started, and `/v1/devices`, `/metrics` and `jig status` show
/// what that look found.
#[test]
fn each_deploy_places_its_plan_on_the_mig_instances_that_exist_then() {
    let scratch = tempfile::tempdir().unwrap();
    let path = path_with_a_gpu(scratch.path(), "Enabled");
    let listed = scratch.path().join("bin").join(MIG_INSTANCES);
    let (first, second, created) = ("MIG-7e57f00d-aaaa", "MIG-7e57f00d-bbbb", "MIG-7e57f00d-cccc");
    std::fs::write(&listed, mig_instances(&[first, second])).unwrap();
    let dir = scratch.path().join("mig-app");
    let rows = format!(
        "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\nclassifier,fast,mig:0:2g.20gb:1,4,30,40,20,{GPU}\n"
    );
    app(&dir, "on-mig", &rows);
    let env: [(&str, &std::ffi::OsStr); 1] = [("PATH", &path)];
    let gateway = Gateway::start_with_env(&scratch.path().join("state"), &["--cores", "2"], &env);

    // One instance is planned, on the first free 2g.20gb; its worker cannot load CUDA here, which names it.
    let said = text(&deploy(&gateway, &dir));
    assert!(said.contains("on-mig") && said.contains(first) && said.contains("onnxruntime-gpu"), "{said}");

    // The first instance is destroyed and another created: the next deploy plans on what exists now.
    std::fs::write(&listed, mig_instances(&[second, created])).unwrap();
    let said = text(&deploy(&gateway, &dir));
    assert!(said.contains(second) && !said.contains(first), "placed on a listed instance: {said}");
    assert!(said.contains("onnxruntime-gpu"), "{said}");

    let machine = gateway.http("GET", "/v1/devices", &[], b"").json();
    let free: Vec<&str> =
        machine["gpus"][0]["free_mig_instances"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(free, [format!("2g.20gb ({second})"), format!("2g.20gb ({created})")], "{machine}");
    let metrics = gateway.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains("jig_gpu_mig_instances{gpu=\"0\",state=\"free\"} 2\n"), "{metrics}");
    let shown = text(&gateway.jig("status").output().unwrap());
    let mig = format!("MIG      2g.20gb 2g.20gb; free: 2g.20gb ({second}) 2g.20gb ({created})");
    assert!(shown.contains(&mig), "{shown}");
}

/// `jig profile --counters` on a machine with a GPU (the stand-ins, and a stand-in `ncu` that checks how it was
/// started and writes what Nsight Compute writes): the utilisation table a `[gpulet]` spec reads, kernel-time
/// weighted; a run that measured nothing, and a machine without `ncu`, are named. The child that runs the
/// model under `ncu` (`--kernels-of`) refuses a slot the bundle lacks, and says what CUDA provider is missing.
#[test]
fn counters_run_each_model_under_nsight_compute_and_write_the_utilisation_table() {
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    app(&bundle, "probe", "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n");
    let path = path_with_a_gpu(scratch.path(), "Disabled");
    let tools = std::env::split_paths(&path).next().unwrap();
    let calls = scratch.path().join("ncu-calls");
    // Two kernels: 3 µs at 30% L2 and 20.5% DRAM, 1 µs at 10% and 60.5%.
    let table = r#""ID","Kernel Name","Metric Name","Metric Unit","Metric Value"
"0","void conv<float, 4>(P)","gpu__time_duration.sum","ns","3,000"
"0","void conv<float, 4>(P)","lts__t_sectors.avg.pct_of_peak_sustained_elapsed","%","30"
"0","void conv<float, 4>(P)","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","20.5"
"1","relu","gpu__time_duration.sum","ns","1000"
"1","relu","lts__t_sectors.avg.pct_of_peak_sustained_elapsed","%","10"
"1","relu","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","60.5""#;
    std::fs::write(scratch.path().join("table.csv"), format!("==PROF== Connected to process 1\n{table}\n")).unwrap();
    let ncu = format!(
        "#!/bin/sh\necho \"$CUDA_VISIBLE_DEVICES|${{CUDA_MPS_PIPE_DIRECTORY:-no mps}}|$*\" >> {calls}\n\
         while [ \"$1\" != --log-file ]; do shift; done\ncp {table} \"$2\"\n",
        calls = calls.display(),
        table = scratch.path().join("table.csv").display()
    );
    std::fs::write(tools.join("ncu"), ncu).unwrap();
    std::fs::set_permissions(tools.join("ncu"), std::fs::Permissions::from_mode(0o755)).unwrap();

    let profile = |extra: &[&str]| {
        let mut command = jig_test_support::jig();
        command.arg("profile").arg(&bundle).args(extra).env("PATH", &path).env("CUDA_MPS_PIPE_DIRECTORY", "/tmp/x");
        command.output().unwrap()
    };
    let out = profile(&["--counters", "--batch", "4"]);
    assert!(out.status.success(), "{}", text(&out));
    let util = std::fs::read_to_string(bundle.join("util.csv")).unwrap();
    assert_eq!(util, "model,batch,l2,dram\nclassifier,4,0.2500,0.3050\n", "{}", text(&out));
    let call = std::fs::read_to_string(&calls).unwrap();
    let (device, rest) = call.trim().split_once('|').unwrap();
    assert_eq!(device, UUID, "the whole GPU, by UUID: {call}");
    assert!(rest.starts_with("no mps|--profile-from-start off --csv"), "outside MPS, profiling off at start: {call}");
    assert!(call.contains(&format!("profile {} --kernels-of classifier --batch 4", bundle.display())), "{call}");

    // ncu ran but wrote no table (an MPS daemon on the GPU, counters restricted to administrators).
    std::fs::write(scratch.path().join("table.csv"), "==ERROR== ERR_NVGPUCTRPERM\n").unwrap();
    let out = profile(&["--counters"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("slot `classifier` on GPU 0: ncu wrote no table"), "{}", text(&out));
    assert!(text(&out).contains("NVreg_RestrictProfilingToAdminUsers=0"), "{}", text(&out));
    std::fs::remove_file(tools.join("ncu")).unwrap();
    let out = profile(&["--counters"]);
    assert!(text(&out).contains("`ncu` is not on PATH"), "{}", text(&out));
    let out = profile(&["--batch", "4"]);
    assert!(text(&out).contains("--batch is the batch of --pairs and --counters"), "{}", text(&out));

    let out = profile(&["--kernels-of", "nope"]);
    assert!(text(&out).contains("no variant of slot `nope`"), "{}", text(&out));
    let out = profile(&["--kernels-of", "classifier"]);
    assert!(!out.status.success() && text(&out).contains("CUDA execution provider is unavailable"), "{}", text(&out));
}
