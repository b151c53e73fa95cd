//! The instances serving one model slot, with requests spread over them in proportion to their planned
//! throughput by [`jig_policy::route`], the same routing `jig simulate` runs.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use jig_policy::WeightedRoundRobin;

use crate::Tensor;
use crate::instance::{Instance, InstanceError};

/// Instances of one slot, each with a weight (its planned throughput, requests per second).
pub struct Pool {
    instances: Vec<Arc<Instance>>,
    route: Mutex<WeightedRoundRobin>,
}

impl Pool {
    /// A pool over `instances`; weights that are not positive and finite count as 1.
    pub fn new(instances: Vec<(Arc<Instance>, f64)>) -> Pool {
        let route = Mutex::new(WeightedRoundRobin::new(instances.iter().map(|(_, w)| *w)));
        Pool { instances: instances.into_iter().map(|(i, _)| i).collect(), route }
    }

    /// The instances, in the order they were given.
    pub fn instances(&self) -> impl Iterator<Item = &Arc<Instance>> {
        self.instances.iter()
    }

    /// The instance the next request goes to, or `None` for an empty pool.
    pub fn pick(&self) -> Option<&Arc<Instance>> {
        let index = self.route.lock().unwrap_or_else(|p| p.into_inner()).pick()?;
        Some(&self.instances[index])
    }

    /// Run `inputs` on the next instance.
    pub async fn infer(&self, inputs: Vec<Tensor>, deadline: Instant) -> Option<Result<Vec<Tensor>, InstanceError>> {
        Some(self.pick()?.infer(inputs, deadline).await)
    }
}
