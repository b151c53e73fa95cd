//! The graph executor: one request's run through an app's tasks.
//!
//! **Graph execution.** The entry task runs on the request's payload. Every payload a task emits on a port
//! with edges becomes one invocation of each task the edges lead to; all invocations run concurrently, each
//! bounded by the request's deadline. The response gathers, in a fixed order, the return values of leaf tasks
//! (tasks with no outgoing edges) and the payloads emitted on ports without edges. The first invocation that
//! fails fails the request, and the rest are cancelled — as they are when the client goes away, since the
//! request's future owns them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use jig_runtime::{InvokeError, Outcome};

use super::{Admitted, App, TaskRuntime};
use crate::error::AppError;

/// One part of an app's response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The task that produced it.
    pub task: String,
    /// The port, for a payload emitted on a port without edges; `None` for a leaf's return value.
    pub port: Option<String>,
    /// What the task returned or emitted.
    pub bytes: Vec<u8>,
}

/// Told of every task invocation that ends: the gateway counts them in its metrics.
pub trait TaskObserver: Clone + Send + Sync + 'static {
    /// Task `task` of app `app` ended with `outcome` (`ok`, `error`, `deadline` or `queued`) after `elapsed`.
    fn task_done(&self, app: &str, task: &str, outcome: &str, elapsed: Duration);
}

impl App {
    /// Run the graph on `payload` by `deadline`, for a request [admitted](App::admit).
    pub async fn invoke(
        &self,
        admitted: &Admitted,
        payload: Vec<u8>,
        deadline: Instant,
        observer: &impl TaskObserver,
    ) -> Result<Vec<Output>, AppError> {
        let tasks: &[Arc<TaskRuntime>] = admitted.route.as_deref().unwrap_or(&self.tasks);
        // A request of pooled pipelines carries its seat in a booked batch from task to task.
        let models = self.pipelines.as_ref().map(|p| p.host(self.models.clone()));
        // Each invocation carries its position in the fan-out tree (emission indexes from the entry), so the
        // response lists outputs in an order that does not depend on which finished first.
        let mut running: JoinSet<(usize, Vec<u32>, Result<Outcome, AppError>)> = JoinSet::new();
        let mut outputs: Vec<(Vec<u32>, Output)> = Vec::new();
        let run = Run { tasks, models: models.as_ref(), deadline };
        self.spawn(&run, &mut running, self.entry, Vec::new(), payload, observer);
        while let Some(joined) = running.join_next().await {
            let (task, key, result) =
                joined.map_err(|e| AppError::Panicked { app: self.name.clone(), detail: e.to_string() })?;
            let outcome = result?;
            let t = &tasks[task];
            let mut n = 0u32;
            let mut child = || {
                let mut child = key.clone();
                child.push(n);
                n += 1;
                child
            };
            for emission in outcome.emitted {
                match t.routes.get(&emission.port) {
                    Some(targets) => {
                        for &target in targets {
                            let payload = emission.payload.clone();
                            self.spawn(&run, &mut running, target, child(), payload, observer);
                        }
                    }
                    None => {
                        let output =
                            Output { task: t.name.to_string(), port: Some(emission.port), bytes: emission.payload };
                        outputs.push((child(), output));
                    }
                }
            }
            if t.leaf {
                outputs.push((key, Output { task: t.name.to_string(), port: None, bytes: outcome.output }));
            }
        }
        outputs.sort_by(|a, b| a.0.cmp(&b.0));
        self.answered.fetch_add(1, Ordering::Relaxed);
        Ok(outputs.into_iter().map(|(_, o)| o).collect())
    }

    /// Run one task's invocation, at `key` in the request's fan-out tree, on `payload`.
    fn spawn(
        &self,
        run: &Run<'_>,
        running: &mut JoinSet<(usize, Vec<u32>, Result<Outcome, AppError>)>,
        task: usize,
        key: Vec<u32>,
        payload: Vec<u8>,
        observer: &impl TaskObserver,
    ) {
        self.invocations[task].fetch_add(1, Ordering::Relaxed);
        let (t, app, observer, deadline) = (run.tasks[task].clone(), self.name.clone(), observer.clone(), run.deadline);
        let function = match run.models {
            Some(models) => t.function.with_models(models.clone()),
            None => t.function.clone(),
        };
        let glue = self.glue.clone();
        running.spawn(async move {
            let started = Instant::now();
            let permit = match tokio::time::timeout_at(deadline.into(), t.permits.clone().acquire_owned()).await {
                Ok(Ok(permit)) => permit,
                _ => {
                    let error = AppError::Queued { app: app.clone(), task: t.name.to_string(), limit: t.concurrency };
                    observer.task_done(&app, &t.name, "queued", started.elapsed());
                    return (task, key, Err(error));
                }
            };
            let result = function.invoke(&payload, Some(deadline)).await;
            drop(permit);
            if let Ok(outcome) = &result {
                let (runs, ns) = &glue[task];
                runs.fetch_add(1, Ordering::Relaxed);
                ns.fetch_add(outcome.glue.as_nanos() as u64, Ordering::Relaxed);
            }
            let outcome = match &result {
                Ok(_) => "ok",
                Err(InvokeError::DeadlineExceeded { .. }) => "deadline",
                Err(_) => "error",
            };
            observer.task_done(&app, &t.name, outcome, started.elapsed());
            (task, key, result.map_err(|source| AppError::Task { app, source }))
        });
    }
}

/// One request's run through the graph: the tasks it runs, the model host they call when it is the request's
/// own (pooled pipelines'), and its deadline.
struct Run<'a> {
    tasks: &'a [Arc<TaskRuntime>],
    models: Option<&'a Arc<dyn jig_runtime::ModelHost>>,
    deadline: Instant,
}
