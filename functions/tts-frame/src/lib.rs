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

pub mod g2p;

use std::collections::HashMap;

use jig_sdk::{DType, Error, Function, Result, Tensor};

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

pub struct TtsFrame;

impl Function for TtsFrame {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
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
        let sample_rate: u32 = jig_sdk::config_or("sample-rate", 22_050)?;
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

        let mut samples = Vec::new();
        for (i, sentence) in sentences(&text).into_iter().enumerate() {
            let phonemes = match &lexicon {
                Some(lexicon) => std::borrow::Cow::Owned(g2p::phonemize(sentence, lexicon)),
                None => std::borrow::Cow::Borrowed(sentence),
            };
            let encoded = ids.encode(&phonemes);
            if encoded.is_empty() {
                continue;
            }
            let n = encoded.len() as u64;
            let inputs = [
                Tensor::from_i64(&[1, n], &encoded),
                Tensor::from_i64(&[1], &[n as i64]),
                Tensor::from_f32(&[3], &scales),
            ];
            let outputs = jig_sdk::infer(&slot, &inputs)?;
            let audio = outputs.first().ok_or_else(|| Error::internal("voice model returned no outputs"))?;
            if i > 0 {
                samples.extend_from_slice(&gap);
            }
            samples.extend(pcm(audio)?);
        }
        let audio = jig_sdk::audio::wav(&samples, sample_rate);
        Ok(match record {
            Some(meta) => jig_sdk::Envelope { meta, body: audio }.encode(),
            None => audio,
        })
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
