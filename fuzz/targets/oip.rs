//! An Open Inference Protocol request body for a model taking `x` (FP32) and `ids` (INT64): the first byte
//! says whether binary tensors follow and, if so, where the JSON ends; a request that decodes is answered with
//! its own tensors as outputs.

use jig_api::oip::{Declared, decode_request, encode_response};
use jig_wire::DType;

fn main() {
    let inputs = [Declared { name: "x", dtype: DType::F32 }, Declared { name: "ids", dtype: DType::I64 }];
    let outputs = [Declared { name: "y", dtype: DType::F32 }, Declared { name: "z", dtype: DType::I64 }];
    afl::fuzz!(|data: &[u8]| {
        let Some((&first, rest)) = data.split_first() else { return };
        let json_length = (first != 0).then(|| usize::from(first) * rest.len() / 255);
        let body = bytes::Bytes::copy_from_slice(rest);
        if let Ok((request, tensors)) = decode_request("app.slot", &inputs, &body, json_length) {
            let _ = encode_response("app.slot", &outputs, &request, tensors);
        }
    });
}
