//! Image helpers that run inside WebAssembly: decode PNG/JPEG, crop, resize, and normalise to an NCHW `f32`
//! tensor for a model. Images are [`RgbImage`]s of the `image` crate, re-exported here.

use serde::{Deserialize, Serialize};

use crate::{Error, Result, Tensor};

pub use ::image::RgbImage;

/// An axis-aligned box in pixel coordinates: `x0, y0` is the top-left corner, `x1, y1` the bottom-right
/// (exclusive). Detectors produce fractional coordinates; [`crop`] rounds outward and clamps to the image.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BoundingBox {
    /// Left edge, pixels.
    pub x0: f32,
    /// Top edge, pixels.
    pub y0: f32,
    /// Right edge (exclusive), pixels.
    pub x1: f32,
    /// Bottom edge (exclusive), pixels.
    pub y1: f32,
}

impl BoundingBox {
    /// The whole-pixel rectangle `(x, y, width, height)` this box covers inside a `width` × `height` image, or
    /// `None` when nothing of it is inside.
    pub fn pixels_within(&self, width: u32, height: u32) -> Option<(u32, u32, u32, u32)> {
        let clamp = |v: f32, max: u32| {
            if v.is_nan() { 0 } else { v.clamp(0.0, max as f32) as u32 }
        };
        let (x0, y0) = (clamp(self.x0.floor(), width), clamp(self.y0.floor(), height));
        let (x1, y1) = (clamp(self.x1.ceil(), width), clamp(self.y1.ceil(), height));
        (x1 > x0 && y1 > y0).then(|| (x0, y0, x1 - x0, y1 - y0))
    }
}

/// The width and height of a PNG or JPEG, read from its header without decoding it: check a size before
/// paying for it.
pub fn dimensions(bytes: &[u8]) -> Result<(u32, u32)> {
    let mut reader = ::image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| Error::invalid_input(format!("cannot read the image: {e}")))?;
    // Reading the header allocates nothing; the decoder's memory limit would refuse a huge image unnamed.
    reader.no_limits();
    Ok(reader.into_dimensions()?)
}

/// Decode a PNG or JPEG (detected from its bytes) into RGB.
pub fn decode(bytes: &[u8]) -> Result<RgbImage> {
    Ok(::image::load_from_memory(bytes)?.to_rgb8())
}

/// The image a request carries: PNG or JPEG bytes, or an [envelope](crate::envelope) (as `crop`,
/// `ocr-detect` and `detect-objects` emit) whose metadata gives the `width` and `height` of a raw RGB body.
/// Returns the envelope's metadata (an empty object for a bare image) and the image.
pub fn from_payload(payload: Vec<u8>) -> Result<(serde_json::Value, RgbImage)> {
    // An envelope ends with its metadata's length; a PNG or JPEG does not parse as one.
    if let Ok(crate::Envelope { meta, body }) = crate::Envelope::<serde_json::Value>::decode(payload.clone())
        && meta.is_object()
    {
        let dim = |key: &str| meta.get(key).and_then(|v| v.as_u64()).and_then(|v| u32::try_from(v).ok());
        let (Some(width), Some(height)) = (dim("width"), dim("height")) else {
            return Err(Error::invalid_input("the envelope's metadata needs numeric `width` and `height`"));
        };
        let image = from_rgb8(width, height, body)?;
        return Ok((meta, image));
    }
    Ok((serde_json::json!({}), decode(&payload)?))
}

/// Wrap raw interleaved RGB bytes of a `width` × `height` image.
pub fn from_rgb8(width: u32, height: u32, bytes: Vec<u8>) -> Result<RgbImage> {
    let got = bytes.len();
    RgbImage::from_raw(width, height, bytes).ok_or_else(|| {
        Error::invalid_input(format!(
            "a {width}x{height} RGB image needs {} bytes, got {got}",
            u64::from(width) * u64::from(height) * 3
        ))
    })
}

/// Encode as PNG.
pub fn encode_png(image: &RgbImage) -> Result<Vec<u8>> {
    let mut out = std::io::Cursor::new(Vec::new());
    image.write_to(&mut out, ::image::ImageFormat::Png)?;
    Ok(out.into_inner())
}

/// The part of `image` inside `region`, or `None` when the region lies outside the image.
pub fn crop(image: &RgbImage, region: &BoundingBox) -> Option<RgbImage> {
    let (x, y, w, h) = region.pixels_within(image.width(), image.height())?;
    // Copy whole rows: several times faster than going pixel by pixel through a sub-image view.
    let stride = image.width() as usize * 3;
    let (start, len) = (x as usize * 3, w as usize * 3);
    let src = image.as_raw();
    // Spare room for an envelope trailer, so framing the crop for `emit` appends instead of copying it.
    let mut out = Vec::with_capacity(len * h as usize + crate::envelope::TRAILER_RESERVE);
    for row in y as usize..(y + h) as usize {
        out.extend_from_slice(&src[row * stride + start..row * stride + start + len]);
    }
    RgbImage::from_raw(w, h, out)
}

/// Resize to exactly `width` × `height` with bilinear filtering.
pub fn resize(image: &RgbImage, width: u32, height: u32) -> RgbImage {
    ::image::imageops::resize(image, width, height, ::image::imageops::FilterType::Triangle)
}

/// Swap the red and blue channels in place: for models trained on BGR images (OpenCV's order), such as
/// PP-OCR's.
pub fn swap_red_blue(image: &mut RgbImage) {
    for px in image.pixels_mut() {
        px.0.swap(0, 2);
    }
}

/// Per-channel normalisation applied by [`to_nchw`]: `(pixel / 255 - mean) / std`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalize {
    /// Per-channel mean (R, G, B) of pixels scaled to 0–1.
    pub mean: [f32; 3],
    /// Per-channel standard deviation (R, G, B) of pixels scaled to 0–1.
    pub std: [f32; 3],
}

impl Normalize {
    /// Pixels scaled to `[0, 1]`.
    pub const UNIT: Normalize = Normalize { mean: [0.0; 3], std: [1.0; 3] };
    /// ImageNet statistics, used by most classification backbones.
    pub const IMAGENET: Normalize = Normalize { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] };
    /// Pixels scaled to `[-1, 1]`, as PP-OCR's recognizer expects.
    pub const SYMMETRIC: Normalize = Normalize { mean: [0.5; 3], std: [0.5; 3] };
}

/// A `[1, 3, height, width]` `f32` tensor of `image`, channel-planar, normalised by `norm`.
pub fn to_nchw(image: &RgbImage, norm: Normalize) -> Tensor {
    let (w, h) = (image.width() as usize, image.height() as usize);
    let plane = w * h;
    let mut values = vec![0f32; 3 * plane];
    let scale: [f32; 3] = std::array::from_fn(|c| 1.0 / (255.0 * norm.std[c]));
    let shift: [f32; 3] = std::array::from_fn(|c| norm.mean[c] / norm.std[c]);
    for (i, px) in image.as_raw().chunks_exact(3).enumerate() {
        for c in 0..3 {
            values[c * plane + i] = f32::from(px[c]) * scale[c] - shift[c];
        }
    }
    Tensor::from_f32(&[1, 3, h as u64, w as u64], &values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(w: u32, h: u32) -> RgbImage {
        RgbImage::from_fn(w, h, |x, y| ::image::Rgb([x as u8, y as u8, 7]))
    }

    #[test]
    fn crop_rounds_outward_and_clamps() {
        let img = gradient(10, 8);
        let c = crop(&img, &BoundingBox { x0: 2.5, y0: -3.0, x1: 5.2, y1: 2.0 }).unwrap();
        assert_eq!(c.dimensions(), (4, 2));
        assert_eq!(c.get_pixel(0, 0).0, [2, 0, 7]);
        assert_eq!(c.get_pixel(3, 1).0, [5, 1, 7]);
        assert!(crop(&img, &BoundingBox { x0: 20.0, y0: 0.0, x1: 30.0, y1: 5.0 }).is_none());
        assert!(crop(&img, &BoundingBox { x0: f32::NAN, y0: 0.0, x1: f32::NAN, y1: 5.0 }).is_none());
    }

    #[test]
    fn nchw_is_planar_and_normalised() {
        let img = gradient(3, 2);
        let t = to_nchw(&img, Normalize::SYMMETRIC);
        assert_eq!(t.shape(), &[1, 3, 2, 3]);
        let v = t.view::<f32>().unwrap();
        assert!((v.get(&[0, 0, 1, 2]).unwrap() - (2.0 / 255.0 - 0.5) / 0.5).abs() < 1e-6);
        assert!((v.get(&[0, 1, 1, 2]).unwrap() - (1.0 / 255.0 - 0.5) / 0.5).abs() < 1e-6);
    }

    #[test]
    fn png_round_trips_and_garbage_is_invalid_input() {
        let img = gradient(5, 4);
        assert_eq!(decode(&encode_png(&img).unwrap()).unwrap(), img);
        assert!(matches!(decode(b"not an image"), Err(Error::InvalidInput(_))));
        assert!(from_rgb8(2, 2, vec![0; 11]).is_err());
    }
}

#[cfg(test)]
mod header_tests {
    /// The header of a 30000×30000 RGB PNG: signature, IHDR, an empty IDAT, IEND.
    const HUGE_PNG: &str = "89504e470d0a1a0a0000000d4948445200007530000075300802000000e9456fed000000004944415435af061e0000000049454e44ae426082";

    #[test]
    fn dimensions_of_a_huge_png_come_from_its_header() {
        let huge: Vec<u8> =
            (0..HUGE_PNG.len()).step_by(2).map(|i| u8::from_str_radix(&HUGE_PNG[i..i + 2], 16).unwrap()).collect();
        assert_eq!(super::dimensions(&huge).unwrap(), (30_000, 30_000));
    }
}

#[cfg(test)]
mod payload_tests {
    use super::*;

    #[test]
    fn a_payload_is_an_encoded_image_or_an_envelope_of_raw_rgb() {
        let picture = RgbImage::from_fn(3, 2, |x, y| ::image::Rgb([x as u8, y as u8, 9]));
        let (meta, decoded) = from_payload(encode_png(&picture).unwrap()).unwrap();
        assert_eq!((meta, decoded.clone()), (serde_json::json!({}), picture.clone()));
        let envelope = crate::Envelope {
            meta: serde_json::json!({"width": 3, "height": 2, "index": 7}),
            body: picture.clone().into_raw(),
        };
        let (meta, decoded) = from_payload(envelope.encode()).unwrap();
        assert_eq!((meta["index"].as_u64(), decoded), (Some(7), picture));
        assert!(from_payload(b"neither".to_vec()).is_err());
    }
}
