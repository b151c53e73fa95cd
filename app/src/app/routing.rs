//! How requests are routed over a deployment's instances where its plan says so: Compass's query classes,
//! each a weighted choice of routes through the app's tasks, and PPipe's pooled pipelines, whose head books
//! every request a seat in a batch.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jig_manifest::Bundle;
use jig_model_host::pool::Pool;

use super::TaskRuntime;
use super::instances::Group;
use crate::deployment::Deployment;
use crate::error::StartError;
use crate::pipelines::{Pipelines, StageSpec};
use crate::slots::ModelSlots;

/// A query class of an app planned by Compass: its routes, each the app's tasks calling only the instances
/// planned for the route, picked for the class's requests in proportion to the route's rate.
pub(super) struct ClassRouter {
    /// The class's latency SLO: the deadline of its requests that name none.
    pub(super) latency: Duration,
    pub(super) routes: Vec<Arc<[Arc<TaskRuntime>]>>,
    pub(super) pick: std::sync::Mutex<jig_policy::WeightedRoundRobin>,
}

/// PPipe's pooled pipelines of the deployment, over the instances it started: each pool takes its members from
/// its instance type's group, pipelines sharing a type taking theirs in turn; latencies are the profile's p95.
pub(super) fn pooled_pipelines(
    bundle: &Bundle,
    deployment: &Deployment,
    groups: &[Group],
) -> Result<Option<Arc<Pipelines>>, StartError> {
    if deployment.pipelines.is_empty() {
        return Ok(None);
    }
    let app = &bundle.manifest.name;
    let refused = |detail: String| StartError::Deployment { app: app.clone(), detail };
    let ms = |ms: f64| Duration::from_secs_f64(ms.max(0.0) / 1000.0);
    let glue: HashMap<&str, f64> = deployment.glue.iter().map(|g| (g.task.as_str(), g.mean_ms)).collect();
    let glue_of = |slot: &str| {
        let task = bundle.manifest.tasks.iter().find(|t| t.slot.as_deref() == Some(slot));
        task.and_then(|t| glue.get(t.name.as_str())).map_or(Duration::ZERO, |&g| ms(g))
    };
    let mut handed_out: HashMap<usize, usize> = HashMap::new();
    let mut specs = Vec::with_capacity(deployment.pipelines.len());
    for (k, pipeline) in deployment.pipelines.iter().enumerate() {
        let mut stages = Vec::with_capacity(pipeline.pools.len());
        for pool in &pipeline.pools {
            let key = (pool.slot.as_str(), pool.variant.as_str(), pool.segment.as_str(), pool.max_batch);
            let g = groups
                .iter()
                .position(|g| (g.slot.as_str(), g.variant.as_str(), g.segment.as_str(), g.max_batch) == key)
                .ok_or_else(|| {
                    refused(format!(
                        "pipeline {k} pools slot `{}` on {} on {} batch {}, which the deployment lacks",
                        pool.slot, pool.variant, pool.segment, pool.max_batch
                    ))
                })?;
            let from = handed_out.entry(g).or_default();
            let to = *from + pool.members as usize;
            let instances = groups[g].instances.get(*from..to).ok_or_else(|| {
                refused(format!(
                    "pipelines 0 to {k} pool {} instances of {} on {} at slot `{}`, but the deployment has {}; \
                     re-plan the app",
                    to,
                    pool.variant,
                    pool.segment,
                    pool.slot,
                    groups[g].instances.len()
                ))
            })?;
            *from = to;
            let latency = groups[g]
                .profiled_ms
                .iter()
                .filter(|&(&b, _)| b <= pipeline.batch)
                .map(|(&b, p)| (b as usize, ms(p.p95)))
                .collect();
            stages.push(StageSpec {
                slot: pool.slot.clone(),
                instances: instances.to_vec(),
                latency,
                glue: glue_of(&pool.slot),
            });
        }
        specs.push((format!("pipeline {k}"), pipeline.batch as usize, stages));
    }
    Pipelines::new(app, specs).map(Some).map_err(refused)
}

/// The routers of a Compass deployment's query classes: for each route, the app's tasks with their functions
/// calling, for each slot the route names, only the instances of its step (and every instance of the others).
pub(super) fn class_routers(
    app: &str,
    deployment: &Deployment,
    models: &ModelSlots,
    groups: &[Group],
    tasks: &[Arc<TaskRuntime>],
) -> Result<HashMap<String, ClassRouter>, StartError> {
    let mut routers = HashMap::new();
    for class in &deployment.classes {
        let mut routes = Vec::with_capacity(class.routes.len());
        for route in &class.routes {
            let mut slots = models.clone();
            for step in &route.steps {
                let group = groups
                    .iter()
                    .find(|g| {
                        (g.slot.as_str(), g.variant.as_str(), g.segment.as_str(), g.max_batch)
                            == (step.slot.as_str(), step.variant.as_str(), step.segment.as_str(), step.max_batch)
                    })
                    .ok_or_else(|| StartError::Deployment {
                        app: app.to_string(),
                        detail: format!(
                            "class `{}` routes slot `{}` to {} on {} batch {}, which the deployment lacks",
                            class.class, step.slot, step.variant, step.segment, step.max_batch
                        ),
                    })?;
                let instances = group.instances.iter().map(|i| (i.clone(), 1.0)).collect();
                slots.insert(step.slot.clone(), Arc::new(Pool::new(instances)));
            }
            let slots: Arc<dyn jig_runtime::ModelHost> = Arc::new(slots);
            let on_route: Vec<Arc<TaskRuntime>> = tasks
                .iter()
                .map(|t| Arc::new(TaskRuntime { function: t.function.with_models(slots.clone()), ..(**t).clone() }))
                .collect();
            routes.push(on_route.into());
        }
        let pick = jig_policy::WeightedRoundRobin::new(class.routes.iter().map(|r| r.rate_rps));
        let latency = Duration::from_secs_f64(class.latency_ms.max(0.0) / 1000.0);
        routers.insert(class.class.clone(), ClassRouter { latency, routes, pick: std::sync::Mutex::new(pick) });
    }
    Ok(routers)
}
