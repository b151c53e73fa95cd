//! The Open Inference Protocol (KServe v2) on the gateway: each deployed app's model slots served as v2
//! models named `APP.SLOT`, and each app that declares `[tensors]` as the v2 model `APP`, so that Triton's and
//! KServe's clients work with jig, over HTTP ([`http`], the gateway's port) and over gRPC ([`grpc`], `jig up
//! --grpc-listen`). Both decode into the same tensors ([`jig_api::oip::take_inputs`]) and run here. Triton's
//! repository index, model configuration and statistics extensions are in [`triton`] (served over HTTP).
//!
//! A v2 call of a slot runs it on its planned instances, batched with the app's own calls to it, under the app's
//! invoke token, deadline (`jig-timeout-ms`, else the SLO), admission and metrics. It is not app demand: the
//! plan is sized for the app's requests, so v2 calls do not count towards re-plans, and they are counted as the
//! model's (`jig_model_requests_total`), apart from the app's invocations. A v2 call of an app is an invocation
//! of it, as `/v1/apps/APP/invoke` is (and app demand): its input tensor reaches the entry task as a tensor
//! envelope, and the one tensor envelope the app outputs is the answer.

pub(crate) mod grpc;
mod http;
mod triton;

use std::sync::Arc;
use std::time::{Duration, Instant};

use jig_api::ErrorKind;
use jig_api::oip::{Declared, ModelMetadata, SLOT_SEPARATOR, TensorMetadata, VERSION};
use jig_app::App;
use jig_manifest::{AppTensors, TensorDecl};
use jig_model_host::instance::InstanceError;
use jig_model_host::onnx::{ModelError, TensorSpec};
use jig_model_host::pool::Pool;
use jig_model_host::{DType, Tensor};
use jig_wire::Envelope;
use jig_wire::envelope::{TRAILER_RESERVE, TensorMeta};

use crate::metrics::InFlight;
use crate::{Gateway, classify};

/// Why a v2 call is refused, whichever transport carries it: its kind sets the HTTP status and the gRPC code.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
}

impl Refusal {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Refusal {
        Refusal { kind, message: message.into() }
    }
}

/// A v2 model: a slot of an app, or an app that declares `[tensors]`.
pub(crate) enum Model {
    Slot { app: Arc<App>, slot: String, pool: Arc<Pool> },
    App { app: Arc<App>, tensors: AppTensors },
}

impl Model {
    pub(crate) fn app(&self) -> &App {
        match self {
            Model::Slot { app, .. } | Model::App { app, .. } => app,
        }
    }
}

/// A model's inputs and outputs, by name and element type, as the codecs check them.
pub(crate) struct Signature {
    pub(crate) inputs: Vec<(String, DType)>,
    pub(crate) outputs: Vec<(String, DType)>,
}

/// `list` as the codec's declarations.
pub(crate) fn declared(list: &[(String, DType)]) -> Vec<Declared<'_>> {
    list.iter().map(|(name, dtype)| Declared { name, dtype: *dtype }).collect()
}

impl Gateway {
    /// The v2 model `name` names, or the 404 that says what there is instead.
    pub(crate) fn v2_model(&self, name: &str) -> Result<Model, Refusal> {
        let unknown = |detail: String| {
            Refusal::new(
                ErrorKind::NotFound,
                format!(
                    "unknown model `{name}`: v2 models are a deployed app's model slots, `APP.SLOT`, and apps that \
                     declare `[tensors]`, `APP`; {detail}"
                ),
            )
        };
        let Some((app_name, slot)) = name.split_once(SLOT_SEPARATOR) else {
            let app = self.app(name).ok_or_else(|| unknown(format!("no app `{name}` is deployed")))?;
            let tensors = app.tensors.clone().ok_or_else(|| {
                unknown(format!(
                    "app `{name}` declares no `[tensors]`, so it is no v2 model itself; its slots are `{name}.SLOT`"
                ))
            })?;
            return Ok(Model::App { app, tensors });
        };
        let app = self.app(app_name).ok_or_else(|| unknown(format!("no app `{app_name}` is deployed")))?;
        let Some(pool) = app.models().get(slot).cloned() else {
            let mut slots: Vec<&str> = app.models().iter().map(|(s, _)| s).collect();
            slots.sort_unstable();
            return Err(unknown(format!("`{app_name}` has the slots: {}", slots.join(", "))));
        };
        Ok(Model::Slot { app, slot: slot.to_string(), pool })
    }

    /// What the model `name` takes and answers, as `GET /v2/models/{model}` and gRPC's `ModelMetadata` say it.
    pub(crate) fn v2_metadata(&self, name: &str) -> Result<ModelMetadata, Refusal> {
        let (platform, inputs, outputs) = match self.v2_model(name)? {
            Model::App { tensors, .. } => {
                ("jig_app", vec![decl_metadata(&tensors.input)], vec![decl_metadata(&tensors.output)])
            }
            Model::Slot { pool, .. } => {
                let instance = pool.instances().next().ok_or_else(|| not_ready(name))?;
                let metadata = |specs: &[TensorSpec]| specs.iter().map(spec_metadata).collect();
                ("onnxruntime_onnx", metadata(instance.inputs()), metadata(instance.outputs()))
            }
        };
        Ok(ModelMetadata {
            name: name.into(),
            versions: vec![VERSION.into()],
            platform: platform.into(),
            inputs,
            outputs,
        })
    }

    /// Whether the model `name` is ready ([`crate::ready`]): `Ok` when it is, the 503 when not, the 404 when
    /// there is no such model.
    pub(crate) fn v2_ready(&self, name: &str) -> Result<(), Refusal> {
        let (app, slot) = match name.split_once(SLOT_SEPARATOR) {
            Some((app, slot)) => (app, Some(slot)),
            None => (name, None),
        };
        if let Some(why) = self.model_unready(app, slot) {
            return Err(Refusal::new(ErrorKind::Unavailable, why));
        }
        self.v2_model(name).map(drop)
    }

    /// The call of `model` counted in flight until the guard drops: a slot's as the model's, an app's as an
    /// invocation and its demand.
    pub(crate) fn v2_started(&self, model: &Model) -> InFlight {
        match model {
            Model::Slot { app, slot, .. } => self.metrics.model_request_started(&app.name, slot),
            Model::App { app, .. } => {
                self.demand.lock().unwrap_or_else(|p| p.into_inner()).entry(app.name.clone()).or_default().arrived();
                self.metrics.request_started(&app.name)
            }
        }
    }

    /// The call of `model` answered with `code` after `elapsed` (see [`Gateway::v2_started`]).
    pub(crate) fn v2_counted(&self, model: &Model, code: u16, elapsed: Duration) {
        match model {
            Model::Slot { app, slot, .. } => self.metrics.model_request_done(&app.name, slot, code, elapsed),
            Model::App { app, .. } => self.count_answer(&app.name, code, elapsed, false),
        }
    }

    /// What the model `name` takes and answers, by name and type; a slot without a running instance is not ready.
    pub(crate) fn v2_signature(&self, model: &Model, name: &str) -> Result<Signature, Refusal> {
        let pairs = |specs: &[TensorSpec]| specs.iter().map(|s| (s.name.clone(), s.dtype)).collect();
        match model {
            Model::Slot { pool, .. } => {
                let instance = pool.instances().next().ok_or_else(|| not_ready(name))?;
                Ok(Signature { inputs: pairs(instance.inputs()), outputs: pairs(instance.outputs()) })
            }
            Model::App { tensors, .. } => {
                let pair = |decl: &TensorDecl| {
                    (decl.name.clone(), DType::from_oip_name(&decl.datatype).expect("checked when the bundle was read"))
                };
                Ok(Signature { inputs: vec![pair(&tensors.input)], outputs: vec![pair(&tensors.output)] })
            }
        }
    }

    /// Run `model` on `inputs` (checked against its signature) by `deadline`, admitted by its app: the outputs,
    /// in the order the model declares them.
    pub(crate) async fn v2_execute(
        &self,
        model: &Model,
        name: &str,
        inputs: Vec<Tensor>,
        deadline: Instant,
        class: Option<&str>,
    ) -> Result<Vec<Tensor>, Refusal> {
        let app = model.app();
        let admitted = app.admit(class).map_err(|e| Refusal::new(classify(&e, deadline), e.to_string()))?;
        match model {
            Model::Slot { pool, .. } => {
                let outputs = match tokio::time::timeout_at(deadline.into(), pool.infer(inputs, deadline)).await {
                    Err(_) => {
                        admitted.settle(false);
                        let message = format!("model `{name}` did not answer by the deadline");
                        return Err(Refusal::new(ErrorKind::Deadline, message));
                    }
                    Ok(None) => return Err(not_ready(name)),
                    // The client's fault, said in its model's terms (not the instance's or the variant's name).
                    Ok(Some(Err(InstanceError::Input { source: ModelError::Input { detail, .. }, .. }))) => {
                        return Err(Refusal::new(ErrorKind::InvalidInput, format!("model `{name}`: {detail}")));
                    }
                    Ok(Some(Err(e))) => {
                        let kind = match &e {
                            InstanceError::Dropped { .. } => ErrorKind::Dropped,
                            InstanceError::Input { .. } => ErrorKind::InvalidInput,
                            _ => ErrorKind::FunctionFailed,
                        };
                        if kind == ErrorKind::Dropped {
                            admitted.settle(false);
                        }
                        return Err(Refusal::new(kind, format!("model `{name}`: {e}")));
                    }
                    Ok(Some(Ok(outputs))) => outputs,
                };
                admitted.settle(Instant::now() <= deadline);
                Ok(outputs)
            }
            Model::App { tensors, .. } => {
                let payload = tensor_envelope(&inputs[0]);
                let outputs = match app.invoke(&admitted, payload, deadline, &self.metrics).await {
                    Ok(outputs) => {
                        admitted.settle(Instant::now() <= deadline);
                        outputs
                    }
                    Err(e) => {
                        let kind = classify(&e, deadline);
                        if matches!(kind, ErrorKind::Dropped | ErrorKind::Deadline) {
                            admitted.settle(false);
                        }
                        return Err(Refusal::new(kind, e.to_string()));
                    }
                };
                let count = outputs.len();
                let answers: Vec<Tensor> = outputs.into_iter().filter_map(|o| from_tensor_envelope(o.bytes)).collect();
                let declared = DType::from_oip_name(&tensors.output.datatype);
                match <[Tensor; 1]>::try_from(answers) {
                    Ok([answer]) if Some(answer.dtype()) == declared => Ok(vec![answer]),
                    Ok([answer]) => Err(Refusal::new(
                        ErrorKind::FunctionFailed,
                        format!(
                            "app `{name}` answered {}, not the {} its `[tensors]` output declares",
                            answer.dtype().oip_name(),
                            tensors.output.datatype
                        ),
                    )),
                    Err(answers) => Err(Refusal::new(
                        ErrorKind::FunctionFailed,
                        format!(
                            "app `{name}` answered {} tensor envelopes among its {count} outputs; as a v2 model it \
                             answers one: its `[tensors]` output",
                            answers.len()
                        ),
                    )),
                }
            }
        }
    }
}

/// The 503 of a slot without a running instance.
pub(crate) fn not_ready(model: &str) -> Refusal {
    Refusal::new(ErrorKind::Overloaded, format!("model `{model}` has no running instance"))
}

fn spec_metadata(spec: &TensorSpec) -> TensorMetadata {
    TensorMetadata {
        name: spec.name.clone(),
        datatype: spec.dtype.oip_name().into(),
        shape: spec.shape.iter().map(|d| d.map_or(-1, |d| d as i64)).collect(),
    }
}

fn decl_metadata(decl: &TensorDecl) -> TensorMetadata {
    TensorMetadata { name: decl.name.clone(), datatype: decl.datatype.clone(), shape: decl.shape.clone() }
}

/// `tensor` as a tensor envelope ([`TensorMeta`]), the payload an app's entry task takes.
fn tensor_envelope(tensor: &Tensor) -> Vec<u8> {
    let meta = TensorMeta { datatype: tensor.dtype().oip_name().into(), shape: tensor.shape().to_vec() };
    let mut body = Vec::with_capacity(tensor.data().len() + TRAILER_RESERVE);
    body.extend_from_slice(tensor.data());
    Envelope { meta, body }.encode()
}

/// The tensor in `bytes`, when they are a tensor envelope.
fn from_tensor_envelope(bytes: Vec<u8>) -> Option<Tensor> {
    let Envelope { meta, body } = Envelope::<TensorMeta>::decode(bytes).ok()?;
    Tensor::new(DType::from_oip_name(&meta.datatype)?, meta.shape, body).ok()
}
