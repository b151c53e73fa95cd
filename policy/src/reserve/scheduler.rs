//! The [`Scheduler`]: PPipe's central scheduler, holding the pooled pipelines (checked and their latency tables
//! made monotone when it is made) and the reservation tables of their resources. Its decisions are spread by
//! concept: probing in `probe.rs`, booking and feedback in `table.rs`, Algorithm 1 in `decide.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::error::ReserveError;
use super::pipeline::{Pipeline, missing};
use super::table::{Busy, Resource};
use crate::Time;

/// PPipe's central scheduler: the pooled pipelines and the reservation tables of their resources.
#[derive(Debug, Clone)]
pub struct Scheduler<T> {
    pub(super) pipelines: Vec<Pipeline>,
    pub(super) timer_slack: Duration,
    pub(super) tables: BTreeMap<Resource, Vec<Busy<T>>>,
}

impl<T: Time> Scheduler<T> {
    /// A scheduler over `pipelines`, with empty tables. Each must plan a batch of at least 1, have stages, and
    /// give every stage a pool and a latency (and, past the first, a transfer latency or none) for every batch
    /// size up to the planned one; an instance in several pools must be on one node.
    pub fn new(mut pipelines: Vec<Pipeline>) -> Result<Self, ReserveError> {
        if pipelines.is_empty() {
            return Err(ReserveError::NoPipelines);
        }
        let mut nodes = BTreeMap::new();
        for (i, p) in pipelines.iter().enumerate() {
            let invalid =
                |stage, problem: String| ReserveError::Invalid { pipeline: i, name: p.name.clone(), stage, problem };
            if p.batch == 0 {
                return Err(invalid(None, "its planned batch size is 0; plan at least 1".into()));
            }
            if p.stages.is_empty() {
                return Err(invalid(None, "it has no stages; give it at least one partition and its pool".into()));
            }
            if !p.stages[0].transfer.is_empty() {
                return Err(invalid(
                    Some(0),
                    "the first stage has a transfer latency but no stage before it; leave it empty".into(),
                ));
            }
            for (k, stage) in p.stages.iter().enumerate() {
                if stage.pool.is_empty() {
                    return Err(invalid(Some(k), "its pool is empty; give it at least one instance".into()));
                }
                if let Some(problem) = missing(stage, k, p.batch) {
                    return Err(invalid(Some(k), problem));
                }
                for inst in &stage.pool {
                    if let Some(&node) = nodes.get(&inst.id)
                        && node != inst.node
                    {
                        return Err(invalid(
                            Some(k),
                            format!(
                                "instance {} is on {} here but on {} in another pool; an instance is on one node",
                                inst.id,
                                node_name(inst.node),
                                node_name(node)
                            ),
                        ));
                    }
                    nodes.insert(inst.id, inst.node);
                }
            }
        }
        // Never predict a smaller batch slower than a larger one (profiles are noisy).
        for stage in pipelines.iter_mut().flat_map(|p| &mut p.stages) {
            for table in [&mut stage.latency, &mut stage.transfer] {
                for b in 1..table.len() {
                    table[b] = table[b].max(table[b - 1]);
                }
            }
        }
        Ok(Scheduler { pipelines, timer_slack: Duration::ZERO, tables: BTreeMap::new() })
    }

    /// Wake this much before the last moment a wait allows, for a timer that may fire late (the runtime's);
    /// zero (the default) for an exact clock (the simulator's).
    pub fn with_timer_slack(mut self, slack: Duration) -> Self {
        self.timer_slack = slack;
        self
    }

    /// The pipelines, their latency tables made non-decreasing in the batch size.
    pub fn pipelines(&self) -> &[Pipeline] {
        &self.pipelines
    }
}

fn node_name(node: Option<usize>) -> String {
    node.map_or_else(|| "no node".into(), |n| format!("node {n}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reserve::pipeline::Stage;
    use crate::reserve::testing::*;

    #[test]
    fn bad_pipelines_and_probes_are_named_with_their_stage() {
        let ok = || pipeline("ok", 1, vec![stage(&[0], &[10])]);
        let error = |pipelines: Vec<Pipeline>| Scheduler::<Duration>::new(pipelines).unwrap_err().to_string();
        assert_eq!(error(vec![]), "no pooled pipeline to schedule on; plan at least one");
        let cases = [
            (pipeline("zero", 0, vec![stage(&[0], &[10])]), "pipeline 1 (`zero`): its planned batch size is 0"),
            (pipeline("bare", 1, vec![]), "pipeline 1 (`bare`): it has no stages"),
            (
                pipeline("dry", 1, vec![stage(&[0], &[10]), stage(&[], &[10])]),
                "pipeline 1 (`dry`) stage 1: its pool is empty",
            ),
            (
                pipeline("short", 3, vec![stage(&[0], &[10, 20])]),
                "pipeline 1 (`short`) stage 0: no latency for batch 3 (profiled up to 2)",
            ),
            (
                pipeline(
                    "wire",
                    2,
                    vec![stage(&[0], &[10, 20]), Stage { transfer: vec![ms(1)], ..stage(&[1], &[10, 20]) }],
                ),
                "pipeline 1 (`wire`) stage 1: no transfer latency for batch 2",
            ),
            (
                pipeline("head", 1, vec![Stage { transfer: vec![ms(1)], ..stage(&[0], &[10]) }]),
                "pipeline 1 (`head`) stage 0: the first stage has a transfer latency",
            ),
            (
                pipeline("moved", 1, vec![stage(&[1], &[10]), linked(vec![on(0, 3)], 10, 0)]),
                "pipeline 1 (`moved`) stage 1: instance 0 is on node 3 here but on no node in another pool",
            ),
        ];
        for (bad, expected) in cases {
            let message = error(vec![ok(), bad]);
            assert!(message.starts_with(expected), "{message}");
        }
        let s = scheduler(vec![ok()]);
        let probe = |p, b| s.probe(p, b, ms(0)).unwrap_err().to_string();
        assert!(probe(1, 1).starts_with("pipeline 1: there is no such pipeline"), "{}", probe(1, 1));
        assert!(probe(0, 0).starts_with("pipeline 0 (`ok`): a batch of 0"), "{}", probe(0, 0));
        assert!(probe(0, 2).starts_with("pipeline 0 (`ok`) stage 0: no latency for batch 2"), "{}", probe(0, 2));
    }
}
