//! What one client can hold of a gateway: body limits, header and body timeouts, connection caps over HTTP and
//! gRPC, deadlines; and that a refusal or a compressed body is still read as the protocol says.

use super::plans::two_at_once_app;
use super::*;

#[test]
fn oversized_uploads_truncated_bodies_and_vanishing_clients_leave_the_gateway_serving() {
    use std::io::Write;
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    probe_bundle(dir.path(), "probe");
    let gateway = start_with_config(state.path(), "max_bundle_mib = 1\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));

    let upload = gateway.http("POST", "/v1/apps", &[], &vec![0u8; 2 << 20]);
    assert_eq!(upload.status, 413, "{}", upload.text());
    assert!(upload.text().contains("bundle upload"));

    // A body that stops short of its declared length.
    let mut stream = std::net::TcpStream::connect(&gateway.addr).unwrap();
    write!(stream, "POST /v1/apps/probe/invoke HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n{{\"op\"").unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    drop(stream);

    // A client that goes away while its request spins: the request is cancelled, not left running.
    let mut stream = std::net::TcpStream::connect(&gateway.addr).unwrap();
    let body = br#"{"op": "spin"}"#;
    write!(
        stream,
        "POST /v1/apps/probe/invoke HTTP/1.1\r\nhost: x\r\njig-timeout-ms: 20000\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let in_flight = r#"jig_requests_in_flight{app="probe"}"#;
    assert!(gateway.http("GET", "/metrics", &[], b"").text().contains(&format!("{in_flight} 1")));
    drop(stream);
    let started = Instant::now();
    loop {
        let metrics = gateway.http("GET", "/metrics", &[], b"").text();
        if metrics.contains(&format!("{in_flight} 0")) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(3), "the abandoned request still runs: {metrics}");
        std::thread::sleep(Duration::from_millis(50));
    }

    let echo = gateway.http("POST", "/v1/apps/probe/invoke", &[], br#"{"op": "echo", "text": "1"}"#);
    assert_eq!(echo.status, 200, "{}", echo.text());
}

#[test]
fn a_client_that_never_finishes_its_headers_is_cut_off_and_frees_its_connection() {
    use std::io::{Read, Write};
    let scratch = tempfile::tempdir().unwrap();
    // One connection at a time: while the slow client holds it, nobody else is served.
    let gateway = start_with_config(scratch.path(), "header_timeout_s = 1.0\nmax_connections = 1\n");
    let mut slow = std::net::TcpStream::connect(&gateway.addr).unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));

    // Served once the slow client's header timeout closes its connection; without it, no answer comes.
    let reply = gateway.http("GET", "/healthz", &[], b"");
    assert_eq!(reply.status, 200, "{}", reply.text());

    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rest = Vec::new();
    let read = slow.read_to_end(&mut rest);
    assert!(read.is_ok(), "the slow client's connection should be closed, not left open: {read:?}");
}

#[test]
fn grpc_connections_count_against_the_same_caps_as_http_ones() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    let scratch = tempfile::tempdir().unwrap();
    // One connection a peer: a client that holds an HTTP connection gets no gRPC one. Room for more in all, so
    // that the gRPC listener always holds a permit and refuses the connection at once: with two in all, it could
    // wait in the backlog for the HTTP connection's permit and be served when that one's header timeout ended it.
    let config =
        "max_connections = 8\nmax_connections_per_peer = 1\nheader_timeout_s = 6.0\ngrpc_listen = \"127.0.0.1:0\"\n";
    let gateway = start_with_config(scratch.path(), config);
    let grpc = gateway.grpc_addr.clone().expect("the gateway serves gRPC on `grpc_listen`");
    // HTTP/2's client preface and an empty SETTINGS frame: a server that serves the connection answers with its own.
    let answered = |mut stream: TcpStream| {
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0");
        stream.read(&mut [0u8; 64]).unwrap_or(0)
    };
    // An HTTP connection kept open after its answer, so surely accepted (and for the header timeout at most).
    let mut http = TcpStream::connect(&gateway.addr).unwrap();
    http.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    assert!(http.read(&mut [0u8; 256]).unwrap() > 0);
    assert_eq!(answered(TcpStream::connect(&grpc).unwrap()), 0, "the peer's second connection was served");
    drop(http);
    std::thread::sleep(Duration::from_millis(300));
    assert!(answered(TcpStream::connect(&grpc).unwrap()) > 0, "its place, given back, was not taken by gRPC");
    // A client that connects and sends nothing is served (once the last one's place is back), closed at the
    // header timeout, and gives its place back.
    std::thread::sleep(Duration::from_millis(300));
    let mut silent = TcpStream::connect(&grpc).unwrap();
    silent.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let started = Instant::now();
    let mut settings = Vec::new();
    let _ = silent.read_to_end(&mut settings); // the server's SETTINGS, then the end (or a reset)
    assert!(!settings.is_empty(), "the silent client was closed unanswered, not served");
    assert!(started.elapsed() < Duration::from_secs(15), "still open after {:?}", started.elapsed());
    assert!(answered(TcpStream::connect(&grpc).unwrap()) > 0, "the silent client's place was not given back");
}

#[test]
fn clients_that_send_headers_and_no_body_hold_no_admission_place_and_are_cut_off() {
    use std::io::{Read, Write};
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    two_at_once_app(dir.path());
    let config = state.path().join("gateway.toml");
    std::fs::write(&config, "body_timeout_s = 1.5\n").unwrap();
    let gateway = Gateway::start(&state.path().join("state"), &["--cores", "1", "--config", config.to_str().unwrap()]);
    assert_ok(&deploy(&gateway, dir.path(), &[]));

    // Four clients announce a body, with a long timeout, and send none: before its body was read, each took an
    // admission place, and these four locked the app out.
    let stalled: Vec<std::net::TcpStream> = (0..4)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(&gateway.addr).unwrap();
            let head = "POST /v1/apps/small/invoke HTTP/1.1\r\nhost: x\r\njig-timeout-ms: 600000\r\n\
                        content-length: 100\r\n\r\n";
            c.write_all(head.as_bytes()).unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let echo = gateway.http("POST", "/v1/apps/small/invoke", &[], br#"{"op": "echo", "text": "1"}"#);
    assert_eq!(echo.status, 200, "a whole request is served beside bodies that never come: {}", echo.text());

    // Each stalled client is answered 400 at the body timeout, naming it.
    for mut c in stalled {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut answer = vec![0u8; 4096];
        let n = c.read(&mut answer).unwrap_or(0);
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("body_timeout_s"), "{answer}");
    }
}

#[test]
fn no_client_has_a_deadline_past_the_gateways_maximum() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    jig_test_support::probe_app(dir.path(), "probe", 0.7, None);
    let gateway = start_with_config(state.path(), "max_timeout_s = 2.0\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));

    // A client asks for ten minutes: its glue is given the gateway's two seconds.
    let reply =
        gateway.http("POST", "/v1/apps/probe/invoke", &[("jig-timeout-ms", "600000")], br#"{"op": "remaining"}"#);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let remaining_ns = reply.json()["outputs"][0]["json"].as_f64().unwrap();
    assert!(remaining_ns > 0.0 && remaining_ns <= 2e9, "{remaining_ns} ns left of a 600 s timeout");
}

/// A refusal before the body is read (no such app, no token, no route) is still an answer the client reads:
/// the gateway reads what the client is sending (within its limits) before it closes, rather than resetting a
/// connection that still has bytes in flight. A client that sends its whole body before it reads (httpx, as
/// KServe's client uses it) failed on the reset, without the answer.
#[test]
fn a_client_refused_before_its_body_was_read_reads_the_refusal() {
    use std::io::{Read, Write};
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("gateway.toml");
    std::fs::write(&config, "invoke_token = \"secret\"\n").unwrap();
    let gateway = Gateway::start(&state.path().join("state"), &["--config", config.to_str().unwrap()]);
    let body = vec![7u8; 16 << 20];
    for (path, auth, status) in [
        ("/v1/apps/nope/invoke", true, "404"),
        ("/v2/models/nope/infer", true, "404"),
        ("/v1/apps/nope/invoke", false, "401"),
        ("/no/such/route", false, "404"),
    ] {
        let mut stream = std::net::TcpStream::connect(&gateway.addr).unwrap();
        let auth = if auth { "authorization: Bearer secret\r\n" } else { "" };
        let head = format!("POST {path} HTTP/1.1\r\nhost: jig\r\n{auth}content-length: {}\r\n\r\n", body.len());
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&body).unwrap_or_else(|e| panic!("{path}: the gateway cut the body off: {e}"));
        let mut answer = [0u8; 12];
        stream.read_exact(&mut answer).unwrap();
        assert!(String::from_utf8_lossy(&answer).ends_with(status), "{path}: {}", String::from_utf8_lossy(&answer));
    }
}

/// A body sent with `Content-Encoding: gzip` or `deflate` (tritonclient's `request_compression_algorithm`) is
/// served as the plain one; another encoding, a body that does not decompress, and one that inflates past the
/// limit are the client's errors.
#[test]
fn compressed_bodies_are_served_as_plain_ones() {
    use std::io::Write;
    let scratch = tempfile::tempdir().unwrap();
    jig_test_support::probe_app(&scratch.path().join("app"), "squeezed", 0.7, None);
    let gateway = start_with_config(scratch.path(), "max_request_mib = 1\n");
    let deployed = gateway.jig("deploy").arg(scratch.path().join("app")).output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    let payload =
        serde_json::json!({"op": "infer-f32", "slot": "classifier", "shape": [2, 64], "values": vec![0.25; 128]});
    let plain = payload.to_string().into_bytes();
    let squeeze = |encoder: &mut dyn Write| encoder.write_all(&plain).unwrap();
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    squeeze(&mut gzip);
    let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    squeeze(&mut deflate);
    let path = "/v1/apps/squeezed/invoke";
    let expected = gateway.http("POST", path, &[], &plain);
    assert_eq!(expected.status, 200, "{}", expected.text());
    for (encoding, body) in [("gzip", gzip.finish().unwrap()), ("deflate", deflate.finish().unwrap())] {
        let reply = gateway.http("POST", path, &[("content-encoding", encoding)], &body);
        assert_eq!(reply.status, 200, "{encoding}: {}", reply.text());
        assert_eq!(reply.json()["outputs"], expected.json()["outputs"], "{encoding}");
    }
    let br = gateway.http("POST", path, &[("content-encoding", "br")], &plain);
    assert_eq!(br.status, 400, "{}", br.text());
    assert!(br.text().contains("gzip, deflate"), "{}", br.text());
    let corrupt = gateway.http("POST", path, &[("content-encoding", "gzip")], b"not gzip at all");
    assert_eq!(corrupt.status, 400, "{}", corrupt.text());
    let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    bomb.write_all(&vec![b' '; 2 << 20]).unwrap();
    let bomb = gateway.http("POST", path, &[("content-encoding", "gzip")], &bomb.finish().unwrap());
    assert_eq!(bomb.status, 413, "two MiB inflated past a one-MiB limit: {}", bomb.text());
}
