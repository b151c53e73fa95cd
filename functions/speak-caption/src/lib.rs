//! `speak-caption`: frame a caption for the AR assistant's synthetic speech models (VITS, Glow-TTS from
//! `jig-synth`) and wrap their audio in a WAV.
//!
//! **Input**: JSON `{"tokens": [ids], ...}` as `caption` answers.
//!
//! **Model** (slot `voice`, config `slot`): input `[1, 192, 64]` `f32`, one 192-wide embedding per phoneme
//! position; output `[1, samples]` `f32` in `[-1, 1]`. The synthetic models have no phoneme table, so the
//! embeddings are a fixed function of the caption's token ids (sinusoids, repeated to fill the 64 positions):
//! deterministic input of the right shape, for timing and planning.
//!
//! **Returns** an envelope: the input JSON as metadata around a 16-bit WAV at `sample-rate` (22050).

use jig_sdk::{Envelope, Error, Function, Result, Tensor};

pub const WIDTH: usize = 192;
pub const POSITIONS: usize = 64;

/// The `[1, 192, 64]` embedding of `tokens` (channel-major).
pub fn embed(tokens: &[u64]) -> Tensor {
    let mut values = vec![0f32; WIDTH * POSITIONS];
    if !tokens.is_empty() {
        for p in 0..POSITIONS {
            let token = tokens[p % tokens.len()] as f32;
            for c in 0..WIDTH {
                values[c * POSITIONS + p] = (token * (c as f32 + 1.0) * 1e-3 + p as f32 * 0.1).sin() * 0.5;
            }
        }
    }
    Tensor::from_f32(&[1, WIDTH as u64, POSITIONS as u64], &values)
}

pub struct SpeakCaption;

impl Function for SpeakCaption {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let slot = jig_sdk::config("slot").unwrap_or_else(|| "voice".into());
        let sample_rate: u32 = jig_sdk::config_or("sample-rate", 22_050)?;
        let caption: serde_json::Value = serde_json::from_slice(&payload)
            .map_err(|e| Error::invalid_input(format!("expected the JSON a `caption` task answers: {e}")))?;
        let tokens: Vec<u64> = caption["tokens"].as_array().into_iter().flatten().filter_map(|t| t.as_u64()).collect();
        // Nothing to say is an empty recording, not an error.
        let samples = if tokens.is_empty() {
            Vec::new()
        } else {
            let outputs = jig_sdk::infer(&slot, &[embed(&tokens)])?;
            let audio = outputs.first().ok_or_else(|| Error::internal("the voice model returned no output"))?;
            jig_sdk::audio::pcm16(audio.view::<f32>()?.as_slice())
        };
        Ok(Envelope { meta: caption, body: jig_sdk::audio::wav(&samples, sample_rate) }.encode())
    }
}

jig_sdk::export!(SpeakCaption);

#[cfg(test)]
mod tests {
    #[test]
    fn embeddings_are_deterministic_and_fill_every_position() {
        let a = super::embed(&[101, 2023]);
        assert_eq!(a.shape(), &[1, 192, 64]);
        assert_eq!(a.bytes(), super::embed(&[101, 2023]).bytes());
        assert_ne!(a.bytes(), super::embed(&[101, 2024]).bytes());
    }
}
