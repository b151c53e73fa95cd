//! Nodes registered in the cluster state (etcd), for gateway replicas to find them: `jig node --etcd …`
//! keeps `/jig/nodes/<name>` (its address) on a lease for as long as it runs, and re-registers when etcd comes
//! back; a node that dies (or loses etcd) drops out when its lease lapses, within [`LEASE_TTL`] seconds.
//! Gateways read the registrations beside their own `nodes` list.

use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, GetOptions, Identity, PutOptions, TlsOptions};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use serde::{Deserialize, Serialize};

/// Where registrations live.
pub const PREFIX: &str = "/jig/nodes/";

/// Seconds a registration outlives its node.
pub const LEASE_TTL: i64 = 6;

/// A node as it registers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registration {
    /// Its name.
    pub name: String,
    /// Where gateways reach it, `HOST:PORT`.
    pub addr: String,
}

/// The etcd user and the file holding its password, for a cluster whose etcd has authentication enabled.
pub const USER_ENV: &str = "JIG_ETCD_USER";
/// See [`USER_ENV`].
pub const PASSWORD_FILE_ENV: &str = "JIG_ETCD_PASSWORD_FILE";
/// The PEM file of the CA that signed etcd's server certificate: with it, etcd is reached in TLS (`https://`
/// endpoints) and its certificate is checked against this CA alone.
pub const CA_FILE_ENV: &str = "JIG_ETCD_CA_FILE";
/// A client certificate (PEM, with [`KEY_FILE_ENV`]'s key) for an etcd that checks its clients'
/// (`--client-cert-auth`); needs [`CA_FILE_ENV`].
pub const CERT_FILE_ENV: &str = "JIG_ETCD_CERT_FILE";
/// See [`CERT_FILE_ENV`].
pub const KEY_FILE_ENV: &str = "JIG_ETCD_KEY_FILE";

/// A client of etcd at `endpoints`, failing within seconds when it is unreachable (HTTP/2 pings; no request
/// timeout, which would cut a long wait short). It authenticates as [`USER_ENV`] with the password in
/// [`PASSWORD_FILE_ENV`] when both are set, and speaks TLS, checking etcd against the CA in [`CA_FILE_ENV`]
/// (and showing the client certificate in [`CERT_FILE_ENV`] and [`KEY_FILE_ENV`]), when that is set: files, as a
/// Kubernetes secret mounts them, not variables that `ps` and crash reports show.
pub async fn connect(endpoints: &[String]) -> Result<Client, etcd_client::Error> {
    let env = |name: &str| std::env::var(name).ok();
    let access = EtcdAccess::from_env(env).map_err(etcd_client::Error::InvalidArgs)?;
    access.check(endpoints).map_err(etcd_client::Error::InvalidArgs)?;
    let mut options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_keep_alive(Duration::from_secs(3), Duration::from_secs(3))
        .with_keep_alive_while_idle(true);
    if let Some((user, password)) = access.credentials {
        options = options.with_user(user, password);
    }
    if let Some(tls) = access.tls {
        let mut options_tls = TlsOptions::new().ca_certificate(Certificate::from_pem(tls.ca));
        if let Some((cert, key)) = tls.identity {
            options_tls = options_tls.identity(Identity::from_pem(cert, key));
        }
        options = options.with_tls(options_tls);
    }
    Client::connect(endpoints, Some(options)).await
}

/// How to reach etcd, as the environment says: files read and checked before any connection.
#[derive(Default, PartialEq)]
struct EtcdAccess {
    /// The user and its password ([`USER_ENV`], [`PASSWORD_FILE_ENV`]).
    credentials: Option<(String, String)>,
    /// TLS ([`CA_FILE_ENV`], [`CERT_FILE_ENV`], [`KEY_FILE_ENV`]); `None`: in clear.
    tls: Option<EtcdTls>,
}

/// TLS to etcd: the PEM files' contents.
#[derive(PartialEq)]
struct EtcdTls {
    /// The CA certificates etcd's certificate is checked against.
    ca: Vec<u8>,
    /// The client certificate (chain) and its private key.
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

// By hand: a password or a private key never reaches a log or a test's failure message.
impl std::fmt::Debug for EtcdAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let user = self.credentials.as_ref().map(|(user, _)| user);
        f.debug_struct("EtcdAccess").field("user", &user).field("tls", &self.tls.is_some()).finish_non_exhaustive()
    }
}

impl EtcdAccess {
    /// What the environment (`env`) says: a user with a password file, TLS with a CA file (and a client
    /// certificate and key), each optional; a variable that needs another it lacks, or a file that cannot be
    /// read or is not PEM, is an error naming the variable (and the file).
    fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<EtcdAccess, String> {
        let credentials = match env(USER_ENV) {
            None => None,
            Some(user) => {
                let file = env(PASSWORD_FILE_ENV).ok_or_else(|| {
                    format!("{USER_ENV} is set but {PASSWORD_FILE_ENV} is not: name the file holding its password")
                })?;
                let password = std::fs::read_to_string(&file)
                    .map_err(|e| format!("cannot read the etcd password from {file} ({PASSWORD_FILE_ENV}): {e}"))?;
                Some((user, password.trim_end_matches(['\n', '\r']).to_string()))
            }
        };
        let identity = match (env(CERT_FILE_ENV), env(KEY_FILE_ENV)) {
            (None, None) => None,
            (Some(cert_file), Some(key_file)) => Some(client_identity(&cert_file, &key_file)?),
            _ => {
                return Err(format!(
                    "{CERT_FILE_ENV} and {KEY_FILE_ENV} go together (etcd's client certificate and its key): \
                     set both or neither"
                ));
            }
        };
        let tls = match (env(CA_FILE_ENV), identity) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(format!(
                    "{CERT_FILE_ENV} and {KEY_FILE_ENV} are for TLS to etcd, which also needs {CA_FILE_ENV}: name \
                     the PEM file of the CA that signed etcd's certificate"
                ));
            }
            (Some(ca_file), identity) => {
                let ca = read_pem(&ca_file, CA_FILE_ENV)?;
                // Checked here: etcd-client would skip a certificate it cannot use, and then refuse every server.
                let mut roots = rustls::RootCertStore::empty();
                for cert in certificates(&ca, &ca_file, CA_FILE_ENV)? {
                    roots.add(cert).map_err(|e| format!("{ca_file} ({CA_FILE_ENV}): not a CA certificate: {e}"))?;
                }
                Some(EtcdTls { ca, identity })
            }
        };
        Ok(EtcdAccess { credentials, tls })
    }

    /// Whether `endpoints` fit: `https://` with TLS, `http://` without; a bare `HOST:PORT` takes the scheme
    /// the TLS setting gives it (etcd-client's rule, which otherwise refuses `http://` with TLS in words that
    /// do not name the variable, and tries `https://` without a CA to check the server against).
    fn check(&self, endpoints: &[String]) -> Result<(), String> {
        for endpoint in endpoints {
            match (endpoint.starts_with("http://"), endpoint.starts_with("https://"), &self.tls) {
                (true, _, Some(_)) => {
                    return Err(format!(
                        "{CA_FILE_ENV} is set, so etcd is reached in TLS, but the endpoint {endpoint} says \
                         http://: write it as https://{}",
                        &endpoint["http://".len()..]
                    ));
                }
                (_, true, None) => {
                    return Err(format!(
                        "the etcd endpoint {endpoint} is https:// (TLS), but {CA_FILE_ENV} is not set: name the \
                         PEM file of the CA that signed etcd's certificate"
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The client certificate in `cert_file` and its key in `key_file` (PEM both), checked to belong together.
fn client_identity(cert_file: &str, key_file: &str) -> Result<(Vec<u8>, Vec<u8>), String> {
    let cert = read_pem(cert_file, CERT_FILE_ENV)?;
    let key = read_pem(key_file, KEY_FILE_ENV)?;
    let chain = certificates(&cert, cert_file, CERT_FILE_ENV)?;
    let key_der = PrivateKeyDer::from_pem_slice(&key).map_err(|e| {
        format!("{key_file} ({KEY_FILE_ENV}) holds no PEM private key (`-----BEGIN PRIVATE KEY-----`): {e}")
    })?;
    CertifiedKey::from_der(chain, key_der, &rustls::crypto::ring::default_provider()).map_err(|e| {
        format!(
            "the key in {key_file} ({KEY_FILE_ENV}) does not fit the certificate in {cert_file} ({CERT_FILE_ENV}): {e}"
        )
    })?;
    Ok((cert, key))
}

/// The file `file` names, which the variable `var` named.
fn read_pem(file: &str, var: &str) -> Result<Vec<u8>, String> {
    std::fs::read(file).map_err(|e| format!("cannot read {file} ({var}): {e}"))
}

/// The certificates in `pem` (the file `file`, which `var` named): at least one.
fn certificates(pem: &[u8], file: &str, var: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    crate::tls::pem_certificates(pem, &format!("{file} ({var})"))
}

/// Keep `registration` in etcd at `endpoints` for as long as this runs (forever): on a lease kept alive every
/// two seconds, registered again whenever the lease is lost.
pub async fn register(endpoints: Vec<String>, registration: Registration) {
    let key = format!("{PREFIX}{}", registration.name);
    let Ok(value) = serde_json::to_vec(&registration) else { return };
    loop {
        if let Err(e) = registered_while_alive(&endpoints, &key, &value).await {
            tracing::warn!("node registration in etcd ({}) lost: {e}; trying again", endpoints.join(", "));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn registered_while_alive(endpoints: &[String], key: &str, value: &[u8]) -> Result<(), etcd_client::Error> {
    let mut client = connect(endpoints).await?;
    let lease = client.lease_grant(LEASE_TTL, None).await?.id();
    client.put(key, value, Some(PutOptions::new().with_lease(lease))).await?;
    tracing::info!(%key, "registered in etcd");
    let (mut keeper, mut answers) = client.lease_keep_alive(lease).await?;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        keeper.keep_alive().await?;
        match answers.message().await? {
            Some(answer) if answer.ttl() > 0 => {}
            _ => return Ok(()), // lapsed: register again
        }
    }
}

/// The nodes registered now.
pub async fn registered(client: &mut Client) -> Result<Vec<Registration>, etcd_client::Error> {
    let answer = client.get(PREFIX, Some(GetOptions::new().with_prefix())).await?;
    Ok(answer.kvs().iter().filter_map(|kv| serde_json::from_slice(kv.value()).ok()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An environment of `vars` alone.
    fn env(vars: Vec<(&'static str, String)>) -> impl Fn(&str) -> Option<String> {
        move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
    }

    /// `text` in the file `name` under `dir`; its path.
    fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    }

    #[test]
    fn etcd_credentials_come_from_a_user_and_a_password_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = file(&dir, "password", "s3cret\n");
        let credentials = |vars| EtcdAccess::from_env(env(vars)).map(|access| access.credentials);
        assert_eq!(EtcdAccess::from_env(env(vec![])), Ok(EtcdAccess::default()), "nothing set: no auth, no TLS");
        let both = vec![(USER_ENV, "jig".into()), (PASSWORD_FILE_ENV, file)];
        assert_eq!(credentials(both), Ok(Some(("jig".into(), "s3cret".into()))), "the newline is not the password's");
        let no_file = credentials(vec![(USER_ENV, "jig".into())]).unwrap_err();
        assert!(no_file.contains(PASSWORD_FILE_ENV), "{no_file}");
        let missing = vec![(USER_ENV, "jig".into()), (PASSWORD_FILE_ENV, "/no/such/file".into())];
        assert!(credentials(missing).unwrap_err().contains("/no/such/file"));
    }

    #[test]
    fn etcd_tls_comes_from_a_ca_file_and_optionally_a_client_certificate_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = params.self_signed(&ca_key).unwrap();
        let client_key = rcgen::KeyPair::generate().unwrap();
        let client_cert = rcgen::CertificateParams::new(vec!["jig".into()])
            .unwrap()
            .signed_by(&client_key, &ca_cert, &ca_key)
            .unwrap();
        let ca = file(&dir, "ca.pem", &ca_cert.pem());
        let cert = file(&dir, "client.pem", &client_cert.pem());
        let key = file(&dir, "client-key.pem", &client_key.serialize_pem());
        let other_key = file(&dir, "other-key.pem", &rcgen::KeyPair::generate().unwrap().serialize_pem());
        let not_pem = file(&dir, "not.pem", "not a certificate\n");
        let bad_der = file(&dir, "bad.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
        let from = |vars: &[(&'static str, &String)]| {
            EtcdAccess::from_env(env(vars.iter().map(|(k, v)| (*k, v.to_string())).collect()))
        };

        // The CA alone: TLS, checking etcd, with no client certificate.
        let alone = from(&[(CA_FILE_ENV, &ca)]).unwrap().tls.unwrap();
        assert_eq!((alone.ca, alone.identity), (ca_cert.pem().into_bytes(), None));
        // With a client certificate.
        let full = from(&[(CA_FILE_ENV, &ca), (CERT_FILE_ENV, &cert), (KEY_FILE_ENV, &key)]).unwrap().tls.unwrap();
        assert_eq!(full.identity, Some((client_cert.pem().into_bytes(), client_key.serialize_pem().into_bytes())));

        let error = |vars: &[(&'static str, &String)]| from(vars).unwrap_err();
        let no_key = error(&[(CA_FILE_ENV, &ca), (CERT_FILE_ENV, &cert)]);
        assert!(no_key.contains(CERT_FILE_ENV) && no_key.contains(KEY_FILE_ENV), "{no_key}");
        let no_cert = error(&[(CA_FILE_ENV, &ca), (KEY_FILE_ENV, &key)]);
        assert!(no_cert.contains(CERT_FILE_ENV) && no_cert.contains(KEY_FILE_ENV), "{no_cert}");
        let no_ca = error(&[(CERT_FILE_ENV, &cert), (KEY_FILE_ENV, &key)]);
        assert!(no_ca.contains(CA_FILE_ENV), "{no_ca}");
        let missing = "/no/such/ca.pem".to_string();
        let unreadable = error(&[(CA_FILE_ENV, &missing)]);
        assert!(unreadable.contains(&missing) && unreadable.contains(CA_FILE_ENV), "{unreadable}");
        let garbage = error(&[(CA_FILE_ENV, &not_pem)]);
        assert!(garbage.contains(&not_pem) && garbage.contains("PEM certificate"), "{garbage}");
        let not_a_ca = error(&[(CA_FILE_ENV, &bad_der)]);
        assert!(not_a_ca.contains(&bad_der) && not_a_ca.contains("not a CA certificate"), "{not_a_ca}");
        let key_as_cert = error(&[(CA_FILE_ENV, &ca), (CERT_FILE_ENV, &key), (KEY_FILE_ENV, &key)]);
        assert!(key_as_cert.contains(&key) && key_as_cert.contains(CERT_FILE_ENV), "{key_as_cert}");
        let cert_as_key = error(&[(CA_FILE_ENV, &ca), (CERT_FILE_ENV, &cert), (KEY_FILE_ENV, &cert)]);
        assert!(cert_as_key.contains(&cert) && cert_as_key.contains("private key"), "{cert_as_key}");
        let mismatch = error(&[(CA_FILE_ENV, &ca), (CERT_FILE_ENV, &cert), (KEY_FILE_ENV, &other_key)]);
        assert!(mismatch.contains(&other_key) && mismatch.contains("does not fit"), "{mismatch}");
    }

    #[test]
    fn endpoints_must_say_https_with_tls_and_not_without() {
        let endpoints = |list: &[&str]| list.iter().map(|e| e.to_string()).collect::<Vec<_>>();
        let tls = EtcdAccess { tls: Some(EtcdTls { ca: Vec::new(), identity: None }), ..EtcdAccess::default() };
        let clear = EtcdAccess::default();
        assert_eq!(tls.check(&endpoints(&["https://etcd:2379", "etcd-1:2379"])), Ok(()));
        assert_eq!(clear.check(&endpoints(&["http://etcd:2379", "etcd-1:2379"])), Ok(()));
        let http = tls.check(&endpoints(&["https://a:2379", "http://b:2379"])).unwrap_err();
        assert!(http.contains(CA_FILE_ENV) && http.contains("https://b:2379"), "{http}");
        let https = clear.check(&endpoints(&["https://a:2379"])).unwrap_err();
        assert!(https.contains(CA_FILE_ENV) && https.contains("https://a:2379"), "{https}");
    }
}
