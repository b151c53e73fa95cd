//! `crop`: cut boxes out of an image and `emit` each crop to the downstream task.
//!
//! **Input**: an [envelope](jig_sdk::envelope) whose metadata is [`CropRequest`] and whose body is the image —
//! PNG or JPEG bytes, or raw interleaved RGB when the metadata gives `width` and `height`.
//!
//! **Emits**, on port `crops` (config `port`), one envelope per box that overlaps the image: metadata
//! [`CropMeta`], body the crop as raw RGB (config `encoding = "rgb8"`, the default) or PNG (`"png"`).
//!
//! **Returns** JSON `{"crops": <number emitted>, "skipped": <boxes outside the image>}`.

use jig_sdk::image::{self, BoundingBox};
use jig_sdk::{Envelope, Error, Function, Result};
use serde::{Deserialize, Serialize};

/// Metadata of a crop request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CropRequest {
    /// Boxes to cut, in pixel coordinates of the image.
    pub boxes: Vec<BoundingBox>,
    /// Width of a raw RGB body; absent for PNG/JPEG bodies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Height of a raw RGB body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
}

/// Metadata of one emitted crop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CropMeta {
    /// Index of the box in the request.
    pub index: usize,
    /// The box as requested.
    #[serde(rename = "box")]
    pub region: BoundingBox,
    pub width: u32,
    pub height: u32,
    /// `rgb8` or `png`.
    pub encoding: Encoding,
}

/// How crops are encoded in emitted envelopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    Rgb8,
    Png,
}

impl std::str::FromStr for Encoding {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "rgb8" => Ok(Encoding::Rgb8),
            "png" => Ok(Encoding::Png),
            other => Err(format!("unknown encoding `{other}`; use `rgb8` or `png`")),
        }
    }
}

pub struct Crop;

impl Function for Crop {
    /// Each crop is emitted as soon as it is cut and then dropped, so its memory is reused for the next one:
    /// a request dirties one crop's worth of linear memory rather than all of them, and the pooling allocator
    /// zeroes every dirtied page after the request.
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let port = jig_sdk::config("port").unwrap_or_else(|| "crops".to_string());
        let encoding: Encoding = jig_sdk::config_or("encoding", Encoding::Rgb8)?;
        let Envelope { meta, body } = Envelope::<CropRequest>::decode(payload)?;
        let image = match (meta.width, meta.height) {
            (Some(w), Some(h)) => image::from_rgb8(w, h, body)?,
            (None, None) => image::decode(&body)?,
            _ => {
                return Err(Error::invalid_input("give both `width` and `height` for a raw RGB image, or neither"));
            }
        };
        let mut emitted = 0;
        for (index, region) in meta.boxes.iter().enumerate() {
            let Some(crop) = image::crop(&image, region) else { continue };
            let (width, height) = crop.dimensions();
            let body = match encoding {
                Encoding::Rgb8 => crop.into_raw(),
                Encoding::Png => image::encode_png(&crop)?,
            };
            let meta = CropMeta { index, region: *region, width, height, encoding };
            jig_sdk::emit(&port, &Envelope { meta, body }.encode());
            emitted += 1;
        }
        let skipped = meta.boxes.len() - emitted;
        Ok(serde_json::to_vec(&serde_json::json!({ "crops": emitted, "skipped": skipped }))?)
    }
}

jig_sdk::export!(Crop);

#[cfg(test)]
mod tests {
    use super::*;
    use jig_sdk::native::Invocation;

    /// A 4×3 raw RGB image whose pixel (x, y) is `[x, y, 0]`.
    fn request(boxes: serde_json::Value) -> Vec<u8> {
        let body = (0..3u8).flat_map(|y| (0..4u8).flat_map(move |x| [x, y, 0])).collect();
        Envelope { meta: serde_json::json!({"boxes": boxes, "width": 4, "height": 3}), body }.encode()
    }

    #[test]
    fn each_box_inside_the_image_is_emitted_in_order() {
        let boxes = serde_json::json!([
            {"x0": 1, "y0": 1, "x1": 3, "y1": 2},
            {"x0": 10, "y0": 10, "x1": 12, "y1": 12},
            {"x0": 0, "y0": 0, "x1": 1, "y1": 1},
        ]);
        let outcome = Invocation::new().config("port", "tiles").run::<Crop>(request(boxes));
        let summary: serde_json::Value = serde_json::from_slice(&outcome.output.unwrap()).unwrap();
        assert_eq!(summary, serde_json::json!({"crops": 2, "skipped": 1}));
        let crops: Vec<Envelope<CropMeta>> = outcome
            .emitted
            .into_iter()
            .map(|(port, payload)| {
                assert_eq!(port, "tiles");
                Envelope::decode(payload).unwrap()
            })
            .collect();
        assert_eq!((crops[0].meta.index, crops[0].meta.width, crops[0].meta.height), (0, 2, 1));
        assert_eq!(crops[0].body, [1, 1, 0, 2, 1, 0]);
        assert_eq!((crops[1].meta.index, crops[1].body.as_slice()), (2, [0, 0, 0].as_slice()));
    }

    #[test]
    fn an_unknown_encoding_is_the_deployers_to_fix() {
        let outcome = Invocation::new().config("encoding", "webp").run::<Crop>(request(serde_json::json!([])));
        let error = outcome.output.unwrap_err().to_string();
        assert!(error.contains("encoding") && error.contains("webp"), "{error}");
    }
}
