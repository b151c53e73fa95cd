//! The instances serving one model slot, with requests spread over them in proportion to their planned
//! throughput by [`jig_policy::route`], the same routing `jig simulate` runs.
//!
//! A caller that holds a request's inputs in memory of its own (a function's, in its sandbox) can
//! [`Pool::place`] them where the instance next in turn reads them in place (a worker's shared region, as GPU
//! segments are served, or this process's memory), after the requests placed before: the request then goes to
//! that instance, and its one copy is the one into its batch.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use jig_policy::WeightedRoundRobin;
use jig_wire::Bytes;

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
        let index = self.route().pick()?;
        Some(&self.instances[index])
    }

    /// Copies of a request's input bytes where the instance next in turn reads them in place, each after the
    /// last request's ([`Instance::place`]), or `None` for an empty pool or where no memory is left. The rotation
    /// does not move until the request comes to [`Pool::infer`], which sends it to the instance that holds its
    /// inputs.
    pub fn place(&self, inputs: &[&[u8]]) -> Option<Vec<Bytes>> {
        self.instances[self.route().peek()?].place(inputs)
    }

    /// Run `inputs` on the next instance, or on the one whose memory they lie in (see [`Pool::place`]).
    pub async fn infer(&self, inputs: Vec<Tensor>, deadline: Instant) -> Option<Result<Vec<Tensor>, InstanceError>> {
        let next = self.pick()?;
        let placed = inputs.first().map(Tensor::data).filter(|bytes| !bytes.is_empty());
        let instance = match placed {
            Some(bytes) if !next.holds(bytes) => self.instances.iter().find(|i| i.holds(bytes)).unwrap_or(next),
            _ => next,
        };
        Some(instance.infer(inputs, deadline).await)
    }

    fn route(&self) -> MutexGuard<'_, WeightedRoundRobin> {
        self.route.lock().unwrap_or_else(|p| p.into_inner())
    }
}
