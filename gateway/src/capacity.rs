//! What the gateway may plan within, and what it reports of it (`GET /v1/devices`, `/metrics`): this machine's
//! cores and GPUs, or its nodes' (found again once the last look is stale), less what the apps hold.

use std::time::Instant;

use jig_api::{GpuStatus, MachineStatus, NodeStatus, ReplicaStatus};
use jig_app::deployment::{Capacity, Machine};
use jig_model_host::device::Devices;
use jig_node::NodeInfo;

use crate::{Gateway, NODES_FRESH};

impl Gateway {
    /// The gateway's cores and GPUs, or its nodes', less what every app but `except` holds: what app `except`
    /// may plan within. Lists this machine's GPUs again first (`nvidia-smi`), or finds the nodes again when the
    /// last look is older than [`NODES_FRESH`]: blocks.
    pub(crate) fn free_capacity(&self, except: Option<&str>) -> Capacity {
        self.less_held(self.capacity(true), except)
    }

    /// `all` less what every app but `except` holds.
    fn less_held(&self, all: Capacity, except: Option<&str>) -> Capacity {
        let apps = self.apps.read().unwrap_or_else(|p| p.into_inner());
        apps.values().filter(|a| Some(a.name.as_str()) != except).fold(all, |free, app| free.without(&app.deployment))
    }

    /// Whether model instances run on nodes: the gateway was given some, or (a replica with a node token) may find
    /// them registered in the cluster.
    pub(crate) fn uses_nodes(&self) -> bool {
        !self.config.nodes.is_empty() || (self.cluster.is_some() && self.hosts.nodes.is_some())
    }

    /// What the gateway may use in all: its own machine (as last listed, or listed again when `refresh`: MIG
    /// instances come and go), or its nodes (as last found, or found again when `refresh` and the last look is
    /// stale).
    pub(crate) fn capacity(&self, refresh: bool) -> Capacity {
        if !self.uses_nodes() {
            let launcher = &self.hosts.launcher;
            let devices = if refresh { launcher.relist() } else { launcher.devices() };
            return Capacity::of(&devices, self.config.cores, self.config.gpus.as_deref());
        }
        let nodes = self.nodes(refresh);
        Capacity::of_nodes(nodes.iter().map(|n| (n.addr.as_str(), &n.devices)))
    }

    /// Why no app can be deployed now: the gateway runs its models on nodes, and none answers (it looks again
    /// when the last look is stale: blocks). A deploy then would have nowhere to run.
    pub(crate) fn no_node_answers(&self) -> Option<String> {
        if !self.uses_nodes() || !self.capacity(true).machines.is_empty() {
            return None;
        }
        let why = self.nodes.lock().unwrap_or_else(|p| p.into_inner()).2.join("; ");
        Some(format!(
            "no node answers{}: start `jig node`s, or correct the gateway's `nodes`, `node_token_file` and \
             `node_tls_ca`",
            if why.is_empty() { String::new() } else { format!(" ({why})") }
        ))
    }

    /// The nodes that answered the last look; with `refresh`, looks again when that is older than
    /// [`NODES_FRESH`]. A node that does not answer is left out of plans (its instances are placed elsewhere
    /// on the next one) and logged.
    pub(crate) fn nodes(&self, refresh: bool) -> Vec<NodeInfo> {
        let cached = || self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        let stale = cached().0.is_none_or(|at| at.elapsed() > NODES_FRESH);
        // The look is made with the cache unlocked: `/v1/devices` and `/metrics` read it meanwhile, unblocked.
        if refresh
            && stale
            && let Some(access) = &self.hosts.nodes
        {
            let mut addresses = self.config.nodes.clone();
            for addr in self.registered.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                if !addresses.contains(addr) {
                    addresses.push(addr.clone());
                }
            }
            let (mut found, mut missing): (Vec<NodeInfo>, Vec<String>) = Default::default();
            for result in jig_node::discover(&addresses, access) {
                match result {
                    // A node listed and registered under two names is one node.
                    Ok(node) if found.iter().any(|f| f.addr == node.addr) => {}
                    Ok(node) => found.push(node),
                    Err(e) => {
                        tracing::warn!("{e}; planning without it");
                        missing.push(e.to_string());
                    }
                }
            }
            *cached() = (Some(Instant::now()), found, missing);
        }
        cached().1.clone()
    }

    /// The devices model instances may use, and what no app holds: the gateway's machine's as last listed (at
    /// start, and at each deploy and re-plan), or, with nodes, the nodes' as last found (this does not look
    /// again).
    pub(crate) fn machine(&self) -> MachineStatus {
        let all = self.capacity(false);
        let free = self.less_held(all.clone(), None);
        let local = self.hosts.launcher.devices();
        let nodes = self.nodes(false);
        let cluster =
            self.cluster.as_ref().map(|c| ReplicaStatus { replica: c.id().to_string(), leader: c.is_leader() });
        let mut status =
            MachineStatus { cores: Vec::new(), free_cores: Vec::new(), gpus: Vec::new(), nodes: Vec::new(), cluster };
        for (machine, free) in all.machines.iter().zip(&free.machines) {
            let devices = match &machine.node {
                None => &*local,
                Some(addr) => match nodes.iter().find(|n| &n.addr == addr) {
                    Some(node) => &node.devices,
                    None => continue,
                },
            };
            let gpus = gpu_status(devices, machine, free);
            match &machine.node {
                None => {
                    (status.cores, status.free_cores, status.gpus) = (machine.cores.clone(), free.cores.clone(), gpus)
                }
                Some(addr) => status.nodes.push(NodeStatus {
                    addr: addr.clone(),
                    name: nodes.iter().find(|n| &n.addr == addr).map(|n| n.name.clone()).unwrap_or_default(),
                    cores: machine.cores.clone(),
                    free_cores: free.cores.clone(),
                    gpus,
                }),
            }
        }
        status
    }
}

/// The status of `machine`'s GPUs (all it may use), with what `free` (the same machine less what apps hold)
/// leaves of each; `devices` is the machine's own listing.
fn gpu_status(devices: &Devices, machine: &Machine, free: &Machine) -> Vec<GpuStatus> {
    machine
        .gpus
        .iter()
        .filter_map(|g| devices.gpus.iter().find(|d| d.index == g.index))
        .map(|gpu| {
            let free = free.gpus.iter().find(|f| f.index == gpu.index);
            GpuStatus {
                index: gpu.index,
                name: gpu.name.clone(),
                uuid: gpu.uuid.clone(),
                memory_mib: gpu.memory_mib,
                mig_enabled: gpu.mig_enabled,
                mig_instances: gpu.mig_instances.iter().filter_map(|m| m.profile.clone()).collect(),
                free_mps_percent: free.map_or(0, |f| f.mps_percent),
                free_mig_instances: free
                    .map(|f| f.mig.iter().map(|(profile, uuid)| format!("{profile} ({uuid})")).collect())
                    .unwrap_or_default(),
            }
        })
        .collect()
}
