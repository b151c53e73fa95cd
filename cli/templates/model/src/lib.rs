//! `{{name}}`: a jig glue function around a model. A request is JSON, `{"x": [[f32; 4], ...]}` (a batch of
//! rows); the glue makes the model's input tensor, calls the model in slot `model` (the gateway batches these
//! calls across requests) and answers `{"y": [[f32; 3], ...]}`.

use jig_sdk::{Error, Function, Result, Tensor};

pub struct Predict;

/// Features a row has: the model's input is f32 `[N, 4]`.
const FEATURES: usize = 4;

impl Function for Predict {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let request: serde_json::Value = serde_json::from_slice(&payload)?;
        let rows = request["x"].as_array().ok_or_else(|| Error::invalid_input("expected {\"x\": [[f32; 4], ...]}"))?;
        let mut x = Vec::with_capacity(rows.len() * FEATURES);
        for row in rows {
            let row = row.as_array().filter(|r| r.len() == FEATURES);
            let row = row.ok_or_else(|| Error::invalid_input(format!("each row of `x` has {FEATURES} numbers")))?;
            x.extend(row.iter().map(|v| v.as_f64().unwrap_or(f64::NAN) as f32));
        }
        let outputs = jig_sdk::infer("model", &[Tensor::from_f32(&[rows.len() as u64, FEATURES as u64], &x)])?;
        let y = outputs.first().ok_or_else(|| Error::internal("the model gave no output"))?.view::<f32>()?;
        let width = y.shape().get(1).copied().unwrap_or(1) as usize;
        let y: Vec<&[f32]> = y.as_slice().chunks(width.max(1)).collect();
        Ok(serde_json::to_vec(&serde_json::json!({ "y": y }))?)
    }
}

jig_sdk::export!(Predict);

/// Run natively with `cargo test`: the handler in-process, with a stand-in for the model.
#[cfg(test)]
mod tests {
    use super::*;
    use jig_sdk::native::Invocation;

    #[test]
    fn each_row_goes_through_the_model() {
        // The stand-in sums each row's features into one output.
        let sum = |inputs: &[Tensor]| {
            let x = inputs[0].view::<f32>().unwrap();
            let sums: Vec<f32> = x.as_slice().chunks(FEATURES).map(|r| r.iter().sum()).collect();
            Ok(vec![Tensor::from_f32(&[sums.len() as u64, 1], &sums)])
        };
        let request = br#"{"x": [[1, 2, 3, 4], [0, 0, 0, 1]]}"#.to_vec();
        let outcome = Invocation::new().model("model", sum).run::<Predict>(request);
        let answer: serde_json::Value = serde_json::from_slice(&outcome.output.unwrap()).unwrap();
        assert_eq!(answer, serde_json::json!({"y": [[10.0], [1.0]]}));
    }

    #[test]
    fn a_row_of_the_wrong_width_is_the_callers_error() {
        let outcome = Invocation::new().run::<Predict>(br#"{"x": [[1, 2]]}"#.to_vec());
        assert!(matches!(outcome.output, Err(Error::InvalidInput(_))));
    }
}
