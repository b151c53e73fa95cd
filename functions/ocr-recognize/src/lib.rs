//! `ocr-recognize`: read the text of one line image with a CTC text recognizer (PP-OCR's).
//!
//! **Input**: an envelope as `ocr-detect` or `crop` emit: metadata with `width` and `height` (and whatever else,
//! passed through), body the line as raw RGB; or a PNG/JPEG image.
//!
//! **Model** (slot `rec`, config `slot`): input `[1, 3, 48, W]` `f32`, BGR, pixels scaled to `[-1, 1]`; output
//! `[1, T, C]` probabilities over the character set per horizontal step. The line is scaled to height 48 and
//! its width rounded up to a multiple of 160 (at least 320), padded with zeros: lines of similar length share
//! a shape, so concurrent requests batch together.
//!
//! **Character set** (config `charset`, usually from `config_files`): one character per line, as PP-OCR
//! models carry it in their `character` metadata. Class 0 is the CTC blank, classes 1..=K the characters,
//! K+1 a space.
//!
//! **Returns** JSON: the input's metadata with `text` (greedy CTC decoding: best class per step, repeats
//! merged, blanks dropped) and `confidence` (mean probability of the kept steps; 0 for no text) added. With
//! config `speech_port`, the same JSON is also emitted there when the text is not empty (to a speech task).

use jig_sdk::image::{self, Normalize, RgbImage};
use jig_sdk::{Error, Function, Result, Tensor};

/// The recognizer's input height.
pub const HEIGHT: u32 = 48;

/// The recognizer's input for a line: height 48, width rounded up to a multiple of 160 (at least 320), BGR,
/// in `[-1, 1]`, zero-padded on the right.
pub fn preprocess(line: &RgbImage) -> Tensor {
    let (w, h) = line.dimensions();
    let scaled_w = ((w as f32 * HEIGHT as f32 / h.max(1) as f32).ceil() as u32).clamp(1, 4096);
    let padded_w = scaled_w.div_ceil(160).max(2) * 160;
    let mut resized = image::resize(line, scaled_w, HEIGHT);
    image::swap_red_blue(&mut resized);
    let t = image::to_nchw(&resized, Normalize::SYMMETRIC);
    // Pad every channel row to `padded_w` with zeros (the normalised value of mid-grey).
    let values = t.view::<f32>().expect("to_nchw makes f32").as_slice().to_vec();
    let mut padded = vec![0f32; 3 * (HEIGHT * padded_w) as usize];
    for (row, chunk) in values.chunks_exact(scaled_w as usize).enumerate() {
        let start = row * padded_w as usize;
        padded[start..start + chunk.len()].copy_from_slice(chunk);
    }
    Tensor::from_f32(&[1, 3, HEIGHT as u64, padded_w as u64], &padded)
}

/// Greedy CTC decoding of `[T, C]` probabilities: the text and its confidence.
pub fn decode(probs: &[f32], classes: usize, charset: &[&str]) -> (String, f32) {
    let (mut text, mut kept, mut previous) = (String::new(), Vec::new(), 0usize);
    for step in probs.chunks_exact(classes) {
        let (best, p) = step.iter().enumerate().fold((0, f32::MIN), |m, (i, &p)| if p > m.1 { (i, p) } else { m });
        if best != 0 && best != previous {
            match charset.get(best - 1) {
                Some(c) => text.push_str(c),
                None => text.push(' '),
            }
            kept.push(p);
        }
        previous = best;
    }
    let confidence = if kept.is_empty() { 0.0 } else { kept.iter().sum::<f32>() / kept.len() as f32 };
    (text.trim().to_string(), confidence)
}

/// Read the line of `payload` (see the crate docs) with the model in `slot`.
pub fn recognize(payload: Vec<u8>, charset: &[&str], slot: &str) -> Result<serde_json::Value> {
    let (mut meta, line) = image::from_payload(payload)?;
    if line.width() == 0 || line.height() == 0 {
        return Err(Error::invalid_input("the line image is empty"));
    }
    let outputs = jig_sdk::infer(slot, &[preprocess(&line)])?;
    let probs = outputs.first().ok_or_else(|| Error::internal("the recognizer returned no output"))?.view::<f32>()?;
    let classes = *probs.shape().last().unwrap_or(&0) as usize;
    if classes < 2 || charset.len() + 2 != classes {
        return Err(Error::internal(format!(
            "the recognizer has {classes} classes but the character set {} characters (expected classes − 2); \
             give the model's own set in config `charset`",
            charset.len()
        )));
    }
    let (text, confidence) = decode(probs.as_slice(), classes, charset);
    if let Some(object) = meta.as_object_mut() {
        object.insert("text".into(), text.into());
        object.insert("confidence".into(), confidence.into());
    }
    Ok(meta)
}

pub struct OcrRecognize;

impl Function for OcrRecognize {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let charset = jig_sdk::config("charset")
            .ok_or_else(|| Error::invalid_input("config `charset` is missing: give the model's character set"))?;
        let charset: Vec<&str> = charset.lines().collect();
        let slot = jig_sdk::config("slot").unwrap_or_else(|| "rec".into());
        let record = recognize(payload, &charset, &slot)?;
        let line = serde_json::to_vec(&record)?;
        if let Some(port) = jig_sdk::config("speech_port")
            && record["text"].as_str().is_some_and(|t| !t.is_empty())
        {
            jig_sdk::emit(&port, &line);
        }
        Ok(line)
    }
}

jig_sdk::export!(OcrRecognize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctc_merges_repeats_and_drops_blanks() {
        let charset = ["a", "b"];
        // Classes: blank, a, b, space. Steps: a a blank a b space b blank.
        let best = [1, 1, 0, 1, 2, 3, 2, 0];
        let mut probs = vec![0.0f32; best.len() * 4];
        for (t, &c) in best.iter().enumerate() {
            probs[t * 4 + c] = 0.9;
        }
        let (text, confidence) = decode(&probs, 4, &charset);
        assert_eq!(text, "aab b");
        assert!((confidence - 0.9).abs() < 1e-6);
        assert_eq!(decode(&[0.0; 8], 4, &charset).0, "");
    }

    #[test]
    fn lines_are_scaled_to_48_high_and_padded_to_buckets_of_160() {
        assert_eq!(preprocess(&RgbImage::new(100, 24)).shape(), &[1, 3, 48, 320]);
        assert_eq!(preprocess(&RgbImage::new(400, 40)).shape(), &[1, 3, 48, 480]);
    }
}
