//! HTTP load generators for benchmarks on loopback:
//!
//! * [`closed_loop`]: `connections` keep-alive connections, each sending the next request as soon as the
//!   previous answer arrived, for a fixed time: the most a server sustains.
//! * [`open_loop`]: Poisson arrivals at a fixed rate or following a trace, each request independent of the
//!   others' answers, as clients arrive in production: latency and violations under load (`jig bench`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use jig_policy::rng::SplitMix64;
use jig_policy::stats::quantile;

/// What one run measured.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// Answers with a 2xx status.
    pub ok: u64,
    /// Other answers and failed requests.
    pub errors: u64,
    /// How long the run took.
    pub elapsed: Duration,
    /// Latencies of the 2xx answers, sorted.
    latencies: Vec<Duration>,
}

impl LoadReport {
    /// 2xx answers per second.
    pub fn throughput(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64()
    }

    /// The `q` quantile (0 to 1) of the 2xx latencies ([`jig_policy::stats::quantile`]); zero without any.
    pub fn quantile(&self, q: f64) -> Duration {
        quantile(&self.latencies, q).unwrap_or_default()
    }
}

/// The request every connection sends.
#[derive(Debug, Clone)]
pub struct Target {
    /// The server's address (loopback in benchmarks).
    pub addr: SocketAddr,
    /// The request's method.
    pub method: Method,
    /// The request's path, including the prefix the gateway is mounted at, if any.
    pub path: String,
    /// The request's body.
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

/// One request of an open-loop run.
#[derive(Debug, Clone, Copy)]
pub struct Record {
    /// When it was sent, from the start of the run.
    pub sent: Duration,
    /// Until its answer (or failure).
    pub latency: Duration,
    /// The HTTP status; 0 when the request failed without one.
    pub status: u16,
}

/// Poisson arrivals following `schedule` — consecutive spans of time, each with its own mean rate (one span
/// for a constant rate, one per bin to replay a trace) — until the schedule ends or `max_requests` were sent.
/// Each request goes on its own connection, independent of the others' answers, cycling through `bodies`.
/// Call inside a Tokio runtime. `seed` makes the arrival times reproducible.
pub async fn open_loop(
    target: &Target,
    bodies: &[Bytes],
    headers: &[(String, String)],
    schedule: &[(Duration, f64)],
    max_requests: usize,
    seed: u64,
) -> Vec<Record> {
    let started = Instant::now();
    let mut running = Vec::new();
    for (i, next) in arrivals(schedule, seed).take(max_requests).enumerate() {
        tokio::time::sleep_until((started + next).into()).await;
        let (target, body, headers) = (target.clone(), bodies[i % bodies.len()].clone(), headers.to_vec());
        let sent = started.elapsed();
        running.push(tokio::spawn(async move {
            let t = Instant::now();
            let status = send_once(&target, body, &headers).await.unwrap_or(0);
            Record { sent, latency: t.elapsed(), status }
        }));
    }
    let mut records = Vec::with_capacity(running.len());
    for r in running {
        if let Ok(record) = r.await {
            records.push(record);
        }
    }
    records
}

/// The arrival times of a Poisson process following `schedule` (see [`open_loop`]), from the start of the run,
/// seeded by `seed`: exponential gaps at each span's rate; a gap that crosses the span's end restarts in the
/// next span (arrivals are memoryless), and a span of rate 0 has none.
fn arrivals(schedule: &[(Duration, f64)], seed: u64) -> impl Iterator<Item = Duration> + '_ {
    let mut rng = SplitMix64::new(seed);
    let (mut span, mut span_start, mut next) = (0, Duration::ZERO, Duration::ZERO);
    std::iter::from_fn(move || {
        loop {
            let &(length, rate) = schedule.get(span)?;
            let span_end = span_start + length;
            if rate > 0.0 {
                next += Duration::from_secs_f64(rng.exponential(1.0 / rate));
                if next < span_end {
                    return Some(next);
                }
            }
            (span, span_start, next) = (span + 1, span_end, span_end);
        }
    })
}

/// One request on a fresh connection; its status once the whole answer arrived.
async fn send_once(target: &Target, body: Bytes, headers: &[(String, String)]) -> Option<u16> {
    let stream = tokio::net::TcpStream::connect(target.addr).await.ok()?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.ok()?;
    tokio::spawn(conn);
    let mut request = Request::builder()
        .method(target.method.clone())
        .uri(&target.path)
        .header(hyper::header::HOST, target.addr.to_string());
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let response = sender.send_request(request.body(Full::new(body)).ok()?).await.ok()?;
    let status = response.status().as_u16();
    response.into_body().collect().await.ok()?;
    Some(status)
}

/// The summary of an open-loop run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OpenLoopSummary {
    /// Requests sent.
    pub sent: usize,
    /// 2xx answers.
    pub ok: usize,
    /// Requests that missed their objective: no 2xx answer (429, 503 dropped early, 504 late, errors).
    pub violations: usize,
    /// `violations / sent`.
    pub violation_rate: f64,
    /// 2xx answers per second of the run.
    pub throughput_rps: f64,
    /// Median latency of all requests, answered or failed, ms.
    pub p50_ms: f64,
    /// 95th percentile latency of all requests, answered or failed, ms.
    pub p95_ms: f64,
    /// 99th percentile latency of all requests, answered or failed, ms.
    pub p99_ms: f64,
}

impl OpenLoopSummary {
    /// Summarise `records` of a run that lasted `elapsed`; latency quantiles over all requests, answered or
    /// failed (a failure's latency is until it failed).
    pub fn of(records: &[Record], elapsed: Duration) -> Self {
        let ok = records.iter().filter(|r| (200..300).contains(&r.status)).count();
        let mut latencies: Vec<Duration> = records.iter().map(|r| r.latency).collect();
        latencies.sort();
        let q = |q: f64| quantile(&latencies, q).unwrap_or_default().as_secs_f64() * 1e3;
        OpenLoopSummary {
            sent: records.len(),
            ok,
            violations: records.len() - ok,
            violation_rate: if records.is_empty() { 0.0 } else { (records.len() - ok) as f64 / records.len() as f64 },
            throughput_rps: ok as f64 / elapsed.as_secs_f64().max(1e-9),
            p50_ms: q(0.5),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
        }
    }
}

/// An SVG plot of an open-loop run a person can look at: each request's latency against when it was sent
/// (answered ones grey, violations red), with the p50 and p99 as lines.
pub fn svg(records: &[Record], title: &str) -> String {
    let (width, height, left, bottom, top, right) = (900.0, 420.0, 70.0, 50.0, 40.0, 20.0);
    let summary = OpenLoopSummary::of(records, Duration::from_secs(1));
    let x_max = records.iter().map(|r| r.sent.as_secs_f64()).fold(1e-3, f64::max);
    let y_max = records.iter().map(|r| r.latency.as_secs_f64() * 1e3).fold(1.0, f64::max) * 1.05;
    let x = |s: f64| left + s / x_max * (width - left - right);
    let y = |ms: f64| height - bottom - ms / y_max * (height - bottom - top);
    let escape = |t: &str| t.replace('&', "&amp;").replace('<', "&lt;");
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" \
         font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{left}\" y=\"24\" font-size=\"14\">{}</text>\n",
        escape(title)
    );
    // Axes with five ticks each.
    out.push_str(&format!(
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
         <line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>\n",
        height - bottom,
        width - right,
        height - bottom,
        height - bottom
    ));
    for i in 0..=5 {
        let (s, ms) = (x_max * f64::from(i) / 5.0, y_max * f64::from(i) / 5.0);
        out.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{s:.1}</text>\n\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{ms:.0}</text>\n",
            x(s),
            height - bottom + 18.0,
            left - 6.0,
            y(ms) + 4.0
        ));
    }
    out.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">sent at (s)</text>\n\
         <text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" text-anchor=\"middle\">latency (ms)</text>\n",
        (left + width - right) / 2.0,
        height - 12.0,
        (top + height - bottom) / 2.0,
        (top + height - bottom) / 2.0
    ));
    for r in records {
        let ok = (200..300).contains(&r.status);
        out.push_str(&format!(
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\" fill=\"{}\"/>\n",
            x(r.sent.as_secs_f64()),
            y(r.latency.as_secs_f64() * 1e3),
            if ok { "#777" } else { "#d22" }
        ));
    }
    for (label, ms, colour) in [("p50", summary.p50_ms, "#1a7"), ("p99", summary.p99_ms, "#27d")] {
        out.push_str(&format!(
            "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" stroke=\"{colour}\" stroke-dasharray=\"4 3\"/>\n\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"{colour}\">{label} {ms:.1} ms</text>\n",
            y(ms),
            width - right,
            y(ms),
            width - right - 4.0,
            y(ms) - 4.0
        ));
    }
    out.push_str(&format!(
        "<text x=\"{}\" y=\"24\" text-anchor=\"end\">{} requests, {} violations (red)</text>\n</svg>\n",
        width - right,
        summary.sent,
        summary.violations
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_and_the_plot_count_violations() {
        let ms = Duration::from_millis;
        let records = [
            Record { sent: ms(0), latency: ms(10), status: 200 },
            Record { sent: ms(100), latency: ms(20), status: 200 },
            Record { sent: ms(200), latency: ms(900), status: 504 },
            Record { sent: ms(300), latency: ms(5), status: 0 },
        ];
        let s = OpenLoopSummary::of(&records, Duration::from_secs(2));
        assert_eq!((s.sent, s.ok, s.violations), (4, 2, 2));
        assert!((s.throughput_rps - 1.0).abs() < 1e-9 && (s.violation_rate - 0.5).abs() < 1e-9);
        let plot = svg(&records, "a <test>");
        assert_eq!(plot.matches("<circle").count(), 4);
        assert_eq!(plot.matches("#d22").count(), 2, "two red points");
        assert!(plot.contains("a &lt;test>") && plot.ends_with("</svg>\n"));
    }

    /// Arrivals are Poisson at each span's rate: counts within a few standard deviations (√n), exponential
    /// gaps (as many shorter than the mean gap's ln 2 as longer), none in a span of rate 0, reproducible by seed.
    #[test]
    fn arrivals_follow_the_schedule_as_a_poisson_process() {
        let secs = Duration::from_secs;
        let schedule = [(secs(20), 500.0), (secs(10), 0.0), (secs(20), 1000.0)];
        let times: Vec<Duration> = arrivals(&schedule, 7).collect();
        let count = |from: u64, to: u64| times.iter().filter(|t| (secs(from)..secs(to)).contains(t)).count() as f64;
        let within = |n: f64, expected: f64| (n - expected).abs() < 4.0 * expected.sqrt();
        assert!(within(count(0, 20), 10_000.0), "{} in the first span", count(0, 20));
        assert_eq!(count(20, 30), 0.0, "none at rate 0");
        assert!(within(count(30, 50), 20_000.0), "{} in the last span", count(30, 50));
        assert!(times.windows(2).all(|w| w[0] < w[1]) && times.last() < Some(&secs(50)));
        let first: Vec<Duration> = times.iter().copied().take_while(|&t| t < secs(20)).collect();
        let gaps: Vec<f64> = first.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 500.0).collect();
        let short = gaps.iter().filter(|&&g| g < std::f64::consts::LN_2).count() as f64;
        assert!((short / gaps.len() as f64 - 0.5).abs() < 0.02, "{short} of {} gaps below the median", gaps.len());
        assert_eq!(arrivals(&schedule, 7).take(100).collect::<Vec<_>>(), times[..100]);
        assert_ne!(arrivals(&schedule, 8).next(), times.first().copied());
    }
}
