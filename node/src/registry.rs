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

/// A client of etcd at `endpoints`, failing within seconds when it is unreachable (HTTP/2 pings; no request
/// timeout, which would cut a long wait short).
pub async fn connect(endpoints: &[String]) -> Result<Client, etcd_client::Error> {
    let options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_keep_alive(Duration::from_secs(3), Duration::from_secs(3))
        .with_keep_alive_while_idle(true);
    Client::connect(endpoints, Some(options)).await
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
