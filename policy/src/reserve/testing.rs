//! Test helpers shared by the reservation tests: durations, stages and pipelines in a line, decisions unpacked,
//! and proptest's random clusters of pooled pipelines.

use std::time::Duration;

use proptest::prelude::*;

use super::{Decision, Instance, Path, Pipeline, Resource, Scheduler, Stage};

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(super) fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

pub(super) fn stage(pool: &[usize], latency_ms: &[u64]) -> Stage {
    Stage {
        pool: pool.iter().map(|&i| i.into()).collect(),
        latency: latency_ms.iter().map(|&l| ms(l)).collect(),
        transfer: vec![],
    }
}

pub(super) fn pipeline(name: &str, batch: usize, stages: Vec<Stage>) -> Pipeline {
    Pipeline { name: name.into(), batch, stages }
}

pub(super) fn scheduler(pipelines: Vec<Pipeline>) -> Scheduler<Duration> {
    Scheduler::new(pipelines).unwrap()
}

pub(super) fn dispatched(d: Decision<Duration>) -> Path<Duration> {
    match d {
        Decision::Dispatch(path) => path,
        other => panic!("expected a dispatch, got {other:?}"),
    }
}

pub(super) fn waited(d: Decision<Duration>) -> Duration {
    match d {
        Decision::Wait { until } => until,
        other => panic!("expected a wait, got {other:?}"),
    }
}

pub(super) fn reserved(s: &Scheduler<Duration>, r: Resource) -> Vec<(u64, u64)> {
    s.reserved(r).map(|(a, b)| (a.as_millis() as u64, b.as_millis() as u64)).collect()
}

pub(super) fn linked(pool: Vec<Instance>, latency_ms: u64, transfer_ms: u64) -> Stage {
    let transfer = if transfer_ms == 0 { vec![] } else { vec![ms(transfer_ms)] };
    Stage { pool, latency: vec![ms(latency_ms)], transfer }
}

pub(super) fn on(id: usize, node: usize) -> Instance {
    Instance { id, node: Some(node) }
}

/// Up to three pipelines of up to three stages over five instances, some on nodes (of three), latencies in µs.
pub(super) fn cluster() -> impl Strategy<Value = Vec<Pipeline>> {
    let stage = (
        prop::collection::vec(0usize..5, 1..=3),
        prop::collection::vec(1_000u64..=20_000, 4),
        prop::option::of(prop::collection::vec(0u64..=6_000, 4)),
    );
    let pipeline = (1usize..=4, prop::collection::vec(stage, 1..=3));
    (prop::collection::vec(prop::option::of(0usize..3), 5), prop::collection::vec(pipeline, 1..=3)).prop_map(
        |(nodes, pipelines)| {
            let pipelines = pipelines.into_iter().enumerate();
            pipelines
                .map(|(i, (batch, stages))| Pipeline {
                    name: format!("p{i}"),
                    batch,
                    stages: (stages.into_iter().enumerate())
                        .map(|(k, (pool, latency, transfer))| Stage {
                            pool: pool.into_iter().map(|id| Instance { id, node: nodes[id] }).collect(),
                            latency: latency.into_iter().map(us).collect(),
                            transfer: match transfer {
                                Some(t) if k > 0 => t.into_iter().map(us).collect(),
                                _ => vec![],
                            },
                        })
                        .collect(),
                })
                .collect()
        },
    )
}
