//! Run a handler natively, in this process, without a jig host: for unit tests of glue under `cargo test`, and
//! for comparing glue's speed with its WebAssembly build (the runtime benchmark does). Only native builds have
//! this module; a WebAssembly build talks to the real host.
//!
//! Inside [`Invocation::run`] the host calls behave as under jig: [`emit`](crate::emit) collects what the
//! handler emits (a copy, as the host takes it), [`config`](crate::config) reads the invocation's
//! configuration, [`remaining_time`](crate::remaining_time) counts down to its timeout,
//! [`log`](crate::log) writes to stderr, and [`infer`](crate::infer) runs the model given for the slot with
//! [`Invocation::model`] or fails with `unknown-slot`, as the host does. Outside `run` they panic: there is no
//! host to call.
//!
//! ```
//! use jig_sdk::native::Invocation;
//! use jig_sdk::{Function, Result};
//!
//! struct Shout;
//! impl Function for Shout {
//!     fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
//!         let port = jig_sdk::config("port").unwrap_or_else(|| "out".to_string());
//!         jig_sdk::emit(&port, &payload.to_ascii_uppercase());
//!         Ok(b"done".to_vec())
//!     }
//! }
//!
//! let outcome = Invocation::new().config("port", "loud").run::<Shout>(b"hi".to_vec());
//! assert_eq!(outcome.output.unwrap(), b"done");
//! assert_eq!(outcome.emitted, [("loud".to_string(), b"HI".to_vec())]);
//! ```

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::bindings::jig::function::inference::Tensor as WireTensor;
use crate::{Function, InferError, Level, Result, Tensor};

/// A model standing in for a slot: the inputs in, the outputs or the host's error out.
type Model = Box<dyn FnMut(&[Tensor]) -> std::result::Result<Vec<Tensor>, InferError>>;

/// One native call of a handler, with the configuration, models and timeout it sees.
#[derive(Default)]
pub struct Invocation {
    config: HashMap<String, String>,
    models: HashMap<String, Model>,
    timeout: Option<Duration>,
}

/// What a native call returned and emitted.
#[derive(Debug)]
pub struct Outcome {
    /// The handler's result.
    pub output: Result<Vec<u8>>,
    /// `(port, payload)` of each [`emit`](crate::emit), in order.
    pub emitted: Vec<(String, Vec<u8>)>,
}

/// The host state of the call in progress on this thread.
struct Host {
    config: HashMap<String, String>,
    models: HashMap<String, Model>,
    deadline: Option<Instant>,
    emitted: Vec<(String, Vec<u8>)>,
}

thread_local! {
    static HOST: RefCell<Option<Host>> = const { RefCell::new(None) };
}

impl Invocation {
    /// An invocation with no configuration, no models and no deadline.
    pub fn new() -> Self {
        Self::default()
    }

    /// Set the configuration value for `key`, as a bundle manifest's `config` table would.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.insert(key.into(), value.into());
        self
    }

    /// Serve [`infer`](crate::infer) calls for `slot` with `model`.
    pub fn model(
        mut self,
        slot: impl Into<String>,
        model: impl FnMut(&[Tensor]) -> std::result::Result<Vec<Tensor>, InferError> + 'static,
    ) -> Self {
        self.models.insert(slot.into(), Box::new(model));
        self
    }

    /// Give the call a deadline `timeout` from its start (none by default: `remaining_time` is unbounded).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Call `F`'s handler with `payload` on this thread.
    pub fn run<F: Function>(self, payload: Vec<u8>) -> Outcome {
        let host = Host {
            config: self.config,
            models: self.models,
            deadline: self.timeout.map(|t| Instant::now() + t),
            emitted: Vec::new(),
        };
        HOST.set(Some(host));
        let output = F::handle(payload);
        let host = HOST.take().expect("the native host is installed for the whole call");
        Outcome { output, emitted: host.emitted }
    }
}

fn with_host<T>(call: &str, f: impl FnOnce(&mut Host) -> T) -> T {
    HOST.with_borrow_mut(|host| match host {
        Some(host) => f(host),
        None => panic!("jig_sdk::{call} needs a host: call the handler through jig_sdk::native::Invocation::run"),
    })
}

// The host calls, with the signatures of the `jig:function` imports they stand in for.

pub(crate) fn infer(slot: &str, inputs: &[WireTensor]) -> std::result::Result<Vec<WireTensor>, InferError> {
    // The model runs with the host released, so it may itself call back into this crate (to log, say).
    let Some(mut model) = with_host("infer", |host| host.models.remove(slot)) else {
        return Err(InferError::UnknownSlot(format!("no model for slot `{slot}`: add one with Invocation::model")));
    };
    let inputs: Vec<Tensor> = inputs.iter().cloned().map(Into::into).collect();
    let outputs = model(&inputs);
    with_host("infer", |host| host.models.insert(slot.to_string(), model));
    outputs.map(|outputs| outputs.into_iter().map(Into::into).collect())
}

pub(crate) fn emit(port: &str, payload: &[u8]) {
    with_host("emit", |host| host.emitted.push((port.to_string(), payload.to_vec())));
}

pub(crate) fn remaining_time() -> u64 {
    with_host("remaining_time", |host| match host.deadline {
        None => u64::MAX,
        Some(deadline) => deadline.saturating_duration_since(Instant::now()).as_nanos().try_into().unwrap_or(u64::MAX),
    })
}

pub(crate) fn config(key: &str) -> Option<String> {
    with_host("config", |host| host.config.get(key).cloned())
}

pub(crate) fn log(level: Level, message: &str) {
    with_host("log", |_| eprintln!("[{level:?}] {message}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Doubler;
    impl Function for Doubler {
        fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
            let values: Vec<f32> = serde_json::from_slice(&payload)?;
            let outputs = crate::infer("doubler", &[Tensor::from_f32(&[values.len() as u64], &values)])?;
            crate::log(Level::Info, "doubled");
            Ok(serde_json::to_vec(outputs[0].view::<f32>()?.as_slice())?)
        }
    }

    fn doubler(inputs: &[Tensor]) -> std::result::Result<Vec<Tensor>, InferError> {
        let view = inputs[0].view::<f32>().map_err(|e| InferError::InvalidInput(e.to_string()))?;
        let doubled: Vec<f32> = view.as_slice().iter().map(|v| v * 2.0).collect();
        Ok(vec![Tensor::from_f32(&[doubled.len() as u64], &doubled)])
    }

    #[test]
    fn infer_runs_the_model_given_for_the_slot() {
        let outcome = Invocation::new().model("doubler", doubler).run::<Doubler>(b"[1.5, -2]".to_vec());
        assert_eq!(outcome.output.unwrap(), b"[3.0,-4.0]");
    }

    #[test]
    fn a_slot_without_a_model_is_unknown_as_under_the_host() {
        let outcome = Invocation::new().run::<Doubler>(b"[1]".to_vec());
        assert!(
            matches!(outcome.output, Err(crate::Error::Model(InferError::UnknownSlot(m))) if m.contains("doubler"))
        );
    }

    struct Clock;
    impl Function for Clock {
        fn handle(_: Vec<u8>) -> Result<Vec<u8>> {
            Ok(crate::remaining_time().as_secs().to_string().into_bytes())
        }
    }

    #[test]
    fn remaining_time_counts_down_to_the_timeout() {
        let outcome = Invocation::new().timeout(Duration::from_secs(60)).run::<Clock>(Vec::new());
        let left: u64 = String::from_utf8(outcome.output.unwrap()).unwrap().parse().unwrap();
        assert!((58..60).contains(&left), "{left} s left of 60");
    }

    #[test]
    #[should_panic(expected = "needs a host")]
    fn host_calls_outside_a_run_say_how_to_make_one() {
        crate::emit("out", b"lost");
    }
}
