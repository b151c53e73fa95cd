//! A guest that does what its payload asks, to exercise the host: the runtime's tests and benchmarks run it.
//! Payload: JSON `{"op": "<name>", ...}`; see [`Probe::handle`] for the operations.

use jig_sdk::bindings::jig::function::{inference, types};
use jig_sdk::{Error, Function, Result, Tensor};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
enum Op {
    /// Return `text`.
    Echo { text: String },
    /// Panic (a trap after the message goes to stderr).
    Panic,
    /// Compute forever.
    Spin,
    /// Allocate `bytes` in 1 MiB chunks and keep them.
    Grow { bytes: usize },
    /// Call `infer` on `slot` `count` times with a u8 tensor of `bytes` bytes, or with `shape` an f32 tensor of
    /// that shape (all 0.5); return the total output bytes.
    Infer {
        slot: String,
        count: usize,
        #[serde(default)]
        bytes: usize,
        shape: Option<Vec<u64>>,
    },
    /// Call `infer` on `slot` with one f32 tensor; return the outputs as JSON `[{"shape": […], "values": […]}]`.
    InferF32 { slot: String, shape: Vec<u64>, values: Vec<f32> },
    /// Call `infer` with a tensor whose data does not match its shape, bypassing the SDK's checks.
    BadTensor,
    /// Emit `count` payloads of `bytes` bytes on `port`.
    Emit { port: String, count: usize, bytes: usize },
    /// Return the remaining time in nanoseconds.
    Remaining,
    /// Return the configuration value of `key`.
    Config { key: String },
    /// Report what the standard library can see of the outside world.
    Sandbox,
}

pub struct Probe;

impl Function for Probe {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let op: Op = serde_json::from_slice(&payload)?;
        match op {
            Op::Echo { text } => Ok(text.into_bytes()),
            Op::Panic => panic!("the probe was asked to panic"),
            Op::Spin => {
                let mut x = 0u64;
                loop {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
            Op::Grow { bytes } => {
                let mut kept: Vec<Vec<u8>> = Vec::new();
                while kept.len() * (1 << 20) < bytes {
                    kept.push(vec![1u8; 1 << 20]);
                }
                Ok(format!("{}", kept.iter().map(Vec::len).sum::<usize>()).into_bytes())
            }
            Op::Infer { slot, count, bytes, shape } => {
                let input = match shape {
                    Some(shape) => Tensor::from_f32(&shape, &vec![0.5; shape.iter().product::<u64>() as usize]),
                    None => Tensor::from_u8(&[bytes as u64], &vec![7u8; bytes]),
                };
                let mut total = 0;
                for _ in 0..count {
                    let outputs = jig_sdk::infer(&slot, std::slice::from_ref(&input))?;
                    total += outputs.iter().map(|t| t.bytes().len()).sum::<usize>();
                }
                Ok(total.to_string().into_bytes())
            }
            Op::InferF32 { slot, shape, values } => {
                let outputs = jig_sdk::infer(&slot, &[Tensor::from_f32(&shape, &values)])?;
                let outputs: Vec<serde_json::Value> = outputs
                    .iter()
                    .map(|t| {
                        let values = t.view::<f32>().map(|v| v.as_slice().to_vec()).unwrap_or_default();
                        serde_json::json!({ "shape": t.shape(), "values": values })
                    })
                    .collect();
                Ok(serde_json::to_vec(&outputs)?)
            }
            Op::BadTensor => {
                let bad = types::Tensor { dtype: types::Dtype::F32, shape: vec![2, 2], data: vec![0; 3] };
                inference::infer("identity", &[bad])?;
                Err(Error::internal("the host accepted a malformed tensor"))
            }
            Op::Emit { port, count, bytes } => {
                for i in 0..count {
                    let mut payload = vec![0u8; bytes];
                    if let Some(first) = payload.first_mut() {
                        *first = i as u8;
                    }
                    jig_sdk::emit(&port, &payload);
                }
                Ok(count.to_string().into_bytes())
            }
            Op::Remaining => Ok(jig_sdk::remaining_time().as_nanos().to_string().into_bytes()),
            Op::Config { key } => Ok(jig_sdk::config(&key).unwrap_or_default().into_bytes()),
            Op::Sandbox => {
                let report = serde_json::json!({
                    "env": std::env::vars().count(),
                    "args": std::env::args().count(),
                    "read_dir": std::fs::read_dir("/").is_ok(),
                    "open": std::fs::File::open("/etc/passwd").is_ok(),
                    "unix_time": std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_secs())
                        .unwrap_or(u64::MAX),
                    "hash": std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), 42u32),
                });
                Ok(serde_json::to_vec(&report)?)
            }
        }
    }
}

jig_sdk::export!(Probe);
