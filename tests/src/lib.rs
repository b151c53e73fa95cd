//! Helpers of the end-to-end tests in `tests/tests/`: the `jig` binary, the built components and models,
//! a gateway process on a loopback port, a `jig node`, and a plain HTTP/1.1 client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `jig` binary, which `cargo test --workspace` builds for the `jig` package's own integration tests.
pub fn jig() -> Command {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
    let bin = target.join("debug/jig");
    assert!(bin.exists(), "{} is missing; run the suite with `make test`", bin.display());
    let mut cmd = Command::new(bin);
    cmd.env("JIG_CACHE_DIR", target.join("jig-test-cache"));
    cmd.env_remove("JIG_GATEWAY").env_remove("JIG_TOKEN").env_remove("JIG_STATE_DIR");
    cmd
}

/// A glue component built by `make functions`.
pub fn component(name: &str) -> PathBuf {
    root().join("target/wasm32-wasip2/release").join(format!("{name}.wasm"))
}

/// A model `make setup` generated.
pub fn model(name: &str) -> PathBuf {
    let path = root().join(".jig/models").join(format!("{name}.onnx"));
    assert!(path.is_file(), "{} is missing: run `make setup`", path.display());
    path
}

/// A bundle directory: `manifest` as its jig.toml, and `files` (name in the bundle, source) copied in.
pub fn bundle(dir: &Path, manifest: &str, files: &[(&str, &Path)]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("jig.toml"), manifest).unwrap();
    for (name, source) in files {
        let target = dir.join(name);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(source, &target).unwrap_or_else(|e| panic!("copying {}: {e}", source.display()));
    }
}

/// The probe's one-slot app `name` (task `probe` calling slot `classifier`, variant `fast` on the `mlp` model
/// with `accuracy`, SLO 1 s) in `dir`, with `profiles` as its `profiles.csv` (none when `None`). Another
/// accuracy makes another bundle.
pub fn probe_app(dir: &Path, name: &str, accuracy: f64, profiles: Option<&str>) {
    let manifest = format!(
        r#"
name = "{name}"
[slo]
latency_ms = 1000
accuracy = 0.5

[[tasks]]
name = "probe"
glue = "glue/probe.wasm"
slot = "classifier"

[[variants]]
slot = "classifier"
name = "fast"
model = "models/mlp.onnx"
accuracy = {accuracy}
"#
    );
    bundle(dir, &manifest, &[("glue/probe.wasm", &component("jig_probe")), ("models/mlp.onnx", &model("mlp"))]);
    if let Some(profiles) = profiles {
        std::fs::write(dir.join("profiles.csv"), profiles).unwrap();
    }
}

/// `etcd` on loopback with its data in `dir`, killed when dropped (`make setup` installs it).
pub struct Etcd {
    _process: Process,
    /// Its client URL, `http://127.0.0.1:PORT` (`https://` with TLS).
    pub url: String,
}

impl Etcd {
    /// Start it on two free ports and wait until it takes connections.
    pub fn start(dir: &Path) -> Etcd {
        Self::start_with(dir, "http", &[])
    }

    /// [`Etcd::start`], serving its clients TLS with the certificate `cert` and its key `key` (PEM files); with
    /// `client_ca`, only to clients showing a certificate that CA signed (`--client-cert-auth`).
    pub fn start_tls(dir: &Path, cert: &Path, key: &Path, client_ca: Option<&Path>) -> Etcd {
        let mut args =
            vec!["--cert-file".into(), cert.as_os_str().to_owned(), "--key-file".into(), key.as_os_str().to_owned()];
        if let Some(ca) = client_ca {
            args.extend(["--client-cert-auth".into(), "--trusted-ca-file".into(), ca.as_os_str().to_owned()]);
        }
        Self::start_with(dir, "https", &args)
    }

    fn start_with(dir: &Path, scheme: &str, args: &[std::ffi::OsString]) -> Etcd {
        let free_port = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let (client, peer) = (free_port(), free_port());
        let url = format!("{scheme}://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let child = Command::new("etcd")
            .args(["--name", "jig", "--data-dir"])
            .arg(dir)
            .args(["--listen-client-urls", &url, "--advertise-client-urls", &url])
            .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("jig={peer_url}")])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd is missing: `make setup` installs it (Debian's etcd-server)");
        let process = Process(child);
        let started = std::time::Instant::now();
        while TcpStream::connect(("127.0.0.1", client)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(20), "etcd did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Etcd { _process: process, url }
    }
}

/// A child process, killed when dropped (a failing test leaves none behind).
pub struct Process(pub Child);

impl Process {
    /// Kill it (`kill -9`) and reap it.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `jig node` on `listen` (port 0: a free one) with one core, the token in the file `token`, its model cache in
/// `dir/cache` and its name `dir`'s, with `args` added; the process and the address it printed.
pub fn start_node(dir: &Path, listen: &str, token: &Path, args: &[&str]) -> (Process, String) {
    start_node_with_env(dir, listen, token, args, &[])
}

/// [`start_node`] with environment variables set for the node.
pub fn start_node_with_env(
    dir: &Path,
    listen: &str,
    token: &Path,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> (Process, String) {
    std::fs::create_dir_all(dir).unwrap();
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("node");
    let mut child = jig()
        .args(["node", "--listen", listen, "--name", name, "--cores", "1", "--token-file"])
        .arg(token)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("`jig node` printed {line:?}, not its address"));
    (Process(child), addr.to_string())
}

/// A `jig up` process on a free loopback port. Killed when dropped.
pub struct Gateway {
    pub child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Gateway {
    /// Start `jig up` with state in `state` and `args` added.
    pub fn start(state: &Path, args: &[&str]) -> Gateway {
        Self::start_with_env(state, args, &[])
    }

    /// [`Gateway::start`] with environment variables set for the gateway (and the processes it starts).
    pub fn start_with_env(state: &Path, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Gateway {
        let mut child = jig()
            .args(["up", "--listen", "127.0.0.1:0", "--state-dir"])
            .arg(state)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("the gateway did not say where it listens: {line:?}"))
            .to_string();
        Gateway { child, addr }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `jig COMMAND` aimed at this gateway.
    pub fn jig(&self, command: &str) -> Command {
        let mut cmd = jig();
        cmd.args([command, "--gateway"]).arg(self.url());
        cmd
    }

    /// Send one request; returns the status, the headers (names lowercase) and the body.
    pub fn http(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        http(&self.addr, method, path, headers, body)
    }

    /// `SIGKILL`, as a crash would.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body as one of the API's types (`jig_api`).
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> T {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("not a {} ({e}): {}", std::any::type_name::<T>(), String::from_utf8_lossy(&self.body))
        })
    }

    /// The error body of a failed call, checked to carry the status its kind sets.
    pub fn error(&self) -> jig_api::ErrorBody {
        let body: jig_api::ErrorBody = self.parse();
        assert_eq!(body.kind.status(), self.status, "kind {:?} answered with {}", body.kind, self.status);
        body
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 request over a fresh connection.
pub fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n", body.len());
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    // The gateway may answer (413) before reading everything; a reset then is not the test's concern.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer to {method} {path}: {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply { status, headers, body: raw[split + 4..].to_vec() }
}

/// A CA, and in `dir` its certificate `ca.pem`, a server certificate for `server_names` it signed (`server.pem`,
/// `server-key.pem`) and a client certificate it signed (`client.pem`, `client-key.pem`).
pub fn certificates(dir: &Path, server_names: &[&str]) {
    use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair};
    std::fs::create_dir_all(dir).unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let server_names: Vec<String> = server_names.iter().map(|n| n.to_string()).collect();
    for (name, sans, usage) in [
        ("server", server_names, ExtendedKeyUsagePurpose::ServerAuth),
        ("client", vec!["jig".to_string()], ExtendedKeyUsagePurpose::ClientAuth),
    ] {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(sans).unwrap();
        params.extended_key_usages = vec![usage];
        std::fs::write(dir.join(format!("{name}.pem")), params.signed_by(&key, &ca, &ca_key).unwrap().pem()).unwrap();
        std::fs::write(dir.join(format!("{name}-key.pem")), key.serialize_pem()).unwrap();
    }
}
