//! `forward`: one partition of a model cut into blocks (PPipe's pooled pipelines; `scripts/partition_model.py`
//! cuts the model): run the slot on the tensor it is given and pass the output on, to the task of the next
//! partition or, from the last, back to the caller. A chain of `forward` tasks serves the model across as many
//! pools of instances as it has partitions, each planned and batched on its own.
//!
//! **Input**: a tensor envelope: the tensor's raw little-endian bytes, with metadata `{"datatype", "shape"}`
//! (the Open Inference Protocol's names: `FP32`, `INT64`, …), as `jig invoke APP FILE --meta
//! '{"datatype":"FP32","shape":[1,3,48,320]}'` sends it.
//!
//! **Model** (slot `slot`, default `model`): one input; its first output is passed on.
//!
//! **Emits**, with `port` set: the output as a tensor envelope on that port, and returns `{"forwarded": port}`.
//! Without `port` (the last partition) it **returns** the output as a tensor envelope.

use jig_sdk::envelope::{Envelope, TRAILER_RESERVE, TensorMeta};
use jig_sdk::{DType, Error, Function, Result, Tensor};

/// `tensor` as a tensor envelope.
pub fn encode(tensor: &Tensor) -> Vec<u8> {
    let mut body = Vec::with_capacity(tensor.bytes().len() + TRAILER_RESERVE);
    body.extend_from_slice(tensor.bytes());
    let meta = TensorMeta { datatype: tensor.dtype().oip_name().into(), shape: tensor.shape().to_vec() };
    Envelope { meta, body }.encode()
}

/// The tensor a tensor envelope holds.
pub fn decode(payload: Vec<u8>) -> Result<Tensor> {
    let Envelope { meta, body } = Envelope::<TensorMeta>::decode(payload)?;
    Tensor::new(DType::from_oip_name(&meta.datatype)?, &meta.shape, body)
}

pub struct Forward;

impl Function for Forward {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let slot = jig_sdk::config("slot").unwrap_or_else(|| "model".into());
        let input = decode(payload)?;
        let outputs = jig_sdk::infer(&slot, &[input])?;
        let output = outputs.first().ok_or_else(|| Error::internal(format!("slot `{slot}` returned no output")))?;
        match jig_sdk::config("port") {
            Some(port) => {
                jig_sdk::emit(&port, &encode(output));
                Ok(serde_json::to_vec(&serde_json::json!({ "forwarded": port }))?)
            }
            None => Ok(encode(output)),
        }
    }
}

jig_sdk::export!(Forward);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tensor_envelope_round_trips_and_bad_metadata_is_named() {
        let tensor = Tensor::from_f32(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(decode(encode(&tensor)).unwrap(), tensor);
        let bad = Envelope { meta: TensorMeta { datatype: "F32".into(), shape: vec![1] }, body: vec![0; 4] };
        let err = decode(bad.encode()).unwrap_err().to_string();
        assert!(err.contains("`datatype` \"F32\" is none of"), "{err}");
        let short = Envelope { meta: TensorMeta { datatype: "FP32".into(), shape: vec![2] }, body: vec![0; 4] };
        assert!(decode(short.encode()).unwrap_err().to_string().contains("needs 8 bytes, got 4"));
    }
}
