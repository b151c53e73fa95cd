//! `tts-frame`: frame text for speech synthesis and assemble the synthesized audio into a WAV file.
//!
//! **Input**: UTF-8 text, or a JSON object with a `text` field (as `ocr-recognize` sends). The text is split
//! into sentences; with a `lexicon` (below) each is turned into IPA phonemes ([`g2p`]); each is encoded as
//! phoneme ids and sent to the
//! model in slot `voice` (config `slot`) with the input signature of a Piper VITS voice:
//! `input` i64 `[1, n]`, `input_lengths` i64 `[1]`, `scales` f32 `[3]` (noise, length, noise-w). The model
//! answers with `f32` samples in `[-1, 1]` (or `i16` samples), any shape.
//!
//! **Returns** a 16-bit mono PCM WAV: the sentences' audio in order, `sentence-silence` seconds apart; for a
//! JSON input, an envelope whose metadata is that object and whose body is the WAV. Text with nothing to say
//! gives a WAV without samples.
//!
//! **Configuration** (all optional): `slot`; `sample-rate` (default 22050); `sentence-silence` (seconds, default
//! 0.2); `noise-scale`, `length-scale`, `noise-w` (defaults 0.667, 1.0, 0.8, Piper's); `phoneme-id-map`, the
//! JSON map from phoneme to ids of the voice's config (with it, ids are framed as Piper does: `^`, each
//! phoneme followed by the pad `_`, then `$`; characters missing from the map are skipped). Without a map,
//! ids are the characters' Unicode code points. `lexicon`: the pronouncing dictionary of [`g2p`] (usually from
//! `config_files`); without it the text is taken to be phonemes already.
//!
//! **A voice cut in two** (`stage`): a voice whose front (text encoder, durations, flow: thousands of small
//! nodes at the phonemes' rate) runs on CPU cores and whose decoder (a few large convolutions at the audio's rate)
//! runs on a GPU share is two tasks, each its own slot, planned apart (`scripts/models.py` cuts Piper's voice into
//! `piper-joe.front.onnx` and `piper-joe.back.onnx`). With `stage = "front"` the slot holds the front: each
//! sentence's output (the decoder's input) is **emitted** on `port` (default `voiced`) as a [`Voiced`] tensor
//! envelope, and it returns `{"sentences": n}`. With `stage = "vocoder"` the input is such an envelope and the slot
//! (default `vocoder`) the decoder: it returns that sentence's WAV, for a line in an envelope of its record (with
//! `sentence`, from 0, where the line had several). The default, `stage = "whole"`, is all of the above in one.

pub mod g2p;

use std::collections::HashMap;

use jig_sdk::{DType, Envelope, Error, Function, Result, Tensor};
use serde::{Deserialize, Serialize};

/// Split `text` into sentences: after `.`, `!`, `?` or `…` followed by whitespace, and at line breaks.
/// Sentences are trimmed; empty ones are dropped.
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next_is_space = chars.peek().is_none_or(|&(_, n)| n.is_whitespace());
        let ends = c == '\n' || (matches!(c, '.' | '!' | '?' | '…') && next_is_space);
        if ends {
            let end = i + c.len_utf8();
            out.push(text[start..end].trim());
            start = end;
        }
    }
    out.push(text[start..].trim());
    out.retain(|s| !s.is_empty());
    out
}

/// Maps text to the ids a voice model reads.
pub enum PhonemeIds {
    /// Piper's `phoneme_id_map`: each character to its ids, with `^` (start), `_` (pad) and `$` (end).
    Map(HashMap<char, Vec<i64>>),
    /// Unicode code points.
    CodePoints,
}

impl PhonemeIds {
    /// Parse a Piper `phoneme_id_map` (JSON object of single-character strings to id lists).
    pub fn from_json(json: &str) -> Result<Self> {
        let raw: HashMap<String, Vec<i64>> = serde_json::from_str(json)
            .map_err(|e| Error::invalid_input(format!("config key `phoneme-id-map` is not a JSON map of ids: {e}")))?;
        let mut map = HashMap::with_capacity(raw.len());
        for (key, ids) in raw {
            let mut chars = key.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => map.insert(c, ids),
                _ => {
                    return Err(Error::invalid_input(format!("`phoneme-id-map` key {key:?} is not one character")));
                }
            };
        }
        Ok(PhonemeIds::Map(map))
    }

    /// The ids of `sentence`.
    pub fn encode(&self, sentence: &str) -> Vec<i64> {
        match self {
            PhonemeIds::CodePoints => sentence.chars().map(|c| i64::from(u32::from(c))).collect(),
            PhonemeIds::Map(map) => {
                let ids = |c: char| map.get(&c).map(Vec::as_slice).unwrap_or(&[]);
                let mut out = Vec::with_capacity(sentence.len() * 2 + 4);
                out.extend_from_slice(ids('^'));
                out.extend_from_slice(ids('_'));
                for c in sentence.chars().filter(|c| map.contains_key(c)) {
                    out.extend_from_slice(ids(c));
                    out.extend_from_slice(ids('_'));
                }
                out.extend_from_slice(ids('$'));
                out
            }
        }
    }
}

/// The samples of a voice model's output as 16-bit PCM.
fn pcm(output: &Tensor) -> Result<Vec<i16>> {
    match output.dtype() {
        DType::F32 => Ok(jig_sdk::audio::pcm16(output.view::<f32>()?.as_slice())),
        DType::I16 => Ok(output.view::<i16>()?.as_slice().to_vec()),
        other => Err(Error::internal(format!("voice model returned {other:?} audio; expected f32 or i16 samples"))),
    }
}

/// The metadata of what a voice's front emits for one sentence: a tensor envelope's (the body is the tensor's
/// raw little-endian bytes), with the line it came from and its place among the line's sentences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Voiced {
    /// The element type, by the Open Inference Protocol's name (`FP32`).
    pub datatype: String,
    /// The shape.
    pub shape: Vec<u64>,
    /// The recognized line's record, for a JSON input.
    #[serde(default)]
    pub record: Option<serde_json::Value>,
    /// This sentence's index among those voiced, from 0.
    pub sentence: usize,
    /// How many sentences of the line were voiced.
    pub sentences: usize,
}

/// The parts of the voice this task runs (config `stage`).
enum Stage {
    Whole,
    Front,
    Vocoder,
}

/// The answer for `record` (a recognized line, or none for plain text) around `audio`.
fn answer(record: Option<serde_json::Value>, audio: Vec<u8>) -> Vec<u8> {
    match record {
        Some(meta) => Envelope { meta, body: audio }.encode(),
        None => audio,
    }
}

/// The first output of a model call.
fn first(outputs: Vec<Tensor>, slot: &str) -> Result<Tensor> {
    outputs.into_iter().next().ok_or_else(|| Error::internal(format!("the model in slot `{slot}` returned no outputs")))
}

/// A decoder's audio for one voiced sentence, as a WAV in the answer of its line.
fn vocode(payload: Vec<u8>, slot: &str, sample_rate: u32) -> Result<Vec<u8>> {
    let Envelope { meta, body } = Envelope::<Voiced>::decode(payload)
        .map_err(|e| Error::invalid_input(format!("stage `vocoder` takes what a `front` stage emits: {e}")))?;
    let voiced = Tensor::new(DType::from_oip_name(&meta.datatype)?, &meta.shape, body)?;
    let audio = first(jig_sdk::infer(slot, &[voiced])?, slot)?;
    let wav = jig_sdk::audio::wav(&pcm(&audio)?, sample_rate);
    let record = match meta.record {
        Some(serde_json::Value::Object(mut line)) if meta.sentences > 1 => {
            line.insert("sentence".into(), meta.sentence.into());
            Some(serde_json::Value::Object(line))
        }
        record => record,
    };
    Ok(answer(record, wav))
}

pub struct TtsFrame;

impl Function for TtsFrame {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let stage = match jig_sdk::config("stage").as_deref() {
            None | Some("whole") => Stage::Whole,
            Some("front") => Stage::Front,
            Some("vocoder") => Stage::Vocoder,
            Some(other) => {
                return Err(Error::invalid_input(format!(
                    "config key `stage` is {other:?}: use `whole` (the default), `front` or `vocoder`"
                )));
            }
        };
        let sample_rate: u32 = jig_sdk::config_or("sample-rate", 22_050)?;
        if let Stage::Vocoder = stage {
            let slot = jig_sdk::config("slot").unwrap_or_else(|| "vocoder".to_string());
            return vocode(payload, &slot, sample_rate);
        }
        let text = String::from_utf8(payload).map_err(|e| Error::invalid_input(format!("text is not UTF-8: {e}")))?;
        // A JSON object with `text` (a recognized line): answer with its metadata around the audio.
        let record = serde_json::from_str::<serde_json::Value>(&text).ok().filter(|v| v["text"].is_string());
        let text = match &record {
            Some(record) => record["text"].as_str().unwrap_or_default().to_string(),
            None => text,
        };
        let lexicon = jig_sdk::config("lexicon");
        let lexicon = lexicon.as_deref().map(g2p::Lexicon::new);
        let slot = jig_sdk::config("slot").unwrap_or_else(|| "voice".to_string());
        let silence: f32 = jig_sdk::config_or("sentence-silence", 0.2)?;
        let scales = [
            jig_sdk::config_or("noise-scale", 0.667f32)?,
            jig_sdk::config_or("length-scale", 1.0f32)?,
            jig_sdk::config_or("noise-w", 0.8f32)?,
        ];
        let ids = match jig_sdk::config("phoneme-id-map") {
            Some(json) => PhonemeIds::from_json(&json)?,
            None => PhonemeIds::CodePoints,
        };
        if !(0.0..=10.0).contains(&silence) {
            return Err(Error::invalid_input("config key `sentence-silence` must be between 0 and 10 seconds"));
        }
        let gap = vec![0i16; (silence * sample_rate as f32) as usize];

        let voiced: Vec<Vec<i64>> = sentences(&text)
            .into_iter()
            .map(|sentence| match &lexicon {
                Some(lexicon) => ids.encode(&g2p::phonemize(sentence, lexicon)),
                None => ids.encode(sentence),
            })
            .filter(|encoded| !encoded.is_empty())
            .collect();
        let port = jig_sdk::config("port").unwrap_or_else(|| "voiced".to_string());
        let mut samples = Vec::new();
        for (i, encoded) in voiced.iter().enumerate() {
            let n = encoded.len() as u64;
            let inputs = [
                Tensor::from_i64(&[1, n], encoded),
                Tensor::from_i64(&[1], &[n as i64]),
                Tensor::from_f32(&[3], &scales),
            ];
            let output = first(jig_sdk::infer(&slot, &inputs)?, &slot)?;
            if let Stage::Front = stage {
                let meta = Voiced {
                    datatype: output.dtype().oip_name().into(),
                    shape: output.shape().to_vec(),
                    record: record.clone(),
                    sentence: i,
                    sentences: voiced.len(),
                };
                jig_sdk::emit(&port, &Envelope { meta, body: output.bytes().to_vec() }.encode());
                continue;
            }
            if i > 0 {
                samples.extend_from_slice(&gap);
            }
            samples.extend(pcm(&output)?);
        }
        if let Stage::Front = stage {
            return Ok(serde_json::to_vec(&serde_json::json!({ "sentences": voiced.len() }))?);
        }
        Ok(answer(record, jig_sdk::audio::wav(&samples, sample_rate)))
    }
}

jig_sdk::export!(TtsFrame);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_sentences_but_not_decimals() {
        assert_eq!(
            sentences("Stop here. Pi is 3.14!  Really?\nNew line…done… end"),
            vec!["Stop here.", "Pi is 3.14!", "Really?", "New line…done…", "end"]
        );
        assert!(sentences("  \n ").is_empty());
    }

    #[test]
    fn piper_framing_pads_every_phoneme() {
        let ids = PhonemeIds::from_json(r#"{"^":[1],"_":[0],"$":[2],"a":[5],"b":[6,7]}"#).unwrap();
        assert_eq!(ids.encode("ab?a"), vec![1, 0, 5, 0, 6, 7, 0, 5, 0, 2]);
        assert!(PhonemeIds::from_json(r#"{"ab":[1]}"#).is_err());
    }
}
