//! The processes a test starts: `jig` itself, a gateway (`jig up`), a `jig node`, etcd. Each is killed when
//! dropped, so a failing test leaves none behind.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::http::{Reply, http};

/// The `jig` binary cargo built beside the running test: the `jig` package's integration tests
/// (`cli/tests/e2e`), for which cargo builds it first (`CARGO_BIN_EXE_jig`). Its cache is the target
/// directory's, and the user's `JIG_*` settings are not inherited.
pub fn jig() -> Command {
    let bin = jig_path();
    assert!(bin.exists(), "{} is missing: these tests run as the `jig` package's (`cargo test -p jig`)", bin.display());
    let mut cmd = Command::new(&bin);
    cmd.env("JIG_CACHE_DIR", bin.parent().unwrap().join("jig-test-cache"));
    cmd.env_remove("JIG_GATEWAY").env_remove("JIG_TOKEN").env_remove("JIG_STATE_DIR");
    cmd
}

/// Where [`jig`] is: the profile's directory (`target/debug`), which holds the running test in `deps/`.
pub fn jig_path() -> PathBuf {
    let test = std::env::current_exe().expect("the running test's path");
    let profile = test.parent().and_then(Path::parent).expect("a test runs from target/PROFILE/deps");
    profile.join(format!("jig{}", std::env::consts::EXE_SUFFIX))
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
    /// Where it serves gRPC (`--grpc-listen`), `127.0.0.1:PORT`.
    pub grpc_addr: Option<String>,
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
        let grpc_addr = line.split("grpc://").nth(1).and_then(|rest| rest.split_whitespace().next()).map(String::from);
        Gateway { child, addr, grpc_addr }
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
