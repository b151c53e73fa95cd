//! `classify`: an image classifier's glue: decode, resize, normalise, run the model, answer with the top
//! classes.
//!
//! **Input**: a PNG or JPEG image, or an envelope with raw RGB as `crop` and `ocr-detect` emit (metadata with
//! `width` and `height`, passed through into the answer).
//!
//! **Model** (slot `classifier`, config `slot`): input `[1, 3, size, size]` `f32`, ImageNet normalisation
//! (config `size`, default 224); output `[1, classes]` scores (logits).
//!
//! **Returns** JSON `{"top": [{"class": index, "probability": p}, ...]}`: the `top_k` (5) classes by softmax
//! probability, best first, plus the input's metadata when it came in an envelope.

use jig_sdk::image::{self, Normalize};
use jig_sdk::{Error, Function, Result};

/// The `k` most probable classes of `logits`, with their softmax probabilities, best first.
pub fn top_k(logits: &[f32], k: usize) -> Vec<(usize, f32)> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exp: Vec<f32> = logits.iter().map(|&l| (l - max).exp()).collect();
    let sum: f32 = exp.iter().sum();
    let mut ranked: Vec<(usize, f32)> = exp.into_iter().map(|e| e / sum).enumerate().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(k);
    ranked
}

pub struct Classify;

impl Function for Classify {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let slot = jig_sdk::config("slot").unwrap_or_else(|| "classifier".into());
        let size: u32 = jig_sdk::config_or("size", 224)?;
        let k: usize = jig_sdk::config_or("top_k", 5)?;
        let (meta, picture) = image::from_payload(payload)?;
        let input = image::to_nchw(&image::resize(&picture, size, size), Normalize::IMAGENET);
        let outputs = jig_sdk::infer(&slot, &[input])?;
        let logits =
            outputs.first().ok_or_else(|| Error::internal("the classifier returned no output"))?.view::<f32>()?;
        let top: Vec<serde_json::Value> = top_k(logits.as_slice(), k)
            .into_iter()
            .map(|(class, p)| serde_json::json!({ "class": class, "probability": p }))
            .collect();
        let mut answer = meta;
        if let Some(object) = answer.as_object_mut() {
            object.insert("top".into(), top.into());
        }
        Ok(serde_json::to_vec(&answer)?)
    }
}

jig_sdk::export!(Classify);

#[cfg(test)]
mod tests {
    #[test]
    fn top_k_ranks_by_softmax_probability() {
        let top = super::top_k(&[0.0, 2.0, 1.0, 2.0], 3);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 3, 2]);
        let all: f32 = super::top_k(&[0.0, 2.0, 1.0, 2.0], 4).iter().map(|t| t.1).sum();
        assert!((all - 1.0).abs() < 1e-6);
    }
}
