//! A closed-loop HTTP load generator for benchmarks on loopback: `connections` keep-alive HTTP/1.1
//! connections, each sending the next request as soon as the previous answer arrived, for a fixed time.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};

/// What one run measured.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// Answers with a 2xx status.
    pub ok: u64,
    /// Other answers and failed requests.
    pub errors: u64,
    pub elapsed: Duration,
    /// Latencies of the 2xx answers, sorted.
    latencies: Vec<Duration>,
}

impl LoadReport {
    /// 2xx answers per second.
    pub fn throughput(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64()
    }

    /// The `q` quantile (0 to 1) of the 2xx latencies.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() - 1) as f64 * q).round() as usize;
        self.latencies[i]
    }
}

/// The request every connection sends.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub method: Method,
    pub path: String,
    pub body: Bytes,
}

/// Drive `target` from `connections` connections for `duration`. Call inside a Tokio runtime.
pub async fn closed_loop(target: &Target, connections: usize, duration: Duration) -> LoadReport {
    let started = Instant::now();
    let until = started + duration;
    let workers: Vec<_> = (0..connections)
        .map(|_| {
            let target = target.clone();
            tokio::spawn(async move { connection(&target, until).await })
        })
        .collect();
    let (mut ok, mut errors, mut latencies) = (0, 0, Vec::new());
    for worker in workers {
        let (o, e, l) = worker.await.unwrap_or((0, 1, Vec::new()));
        ok += o;
        errors += e;
        latencies.extend(l);
    }
    latencies.sort();
    LoadReport { ok, errors, elapsed: started.elapsed(), latencies }
}

/// One connection's loop; reconnects after an error.
async fn connection(target: &Target, until: Instant) -> (u64, u64, Vec<Duration>) {
    let (mut ok, mut errors, mut latencies) = (0u64, 0u64, Vec::new());
    while Instant::now() < until {
        let Ok(stream) = tokio::net::TcpStream::connect(target.addr).await else {
            errors += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await
        else {
            errors += 1;
            continue;
        };
        tokio::spawn(conn);
        while Instant::now() < until {
            let request = Request::builder()
                .method(target.method.clone())
                .uri(&target.path)
                .header(hyper::header::HOST, target.addr.to_string())
                .body(Full::new(target.body.clone()))
                .expect("a valid request");
            let sent = Instant::now();
            let answer = match sender.send_request(request).await {
                Ok(response) => {
                    let success = response.status().is_success();
                    response.into_body().collect().await.map(|_| success).ok()
                }
                Err(_) => None,
            };
            match answer {
                Some(true) => {
                    ok += 1;
                    latencies.push(sent.elapsed());
                }
                Some(false) => errors += 1,
                None => {
                    errors += 1;
                    break;
                }
            }
        }
    }
    (ok, errors, latencies)
}
