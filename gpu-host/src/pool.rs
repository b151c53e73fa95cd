//! The instances serving one model slot, with requests spread over them in proportion to their planned
//! throughput (smooth weighted round-robin: deterministic, and no instance waits long for its turn).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::Tensor;
use crate::instance::{Instance, InstanceError};

/// Instances of one slot, each with a weight (its planned throughput, requests per second).
pub struct Pool {
    instances: Vec<(Arc<Instance>, f64)>,
    /// Smooth weighted round-robin credit per instance.
    credit: Mutex<Vec<f64>>,
}

impl Pool {
    /// A pool over `instances`; weights that are not positive and finite count as 1.
    pub fn new(instances: Vec<(Arc<Instance>, f64)>) -> Pool {
        let instances: Vec<_> =
            instances.into_iter().map(|(i, w)| (i, if w.is_finite() && w > 0.0 { w } else { 1.0 })).collect();
        let credit = Mutex::new(vec![0.0; instances.len()]);
        Pool { instances, credit }
    }

    pub fn instances(&self) -> impl Iterator<Item = &Arc<Instance>> {
        self.instances.iter().map(|(i, _)| i)
    }

    /// The instance the next request goes to, or `None` for an empty pool.
    pub fn pick(&self) -> Option<&Arc<Instance>> {
        let mut credit = self.credit.lock().unwrap_or_else(|p| p.into_inner());
        let total: f64 = self.instances.iter().map(|(_, w)| w).sum();
        for (c, (_, w)) in credit.iter_mut().zip(&self.instances) {
            *c += w;
        }
        let (best, _) = credit.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1))?;
        credit[best] -= total;
        Some(&self.instances[best].0)
    }

    /// Run `inputs` on the next instance.
    pub async fn infer(&self, inputs: Vec<Tensor>, deadline: Instant) -> Option<Result<Vec<Tensor>, InstanceError>> {
        Some(self.pick()?.infer(inputs, deadline).await)
    }
}
