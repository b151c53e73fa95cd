//! Cluster state in etcd, for gateway replicas: any number of gateways serve the same apps, and one of them, the
//! leader, re-plans.
//!
//! ```text
//! /jig/apps/<app>              an app: its record and the deployment every replica runs (a `ClusterApp`, JSON)
//! /jig/leader/…                the controller's election (etcd's election API), on each replica's lease
//! /jig/demand/<app>/<replica>  the demand windows (req/s) a replica measured, on its lease
//! /jig/nodes/<node>            a `jig node --etcd` registered, on its lease (`jig_node::registry`)
//! ```
//!
//! Each replica holds a lease (kept alive every few seconds) and campaigns for leadership on it; when a leader
//! dies its lease expires and another replica is elected. A deploy (through any replica) plans the app, starts it
//! there and writes `/jig/apps/<app>`; every replica watches `/jig/apps/` and runs what it says: the same
//! deployment, whose instances run on the `jig node`s, so replicas add glue and HTTP capacity, not model copies
//! (a node shares an instance among the replicas' connections). Only the leader re-plans: from the sum of every
//! replica's demand windows, and when a node stops answering. Bundles live in the directory the replicas share
//! (`Store::open_shared`), named by their bytes' SHA-256, so a record names exactly the bundle every replica
//! loads.
//!
//! **etcd unreachable.** Replicas keep serving the apps as last seen and say so in the log; deploys and deletes
//! fail with a clear error (nothing is half-written); the leader stops re-planning once its lease lapses.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_client::{Client, EventType, GetOptions, PutOptions, WatchOptions};
use serde::{Deserialize, Serialize};

use crate::store::AppRecord;
use jig_app::Deployment;

const APPS: &str = "/jig/apps/";
const ELECTION: &str = "/jig/leader";
const DEMAND: &str = "/jig/demand/";

/// Seconds a replica's lease lives without a keep-alive: how long a dead leader holds the controller.
const LEASE_TTL: i64 = 6;

/// An app as the cluster holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterApp {
    /// Its name, bundle and demand.
    pub record: AppRecord,
    /// What every replica runs.
    pub deployment: Deployment,
}

/// A change to the cluster's apps.
#[derive(Debug)]
pub enum Change {
    /// Deployed or re-planned.
    Put(Box<ClusterApp>),
    /// Deleted.
    Deleted(String),
}

/// This replica's connection to the cluster state.
#[derive(Clone)]
pub struct Cluster {
    client: Client,
    /// Names this replica: its election value and its demand keys.
    id: String,
    /// The lease this replica's keys live on; 0 while it has none.
    lease: Arc<std::sync::atomic::AtomicI64>,
    leader: Arc<AtomicBool>,
}

impl Cluster {
    /// Connect to etcd at `endpoints` as replica `id`, and start keeping a lease and campaigning for leadership.
    pub async fn connect(endpoints: &[String], id: String) -> anyhow::Result<Cluster> {
        // No request timeout: a campaign waits as long as another replica leads (HTTP/2 pings find a dead etcd).
        let client = jig_node::registry::connect(endpoints)
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach etcd at {}: {e}", endpoints.join(", ")))?;
        let cluster = Cluster { client, id, lease: Arc::default(), leader: Arc::default() };
        tokio::spawn(cluster.clone().hold_lease());
        Ok(cluster)
    }

    /// This replica's name.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether this replica leads (runs the controller) now.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::SeqCst)
    }

    /// Keep a lease and campaign on it, forever: when the lease lapses (etcd unreachable), leadership ends and a
    /// new lease campaigns again.
    async fn hold_lease(self) {
        let mut client = self.client.clone();
        loop {
            let lease = match client.lease_grant(LEASE_TTL, None).await {
                Ok(granted) => granted.id(),
                Err(e) => {
                    tracing::warn!("cluster state (etcd) unreachable: {e}; serving the apps as last seen");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    continue;
                }
            };
            self.lease.store(lease, Ordering::SeqCst);
            let (mut keeper, mut answers) = match client.lease_keep_alive(lease).await {
                Ok(kept) => kept,
                Err(e) => {
                    tracing::warn!("cannot keep the cluster lease alive: {e}; trying again");
                    self.lease.store(0, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    continue;
                }
            };
            let mut campaigner = client.clone();
            let campaign = campaigner.campaign(ELECTION, self.id.clone(), lease);
            tokio::pin!(campaign);
            let mut ticks = tokio::time::interval(Duration::from_secs((LEASE_TTL / 3).max(1) as u64));
            let mut campaigning = true;
            loop {
                tokio::select! {
                    won = &mut campaign, if campaigning => {
                        campaigning = false;
                        match won {
                            Ok(_) => {
                                self.leader.store(true, Ordering::SeqCst);
                                tracing::info!(replica = %self.id, "leading the cluster's controller");
                            }
                            Err(e) => {
                                tracing::warn!("campaigning for the controller failed: {e}");
                                break;
                            }
                        }
                    }
                    _ = ticks.tick() => {
                        let alive = keeper.keep_alive().await.is_ok()
                            && matches!(answers.message().await, Ok(Some(answer)) if answer.ttl() > 0);
                        if !alive {
                            break;
                        }
                    }
                }
            }
            if self.leader.swap(false, Ordering::SeqCst) {
                tracing::warn!(replica = %self.id, "lost the cluster lease: no longer leading the controller");
            }
            self.lease.store(0, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Every app, and the revision they were read at (watch from the next).
    pub async fn apps(&self) -> anyhow::Result<(Vec<ClusterApp>, i64)> {
        let answer = self.client.clone().get(APPS, Some(GetOptions::new().with_prefix())).await?;
        let revision = answer.header().map_or(0, |h| h.revision());
        let mut apps = Vec::new();
        for kv in answer.kvs() {
            match serde_json::from_slice(kv.value()) {
                Ok(app) => apps.push(app),
                Err(e) => {
                    tracing::error!("skipping the damaged cluster record {}: {e}", String::from_utf8_lossy(kv.key()))
                }
            }
        }
        Ok((apps, revision))
    }

    /// Record `app` (deployed or re-planned): every replica runs it.
    pub async fn put_app(&self, app: &ClusterApp) -> anyhow::Result<()> {
        let json = serde_json::to_vec(app)?;
        self.client.clone().put(format!("{APPS}{}", app.record.name), json, None).await?;
        Ok(())
    }

    /// Forget `name`; true when it was deployed.
    pub async fn delete_app(&self, name: &str) -> anyhow::Result<bool> {
        let answer = self.client.clone().delete(format!("{APPS}{name}"), None).await?;
        Ok(answer.deleted() > 0)
    }

    /// The changes to the apps after `revision`, as they come, until the watch breaks (then read
    /// [`Cluster::apps`] again and watch from there).
    pub async fn watch_apps(&self, revision: i64) -> anyhow::Result<tokio::sync::mpsc::Receiver<Change>> {
        let options = WatchOptions::new().with_prefix().with_start_revision(revision + 1);
        let mut stream = self.client.clone().watch(APPS, Some(options)).await?;
        let (send, changes) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            while let Ok(Some(answer)) = stream.message().await {
                for event in answer.events() {
                    let Some(kv) = event.kv() else { continue };
                    let change = match event.event_type() {
                        EventType::Put => match serde_json::from_slice(kv.value()) {
                            Ok(app) => Change::Put(Box::new(app)),
                            Err(e) => {
                                tracing::error!("ignoring a damaged cluster record: {e}");
                                continue;
                            }
                        },
                        EventType::Delete => {
                            Change::Deleted(String::from_utf8_lossy(&kv.key()[APPS.len()..]).into_owned())
                        }
                    };
                    if send.send(change).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(changes)
    }

    /// The addresses of the `jig node`s registered in the cluster (`jig node --etcd`).
    pub async fn registered_nodes(&self) -> anyhow::Result<Vec<String>> {
        let nodes = jig_node::registry::registered(&mut self.client.clone()).await?;
        Ok(nodes.into_iter().map(|n| n.addr).collect())
    }

    /// Publish the demand windows this replica measured for `app` (they go with its lease).
    pub async fn publish_demand(&self, app: &str, rates: &[f64]) -> anyhow::Result<()> {
        let lease = self.lease.load(Ordering::SeqCst);
        anyhow::ensure!(lease != 0, "no cluster lease");
        let key = format!("{DEMAND}{app}/{}", self.id);
        self.client.clone().put(key, serde_json::to_vec(rates)?, Some(PutOptions::new().with_lease(lease))).await?;
        Ok(())
    }

    /// The demand windows of `app` summed over the replicas that published them, aligned at the newest.
    pub async fn demand(&self, app: &str) -> anyhow::Result<Vec<f64>> {
        let answer = self.client.clone().get(format!("{DEMAND}{app}/"), Some(GetOptions::new().with_prefix())).await?;
        let each: Vec<Vec<f64>> =
            answer.kvs().iter().filter_map(|kv| serde_json::from_slice(kv.value()).ok()).collect();
        Ok(sum_aligned(&each))
    }
}

/// Element-wise sums of `series`, aligned at their last elements (the newest windows).
fn sum_aligned(series: &[Vec<f64>]) -> Vec<f64> {
    let len = series.iter().map(Vec::len).max().unwrap_or(0);
    let mut sum = vec![0.0; len];
    for s in series {
        for (i, rate) in s.iter().enumerate() {
            sum[len - s.len() + i] += rate;
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demand_sums_replicas_at_their_newest_windows() {
        assert_eq!(sum_aligned(&[vec![1.0, 2.0, 3.0], vec![10.0]]), vec![1.0, 2.0, 13.0]);
        assert!(sum_aligned(&[]).is_empty());
    }
}
