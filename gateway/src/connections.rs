//! What one client can hold of the gateway's listeners: a connection permit of `max_connections` (clients beyond
//! it wait in the listen backlog until one closes) and, per peer address, at most `max_connections_per_peer`
//! (its next connection is closed unanswered), so that no one client takes every socket. The HTTP and gRPC
//! listeners share one set: a peer's share is of both together.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The gateway's connection caps.
pub(crate) struct ConnectionCaps {
    all: Arc<Semaphore>,
    peers: Arc<Mutex<HashMap<IpAddr, u32>>>,
    per_peer: u32,
}

/// An open connection's place within the caps, given back when it drops.
pub(crate) struct Hold {
    // Fields drop in order: the peer's share first, so that a connection the freed permit lets in is never
    // counted against a share that is about to be freed (and closed unanswered: a test saw it, on a busy machine).
    _peer: PeerHold,
    _permit: OwnedSemaphorePermit,
}

impl ConnectionCaps {
    /// `max` connections at once, `per_peer` of them from one address (default: half of `max`).
    pub(crate) fn new(max: u32, per_peer: Option<u32>) -> ConnectionCaps {
        ConnectionCaps {
            all: Arc::new(Semaphore::new(max.max(1) as usize)),
            peers: Arc::default(),
            per_peer: per_peer.unwrap_or(max / 2).max(1),
        }
    }

    /// The next connection on `listener` within the caps, with its hold: waits for a permit before it accepts,
    /// and closes a connection whose peer holds its share already. Cancel-safe.
    pub(crate) async fn accept(&self, listener: &TcpListener) -> (TcpStream, SocketAddr, Hold) {
        loop {
            let permit = self.all.clone().acquire_owned().await.expect("the semaphore is never closed");
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let Some(held) = PeerHold::take(&self.peers, peer.ip(), self.per_peer) else {
                continue; // the peer holds its share already: this connection is closed unanswered
            };
            let _ = stream.set_nodelay(true);
            return (stream, peer, Hold { _peer: held, _permit: permit });
        }
    }
}

/// One connection counted against its peer's share.
struct PeerHold {
    peers: Arc<Mutex<HashMap<IpAddr, u32>>>,
    peer: IpAddr,
}

impl PeerHold {
    /// A hold for `peer`, unless it holds `max` already.
    fn take(peers: &Arc<Mutex<HashMap<IpAddr, u32>>>, peer: IpAddr, max: u32) -> Option<PeerHold> {
        let mut held = peers.lock().unwrap_or_else(|p| p.into_inner());
        let count = held.entry(peer).or_default();
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(PeerHold { peers: peers.clone(), peer })
    }
}

impl Drop for PeerHold {
    fn drop(&mut self) {
        let mut held = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = held.get_mut(&self.peer) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_holds_at_most_its_share_of_connections_and_gets_them_back_as_they_close() {
        let peers = Arc::default();
        let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = PeerHold::take(&peers, a, 2).unwrap();
        let _second = PeerHold::take(&peers, a, 2).unwrap();
        assert!(PeerHold::take(&peers, a, 2).is_none(), "a third from the same address");
        assert!(PeerHold::take(&peers, b, 2).is_some(), "another address has its own share");
        drop(first);
        assert!(PeerHold::take(&peers, a, 2).is_some(), "a closed connection gives its place back");
    }

    #[tokio::test]
    async fn a_peer_gets_its_share_and_every_connection_a_permit_until_it_closes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let caps = ConnectionCaps::new(3, Some(2));
        let mut clients = Vec::new();
        for _ in 0..3 {
            clients.push(TcpStream::connect(address).await.unwrap());
        }
        let (_, _, first) = caps.accept(&listener).await;
        let (_, _, second) = caps.accept(&listener).await;
        // The third connection is the peer's third: closed unanswered, and the next accept waits for another.
        let waiting = tokio::time::timeout(Duration::from_millis(200), caps.accept(&listener)).await;
        assert!(waiting.is_err(), "a third connection from one peer was accepted");
        let mut closed = [0u8; 1];
        let read = tokio::io::AsyncReadExt::read(&mut clients[2], &mut closed).await;
        assert!(matches!(read, Ok(0) | Err(_)), "the peer's third connection is still open: {read:?}");
        // One closes: the peer may open another.
        drop(first);
        clients.push(TcpStream::connect(address).await.unwrap());
        let (_, _, third) = tokio::time::timeout(Duration::from_secs(5), caps.accept(&listener)).await.unwrap();
        assert_eq!(caps.all.available_permits(), 1);
        drop((second, third));
        assert_eq!(caps.all.available_permits(), 3);
        assert!(caps.peers.lock().unwrap().is_empty(), "every hold given back");
    }
}
