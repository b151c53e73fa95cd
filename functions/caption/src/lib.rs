//! `caption`: an image captioner's glue (GIT-style): decode, resize, normalise, run the model, and decode the
//! caption greedily.
//!
//! **Input**: a PNG or JPEG image, or an envelope of raw RGB as `crop` and `detect-objects` emit (its
//! metadata is passed through into the answer).
//!
//! **Model** (slot `captioner`, config `slot`): input `[1, 3, 224, 224]` `f32`, ImageNet normalisation;
//! output `[1, positions, vocabulary]` scores, one row per caption position.
//!
//! **Returns** JSON `{"tokens": [ids], "text": "...", ...}` (with the input envelope's metadata): the best word piece at each position, up to the first
//! `[SEP]` (id 102, BERT's); `text` joins the word pieces of config `vocab` (one per line, BERT's
//! `vocab.txt` layout) when given, else is empty. With config `speech_port`, the answer is also emitted there
//! (to a speech task).

use jig_sdk::image::{self, Normalize};
use jig_sdk::{Error, Function, Result};

/// BERT's end-of-sequence id, which ends a GIT caption.
pub const SEP: usize = 102;

/// The best id at each row of `[positions, vocabulary]` scores, up to the first [`SEP`].
pub fn greedy(scores: &[f32], vocabulary: usize) -> Vec<usize> {
    scores
        .chunks_exact(vocabulary)
        .map(|row| row.iter().enumerate().fold((0, f32::MIN), |m, (i, &s)| if s > m.1 { (i, s) } else { m }).0)
        .take_while(|&id| id != SEP)
        .collect()
}

/// Word pieces joined into text: `##` pieces continue the previous word.
pub fn detokenize(ids: &[usize], vocab: &[&str]) -> String {
    let mut text = String::new();
    for piece in ids.iter().filter_map(|&id| vocab.get(id)) {
        match piece.strip_prefix("##") {
            Some(rest) => text.push_str(rest),
            None => {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(piece);
            }
        }
    }
    text
}

pub struct Caption;

impl Function for Caption {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let slot = jig_sdk::config("slot").unwrap_or_else(|| "captioner".into());
        let (meta, picture) = image::from_payload(payload)?;
        let input = image::to_nchw(&image::resize(&picture, 224, 224), Normalize::IMAGENET);
        let outputs = jig_sdk::infer(&slot, &[input])?;
        let scores =
            outputs.first().ok_or_else(|| Error::internal("the captioner returned no output"))?.view::<f32>()?;
        let vocabulary = *scores.shape().last().unwrap_or(&0) as usize;
        if vocabulary == 0 {
            return Err(Error::internal(format!("the captioner's output has shape {:?}", scores.shape())));
        }
        let tokens = greedy(scores.as_slice(), vocabulary);
        let vocab = jig_sdk::config("vocab").unwrap_or_default();
        let text = detokenize(&tokens, &vocab.lines().collect::<Vec<_>>());
        let mut answer = meta;
        if let Some(object) = answer.as_object_mut() {
            object.insert("tokens".into(), tokens.into());
            object.insert("text".into(), text.into());
        }
        let answer = serde_json::to_vec(&answer)?;
        if let Some(port) = jig_sdk::config("speech_port") {
            jig_sdk::emit(&port, &answer);
        }
        Ok(answer)
    }
}

jig_sdk::export!(Caption);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_decoding_stops_at_sep_and_joins_word_pieces() {
        let vocab = 110;
        let mut scores = vec![0.0f32; 4 * vocab];
        for (row, id) in [(0, 104), (1, 105), (2, SEP), (3, 106)] {
            scores[row * vocab + id] = 1.0;
        }
        assert_eq!(greedy(&scores, vocab), vec![104, 105]);
        let mut words = vec![""; 110];
        words[104] = "traffic";
        words[105] = "##light";
        assert_eq!(detokenize(&[104, 105, 104], &words), "trafficlight traffic");
    }
}
