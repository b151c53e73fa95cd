//! `crop`: cut boxes out of an image and `emit` each crop to the downstream task.
//!
//! **Input**: an [envelope](jig_sdk::envelope) whose metadata is [`CropRequest`] and whose body is the image —
//! PNG or JPEG bytes, or raw interleaved RGB when the metadata gives `width` and `height`.
//!
//! **Emits**, on port `crops` (config `port`), one envelope per box that overlaps the image: metadata
//! [`CropMeta`], body the crop as raw RGB (config `encoding = "rgb8"`, the default) or PNG (`"png"`).
//!
//! **Returns** JSON `{"crops": <number emitted>, "skipped": <boxes outside the image>}`.

use jig_sdk::image::{self, BoundingBox, RgbImage};
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

/// The boxes of a request, cut.
#[derive(Debug)]
pub struct Cropped {
    /// How many boxes the request named.
    pub requested: usize,
    /// One crop per box that overlaps the image, in request order.
    pub crops: Vec<(CropMeta, RgbImage)>,
}

/// Decode the request and cut every box: the handler's work short of encoding and emitting, shared with native
/// callers (the runtime benchmark compares the two).
pub fn crop_request(payload: Vec<u8>) -> Result<Cropped> {
    let Envelope { meta, body } = Envelope::<CropRequest>::decode(payload)?;
    let image = match (meta.width, meta.height) {
        (Some(w), Some(h)) => image::from_rgb8(w, h, body)?,
        (None, None) => image::decode(&body)?,
        _ => {
            return Err(Error::invalid_input("give both `width` and `height` for a raw RGB image, or neither"));
        }
    };
    let crops = meta
        .boxes
        .iter()
        .enumerate()
        .filter_map(|(index, region)| {
            let crop = image::crop(&image, region)?;
            let (width, height) = crop.dimensions();
            Some((CropMeta { index, region: *region, width, height, encoding: Encoding::Rgb8 }, crop))
        })
        .collect();
    Ok(Cropped { requested: meta.boxes.len(), crops })
}

/// Cut every box of the request and pass each crop, framed as an envelope in `encoding`, to `emit`; returns
/// the handler's JSON summary. The handler passes `jig_sdk::emit`; native callers pass their own sink.
pub fn crop_and_emit(payload: Vec<u8>, encoding: Encoding, mut emit: impl FnMut(Vec<u8>)) -> Result<Vec<u8>> {
    let Cropped { requested, crops } = crop_request(payload)?;
    let emitted = crops.len();
    for (mut meta, crop) in crops {
        let body = match encoding {
            Encoding::Rgb8 => crop.into_raw(),
            Encoding::Png => image::encode_png(&crop)?,
        };
        meta.encoding = encoding;
        emit(Envelope { meta, body }.encode());
    }
    Ok(serde_json::to_vec(&serde_json::json!({ "crops": emitted, "skipped": requested - emitted }))?)
}

pub struct Crop;

impl Function for Crop {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let port = jig_sdk::config("port").unwrap_or_else(|| "crops".to_string());
        let encoding: Encoding = jig_sdk::config_or("encoding", Encoding::Rgb8)?;
        crop_and_emit(payload, encoding, |crop| jig_sdk::emit(&port, &crop))
    }
}

jig_sdk::export!(Crop);
