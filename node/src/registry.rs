//! Nodes registered in the cluster state (etcd), for gateway replicas to find them: `jig node --etcd …`
//! keeps `/jig/nodes/<name>` (its address) on a lease for as long as it runs, and re-registers when etcd comes
//! back; a node that dies (or loses etcd) drops out when its lease lapses, within [`LEASE_TTL`] seconds.
//! Gateways read the registrations beside their own `nodes` list.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions, GetOptions, PutOptions};
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

/// A client of etcd at `endpoints`, failing within seconds when it is unreachable (HTTP/2 pings; no request
/// timeout, which would cut a long wait short). It authenticates as [`USER_ENV`] with the password in
/// [`PASSWORD_FILE_ENV`] when both are set (a file, as a Kubernetes secret mounts it, not a variable that `ps`
/// and crash reports show).
pub async fn connect(endpoints: &[String]) -> Result<Client, etcd_client::Error> {
    let mut options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_keep_alive(Duration::from_secs(3), Duration::from_secs(3))
        .with_keep_alive_while_idle(true);
    let env = |name: &str| std::env::var(name).ok();
    if let Some((user, password)) = credentials(env).map_err(etcd_client::Error::InvalidArgs)? {
        options = options.with_user(user, password);
    }
    Client::connect(endpoints, Some(options)).await
}

/// The etcd user and password the environment (`env`) names, if it names a user.
fn credentials(env: impl Fn(&str) -> Option<String>) -> Result<Option<(String, String)>, String> {
    let Some(user) = env(USER_ENV) else { return Ok(None) };
    let file = env(PASSWORD_FILE_ENV).ok_or_else(|| {
        format!("{USER_ENV} is set but {PASSWORD_FILE_ENV} is not: name the file holding its password")
    })?;
    let password = std::fs::read_to_string(&file)
        .map_err(|e| format!("cannot read the etcd password from {file} ({PASSWORD_FILE_ENV}): {e}"))?;
    Ok(Some((user, password.trim_end_matches(['\n', '\r']).to_string())))
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

    #[test]
    fn etcd_credentials_come_from_a_user_and_a_password_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "s3cret\n").unwrap();
        let file = file.to_str().unwrap().to_string();
        let env = |vars: Vec<(&'static str, String)>| {
            move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
        };
        assert_eq!(credentials(env(vec![])), Ok(None), "no user: no authentication");
        let both = env(vec![(USER_ENV, "jig".into()), (PASSWORD_FILE_ENV, file)]);
        assert_eq!(credentials(both), Ok(Some(("jig".into(), "s3cret".into()))), "the newline is not the password's");
        let no_file = credentials(env(vec![(USER_ENV, "jig".into())])).unwrap_err();
        assert!(no_file.contains(PASSWORD_FILE_ENV), "{no_file}");
        let missing = env(vec![(USER_ENV, "jig".into()), (PASSWORD_FILE_ENV, "/no/such/file".into())]);
        assert!(credentials(missing).unwrap_err().contains("/no/such/file"));
    }
}
