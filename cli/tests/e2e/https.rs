//! `jig` to a gateway over `https://`, as behind an Ingress: a TLS-terminating proxy on loopback in front of a
//! gateway, its certificate signed by a private CA given with `--gateway-ca`.

use std::path::Path;
use std::sync::Arc;

use jig_test_support::{Gateway, certificates, jig};

/// A TLS proxy to `backend` on a free loopback port, serving `dir`'s server certificate; its port.
fn tls_proxy(dir: &Path, backend: String) -> u16 {
    use rustls_pki_types::pem::PemObject;
    let certs = rustls_pki_types::CertificateDer::pem_file_iter(dir.join("server.pem")).unwrap();
    let certs: Vec<_> = certs.map(Result::unwrap).collect();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_file(dir.join("server-key.pem")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((client, _)) = listener.accept().await else { return };
                let (acceptor, backend) = (acceptor.clone(), backend.clone());
                tokio::spawn(async move {
                    let Ok(mut client) = acceptor.accept(client).await else { return };
                    let Ok(mut server) = tokio::net::TcpStream::connect(&backend).await else { return };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
            }
        });
    });
    port
}

#[test]
fn jig_reaches_a_gateway_over_https_trusting_the_ca_it_is_given() {
    let (state, pki) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    certificates(pki.path(), &["localhost"]);
    let gateway = Gateway::start(state.path(), &[]);
    let port = tls_proxy(pki.path(), gateway.addr.clone());
    let url = format!("https://localhost:{port}");
    let ca = pki.path().join("ca.pem");

    let listed = jig().args(["apps", "--gateway", &url, "--gateway-ca"]).arg(&ca).output().unwrap();
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));

    // Without the CA the system's authorities do not vouch for it: unreachable (3), saying why.
    let untrusted = jig().args(["apps", "--gateway", &url]).output().unwrap();
    let said = String::from_utf8_lossy(&untrusted.stderr);
    assert_eq!(untrusted.status.code(), Some(3), "{said}");
    assert!(said.contains("certificate"), "{said}");
    // A CA with a plain http:// URL would go unused: refused.
    let plain = jig().args(["apps", "--gateway", &gateway.url(), "--gateway-ca"]).arg(&ca).output().unwrap();
    assert!(!plain.status.success());
    assert!(String::from_utf8_lossy(&plain.stderr).contains("give its https:// URL"));
}
