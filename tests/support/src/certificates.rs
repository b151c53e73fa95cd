//! Certificates for the TLS tests, made on the spot.

use std::path::Path;

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
