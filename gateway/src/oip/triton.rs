//! Triton's extensions to the protocol ([`jig_api::triton`]) over the gateway's apps: the repository index (each
//! app's slots, and each app that declares `[tensors]`, with its state), a model's configuration as its plan
//! serves it, its statistics from its instances' counters, and model control: `unload` stops a slot's
//! instances (the app runs on without them; a call of the slot is told it has none), `load` plans them again.
//! Model control acts on this gateway's copy of the app: a restart or a redeploy loads every slot again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use jig_api::ErrorKind;
use jig_api::oip::SLOT_SEPARATOR;
use jig_api::triton::{
    BatchStats, ConfigTensor, DynamicBatching, InferStats, InstanceGroup, ModelConfig, ModelStatistics, ModelStats,
    RepositoryModel, StatDuration,
};
use jig_app::App;
use jig_model_host::onnx::TensorSpec;

use super::{Model, Refusal, not_ready};
use crate::Gateway;

impl Gateway {
    /// Every v2 model and its state (`ready_only`: only those ready), by name: each running app's slots and,
    /// for an app that declares `[tensors]`, the app; an app that should run and does not, by its name.
    pub(crate) fn v2_repository(&self, ready_only: bool) -> Vec<RepositoryModel> {
        let mut models = BTreeMap::new();
        let apps: Vec<_> = self.apps.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        for app in &apps {
            let mut names: Vec<String> =
                app.models().iter().map(|(slot, _)| format!("{}{SLOT_SEPARATOR}{slot}", app.name)).collect();
            if app.tensors.is_some() {
                names.push(app.name.clone());
            }
            for name in names {
                let reason = self.v2_ready(&name).err().map(|r| r.message).unwrap_or_default();
                models.insert(name, reason);
            }
        }
        for (app, reason) in self.unready.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            models.entry(app.clone()).or_insert_with(|| reason.clone());
        }
        models
            .into_iter()
            .filter(|(_, reason)| !ready_only || reason.is_empty())
            .map(|(name, reason)| RepositoryModel {
                name,
                version: jig_api::oip::VERSION.into(),
                state: if reason.is_empty() { "READY" } else { "UNAVAILABLE" }.into(),
                reason,
            })
            .collect()
    }

    /// The model `name`'s configuration: the batch, instances and batching its plan gives it.
    pub(crate) fn v2_config(&self, name: &str) -> Result<ModelConfig, Refusal> {
        let model = self.v2_model(name)?;
        let (app, slot, pool) = match &model {
            Model::App { tensors, .. } => {
                let tensor = |decl: &jig_manifest::TensorDecl| ConfigTensor {
                    name: decl.name.clone(),
                    data_type: format!("TYPE_{}", decl.datatype),
                    dims: decl.shape.clone(),
                };
                return Ok(ModelConfig {
                    name: name.into(),
                    platform: "jig_app".into(),
                    backend: "jig".into(),
                    max_batch_size: 0,
                    input: vec![tensor(&tensors.input)],
                    output: vec![tensor(&tensors.output)],
                    instance_group: Vec::new(),
                    dynamic_batching: None,
                });
            }
            Model::Slot { app, slot, pool } => (app, slot, pool),
        };
        let instance = pool.instances().next().ok_or_else(|| not_ready(name))?;
        let planned: Vec<_> = app.deployment.instances.iter().filter(|p| &p.slot == slot).collect();
        // Batched when every input's first dimension is free: then the plan's largest batch, and shapes without it.
        let batched = instance.inputs().iter().all(|s| s.shape.first().is_some_and(Option::is_none));
        let max_batch_size = if batched { planned.iter().map(|p| p.max_batch).max().unwrap_or(1).max(1) } else { 0 };
        let tensors = |specs: &[TensorSpec]| -> Vec<ConfigTensor> {
            specs
                .iter()
                .map(|s| ConfigTensor {
                    name: s.name.clone(),
                    data_type: format!("TYPE_{}", s.dtype.oip_name()),
                    dims: s.shape.iter().skip(usize::from(batched)).map(|d| d.map_or(-1, |d| d as i64)).collect(),
                })
                .collect()
        };
        let wait_ms = planned.iter().map(|p| p.wait_ms).fold(0.0, f64::max);
        Ok(ModelConfig {
            name: name.into(),
            platform: "onnxruntime_onnx".into(),
            backend: "onnxruntime".into(),
            max_batch_size,
            input: tensors(instance.inputs()),
            output: tensors(instance.outputs()),
            instance_group: planned
                .iter()
                .map(|p| InstanceGroup {
                    name: format!("{}@{}", p.variant, p.segment),
                    kind: if p.segment.starts_with("cpu") { "KIND_CPU" } else { "KIND_GPU" }.into(),
                    count: p.count,
                })
                .collect(),
            dynamic_batching: (wait_ms > 0.0)
                .then(|| DynamicBatching { max_queue_delay_microseconds: (wait_ms * 1000.0).round() as u64 }),
        })
    }

    /// Statistics of the model `name`, or of every model of the repository.
    pub(crate) fn v2_statistics(&self, name: Option<&str>) -> Result<ModelStatistics, Refusal> {
        let names = match name {
            Some(name) => vec![name.to_string()],
            None => self.v2_repository(true).into_iter().map(|m| m.name).collect(),
        };
        let model_stats = names.iter().map(|name| self.v2_model_stats(name)).collect::<Result<_, _>>()?;
        Ok(ModelStatistics { model_stats })
    }

    fn v2_model_stats(&self, name: &str) -> Result<ModelStats, Refusal> {
        let mut stats = ModelStats {
            name: name.into(),
            version: jig_api::oip::VERSION.into(),
            inference_count: 0,
            execution_count: 0,
            last_inference: 0,
            inference_stats: InferStats::default(),
            batch_stats: Vec::new(),
        };
        match self.v2_model(name)? {
            // An app's requests run a graph, not one queue and batch: only their count is kept.
            Model::App { app, .. } => {
                let answered = app.answered();
                stats.inference_count = answered;
                stats.execution_count = answered;
                let count = StatDuration { count: answered, ns: 0 };
                let s = &mut stats.inference_stats;
                (s.success, s.queue, s.compute_input, s.compute_infer, s.compute_output) =
                    (count, count, count, count, count);
            }
            // Per request, as Triton counts: each answered request's time in all, in the queue, and its batch's
            // phases (a batch of four counts its phases four times).
            Model::Slot { pool, .. } => {
                let mut sum = [0u64; 7];
                let mut by_size: BTreeMap<u64, BatchStats> = BTreeMap::new();
                for instance in pool.instances() {
                    let s = instance.stats();
                    let counters =
                        [&s.answered, &s.request_ns, &s.queue_ns, &s.input_ns, &s.execute_ns, &s.output_ns, &s.rows];
                    for (total, counter) in sum.iter_mut().zip(counters) {
                        *total += counter.load(Ordering::Relaxed);
                    }
                    let failed = [&s.failed, &s.dropped_late, &s.dropped_stale];
                    stats.inference_stats.fail.count += failed.iter().map(|c| c.load(Ordering::Relaxed)).sum::<u64>();
                    stats.execution_count += s.batches.load(Ordering::Relaxed);
                    stats.last_inference = stats.last_inference.max(s.last_answered_ms.load(Ordering::Relaxed));
                    for batch in s.batch_latencies() {
                        let size = by_size
                            .entry(batch.rows)
                            .or_insert(BatchStats { batch_size: batch.rows, ..Default::default() });
                        let phases = [&mut size.compute_input, &mut size.compute_infer, &mut size.compute_output];
                        for (phase, ns) in phases.into_iter().zip(batch.phases_ns) {
                            phase.count += batch.batches;
                            phase.ns += ns;
                        }
                    }
                }
                stats.batch_stats = by_size.into_values().collect();
                let [answered, request_ns, queue_ns, input_ns, execute_ns, output_ns, rows] = sum;
                stats.inference_count = rows;
                let at = |ns| StatDuration { count: answered, ns };
                let s = &mut stats.inference_stats;
                (s.success, s.queue, s.compute_input, s.compute_infer, s.compute_output) =
                    (at(request_ns), at(queue_ns), at(input_ns), at(execute_ns), at(output_ns));
            }
        }
        Ok(stats)
    }
}

impl Gateway {
    /// Model control's `unload` of `APP.SLOT`: the app starts again without the slot's instances (a copy beside
    /// the running one, swapped in as a re-plan is), and the slot stays unloaded across re-plans until loaded.
    pub(crate) async fn v2_unload(self: &Arc<Self>, name: &str) -> Result<(), Refusal> {
        let (app, slot) = self.controlled(name, "unload")?;
        if app.unloaded.contains(&slot) {
            return Ok(());
        }
        let mut unloaded = app.unloaded.clone();
        unloaded.insert(slot);
        self.restart_with(app, false, unloaded).await
    }

    /// Model control's `load`: of `APP.SLOT`, an unloaded slot's instances planned again (within what is free)
    /// and started; a loaded model, or an app (`APP`), is loaded already.
    pub(crate) async fn v2_load(self: &Arc<Self>, name: &str) -> Result<(), Refusal> {
        if !name.contains(SLOT_SEPARATOR) {
            return self.v2_model(name).map(drop);
        }
        let (app, slot) = self.controlled(name, "load")?;
        if !app.unloaded.contains(&slot) {
            return Ok(());
        }
        let mut unloaded = app.unloaded.clone();
        unloaded.remove(&slot);
        self.restart_with(app, true, unloaded).await
    }

    /// The running app and slot model control names, or why it cannot act on them.
    fn controlled(&self, name: &str, what: &str) -> Result<(Arc<App>, String), Refusal> {
        let Some((_, slot)) = name.split_once(SLOT_SEPARATOR) else {
            let message = format!("model `{name}` is an app: deploy it (`jig deploy`) or delete it (`jig delete`)");
            return Err(Refusal::new(ErrorKind::InvalidRequest, message));
        };
        if self.cluster.is_some() {
            let message = format!(
                "cannot {what} `{name}` on one replica of a cluster: every replica runs the cluster's deployment \
                 (redeploy the app to change it)"
            );
            return Err(Refusal::new(ErrorKind::InvalidRequest, message));
        }
        let Model::Slot { app, .. } = self.v2_model(name)? else {
            return Err(Refusal::new(ErrorKind::NotFound, format!("no model slot `{name}`")));
        };
        if app.planner == jig_planner::Strategy::Compass || app.planner == jig_planner::Strategy::Ppipe {
            let message = format!(
                "cannot {what} `{name}`: app `{}` is planned by {:?}, whose routes need every slot",
                app.name, app.planner
            );
            return Err(Refusal::new(ErrorKind::InvalidRequest, message));
        }
        Ok((app, slot.to_string()))
    }

    /// Start `app` again with the slots `unloaded` stopped: under its deployment, or (`replan`) planned anew for
    /// its stored demand windows, and swap it in unless it was redeployed or deleted meanwhile.
    async fn restart_with(
        self: &Arc<Self>,
        app: Arc<App>,
        replan: bool,
        unloaded: std::collections::BTreeSet<String>,
    ) -> Result<(), Refusal> {
        let _control = self.control.lock().await;
        let gateway = self.clone();
        let running = app.clone();
        let started = tokio::task::spawn_blocking(move || -> Result<App, String> {
            let bundle = gateway.store.bundle(&running.bundle).map_err(|e| e.to_string())?;
            let deployment = if replan {
                // The stored record's demand windows (file I/O: here, off the async executor).
                let records = gateway.store.apps_list().unwrap_or_default();
                let windows = (records.into_iter().find(|r| r.name == running.name))
                    .map(|r| r.demand_windows)
                    .unwrap_or_default();
                let capacity = gateway.free_capacity(Some(&running.name));
                jig_app::deployment::plan_for_deploy(&bundle, &windows, &capacity, &running.observations())
                    .map_err(|e| e.to_string())?
            } else {
                running.deployment.clone()
            };
            let (runtime, hosts) = (&gateway.runtime, &gateway.hosts);
            let (hash, deployed_at) = (&running.bundle, running.deployed_at);
            App::start_from(runtime, hosts, &bundle, hash, deployed_at, deployment, Some(&running), unloaded)
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|started| started);
        let mut new = started.map_err(|why| Refusal::new(ErrorKind::Internal, format!("app `{}`: {why}", app.name)))?;
        new.replans = app.replans;
        new.continue_counts(&app);
        let mut apps = self.apps.write().unwrap_or_else(|p| p.into_inner());
        if apps.get(&app.name).is_some_and(|a| Arc::ptr_eq(a, &app)) {
            apps.insert(app.name.clone(), Arc::new(new));
            tracing::info!(app = %app.name, "model control: running without slots {:?}", apps[&app.name].unloaded);
        }
        Ok(())
    }
}
