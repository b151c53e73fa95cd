//! The gateway against `wasmtime serve`, in the same run (`make bench`, or
//! `cargo bench -p jig --bench gateway`):
//!
//! * jig: `jig up` with an app whose one task is the no-op `echo` glue, invoked with an empty body
//!   (`POST /v1/apps/noop/invoke`): a fresh WebAssembly instance per request, as on every invocation.
//! * wasmtime: `wasmtime serve -S cli` (wasmtime-cli 48 from crates.io), as it comes and with
//!   `-O pooling-allocator=y` (the faster is the reference), running `jig_http_noop.wasm`, a
//!   wasi:http component that answers 200 with an empty body: also a fresh instance per request.
//!
//! Both are driven by the same closed-loop load generator (`jig_client::load`) on loopback: `CONNECTIONS`
//! keep-alive connections for `SECONDS` each (env `BENCH_CONNECTIONS`, `BENCH_SECONDS`), after a one-second
//! warm-up. Prints requests/s and p50/p99 of each and the throughput ratio against the faster wasmtime
//! (target ≥ 0.8).
//!
//! Needs the components from `make functions` and `wasmtime` in `.jig/tools/bin` (`make bench` installs it)
//! or on the PATH.
//!
//! `BENCH_REPLICAS=1` measures gateway replicas instead: etcd and two `jig up` sharing one cluster (the no-op
//! app deployed through one), driven through one gateway with all the connections, then through both with half
//! each, at once. Needs `etcd` (`make setup` installs it).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hyper::Method;
use jig_client::load::{LoadReport, Target, closed_loop};
use jig_test_support::{Etcd, Process};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn start_jig(state: &Path, extra: &[&str]) -> (Process, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jig"))
        .args(["up", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state)
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting jig");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.split("http://").nth(1).and_then(|r| r.split_whitespace().next()).expect("jig's address");
    (Process(child), addr.parse().unwrap())
}

fn wasmtime() -> PathBuf {
    let local = root().join(".jig/tools/bin/wasmtime");
    if local.exists() { local } else { PathBuf::from("wasmtime") }
}

fn start_wasmtime(component: &Path, options: &[&str]) -> (Process, SocketAddr) {
    let addr: SocketAddr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    let child = Command::new(wasmtime())
        // `-S cli`: the Rust standard library of a wasip2 component imports wasi:cli (environment, stdio).
        .args(["serve", "-S", "cli", "--addr", &addr.to_string()])
        .args(options)
        .arg(component)
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}; `make bench` installs it", wasmtime().display()));
    let started = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "wasmtime serve did not start listening on {addr}");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Process(child), addr)
}

/// Deploy the no-op app to the gateway at `addr`.
fn deploy_noop(addr: SocketAddr, dir: &Path) {
    std::fs::create_dir_all(dir.join("glue")).unwrap();
    std::fs::copy(root().join("target/wasm32-wasip2/release/echo.wasm"), dir.join("glue/echo.wasm"))
        .expect("echo.wasm; build the components with `make functions`");
    std::fs::write(dir.join("jig.toml"), "name = \"noop\"\n[[tasks]]\nname = \"echo\"\nglue = \"glue/echo.wasm\"\n")
        .unwrap();
    let archive = jig_manifest::pack(&jig_manifest::Bundle::open(dir).unwrap()).unwrap();
    let client = jig_client::Client::new(&format!("http://{addr}"), None).unwrap();
    let answer = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(client.send(Method::POST, "/v1/apps", &[], archive.into(), None))
        .unwrap();
    assert!(answer.status.is_success(), "deploy failed: {}", answer.error_message());
}

fn drive(target: &Target, connections: usize, seconds: f64) -> LoadReport {
    // One thread for the load generator, leaving the rest of the machine to the server.
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    tokio.block_on(closed_loop(target, connections, Duration::from_secs(1)));
    tokio.block_on(closed_loop(target, connections, Duration::from_secs_f64(seconds)))
}

fn line(name: &str, r: &LoadReport) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "  {name:<16} {:>9.0} req/s   p50 {:>6.2} ms   p99 {:>6.2} ms   ({} ok, {} errors)",
        r.throughput(),
        ms(r.quantile(0.5)),
        ms(r.quantile(0.99)),
        r.ok,
        r.errors
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a plain `cargo test --benches` run passes nothing and expects no work.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let connections: usize = env_or("BENCH_CONNECTIONS", 16);
    let seconds: f64 = env_or("BENCH_SECONDS", 5.0);
    let scratch = tempfile::tempdir().unwrap();

    if std::env::var("BENCH_REPLICAS").is_ok() {
        return replicas(scratch.path(), connections, seconds);
    }
    let (jig_server, jig_addr) = start_jig(&scratch.path().join("state"), &[]);
    deploy_noop(jig_addr, &scratch.path().join("bundle"));
    let jig = drive(
        &Target { addr: jig_addr, method: Method::POST, path: "/v1/apps/noop/invoke".into(), body: Default::default() },
        connections,
        seconds,
    );
    drop(jig_server);

    // `wasmtime serve` as it comes, and with the pooling allocator jig uses: the faster one is the reference.
    let component = root().join("target/wasm32-wasip2/release/jig_http_noop.wasm");
    let mut references = Vec::new();
    for (name, options) in [("wasmtime serve", &[][..]), ("  … -O pooling", &["-O", "pooling-allocator=y"][..])] {
        let (server, addr) = start_wasmtime(&component, options);
        let target = Target { addr, method: Method::GET, path: "/".into(), body: Default::default() };
        references.push((name, drive(&target, connections, seconds)));
        drop(server);
    }

    println!("\nno-op function over HTTP on loopback, {connections} connections, {seconds} s each (closed loop):");
    line("jig gateway", &jig);
    for (name, report) in &references {
        line(name, report);
    }
    let best = references.iter().map(|(_, r)| r.throughput()).fold(0.0, f64::max);
    println!("  throughput ratio jig / the faster wasmtime serve: {:.2}   (target ≥ 0.8)", jig.throughput() / best);
}

/// One gateway against two replicas of one cluster, on the no-op app (see the module docs).
fn replicas(scratch: &Path, connections: usize, seconds: f64) {
    let etcd = Etcd::start(&scratch.join("etcd"));
    let url = &etcd.url;
    let config = scratch.join("gateway.toml");
    std::fs::write(&config, format!("etcd = [\"{url}\"]\n")).unwrap();
    let state = scratch.join("state");
    let start = || start_jig(&state, &["--config", config.to_str().unwrap()]);
    let ((_first, a), (_second, b)) = (start(), start());
    deploy_noop(a, &scratch.join("bundle"));
    let target =
        |addr| Target { addr, method: Method::POST, path: "/v1/apps/noop/invoke".into(), body: Default::default() };
    let started = Instant::now();
    while drive(&target(b), 1, 0.1).ok == 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "the second replica never ran the app");
    }
    let one = drive(&target(a), connections, seconds);
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let half = connections.div_ceil(2);
    let (ta, tb) = (target(a), target(b));
    let (ra, rb) = tokio.block_on(async {
        let warm = Duration::from_secs(1);
        tokio::join!(closed_loop(&ta, half, warm), closed_loop(&tb, half, warm));
        let run = Duration::from_secs_f64(seconds);
        tokio::join!(closed_loop(&ta, half, run), closed_loop(&tb, half, run))
    });
    println!("\nno-op app, {connections} connections, {seconds} s each (closed loop), gateways of one etcd cluster:");
    line("one gateway", &one);
    line("replica a", &ra);
    line("replica b", &rb);
    let both = ra.throughput() + rb.throughput();
    println!("  two replicas together: {both:.0} req/s, {:.2}× one gateway", both / one.throughput());
}
