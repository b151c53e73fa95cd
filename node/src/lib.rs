//! # jig-node
//!
//! A machine's model instances served over TCP: the `jig node` role of a cluster, and the gateway's client of
//! it. A gateway keeps each instance's queue and batcher (JigsawServe's batching and early drops stay where
//! requests arrive); a node runs the batches on its own segments, as a worker process runs them for a GPU
//! segment on one machine ([`jig_model_host::worker`]).
//!
//! * [`Node`] ([`server`]): accepts gateways' connections, one connection per instance. A connection proves the
//!   cluster's shared token (and learns what the node offers: its cores and GPUs), names its model by SHA-256
//!   (the node asks for the bytes only when its cache lacks them) and its place: the segment, the cores the
//!   gateway's plan gives it or its GPU; the node loads it there through [`jig_model_host::launch`] and runs
//!   its batches until the connection closes. As on one machine, the plan holds each core for one instance.
//! * [`Remote`] ([`client`]): the gateway's side, an [`Executor`](jig_model_host::instance::Executor) behind
//!   an ordinary [`Instance`](jig_model_host::instance::Instance): a batch goes to the node and its outputs come
//!   back. A connection that breaks fails the batch in flight at once (the kernel closes a dead node's socket;
//!   a node that stops answering fails it after [`Access::timeout`]); the next batch connects again.
//! * `registry` (feature `registry`): nodes registered in the cluster state (etcd), where gateway replicas find
//!   them.
//! * [`tls`]: the optional TLS under the frames ([`tls::Link`], one connection in clear or in TLS).
//! * [`protocol`]: the frames. Tensor bytes cross the network once, raw, after the frame that describes them:
//!   written from the tensors' own memory and read into reused buffers ([`jig_wire::Spare`]).
//!
//! **Security.** Gateway and node prove the cluster's shared token to each other, the node first, with
//! HMAC-SHA256 over fresh nonces of both ([`protocol::proof`]): the token itself never crosses the wire, a
//! recorded handshake proves nothing later, and a gateway tells an impostor at a node's address nothing. Every
//! frame is bounded before it is decoded ([`jig_wire::frame`]), and a peer has `hello_timeout` from its
//! connect to prove itself (its TLS handshake included), however slowly it sends. Frames travel in TLS when the
//! node has a certificate and the gateway the CA that signed it ([`tls`]); otherwise in clear: run such nodes
//! on a private network (a Kubernetes cluster's pod network).

#![deny(missing_docs)]

pub mod client;
pub mod protocol;
#[cfg(feature = "registry")]
pub mod registry;
pub mod server;
pub mod tls;

pub use client::{Access, NodeInfo, Remote, RemoteError, RemoteSpec, discover};
pub use server::{Node, NodeConfig};
