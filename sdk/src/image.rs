//! Image helpers that run inside WebAssembly: decode PNG/JPEG, crop, resize, and normalise to an NCHW `f32`
//! tensor for a model. Images are [`RgbImage`]s of the `image` crate, re-exported here.

use serde::{Deserialize, Serialize};

use crate::{DType, Error, Result, Tensor};

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

/// A rectangle turned about its centre: what a text detector finds around a line on a sign photographed
/// slightly askew. `angle` is the turn of the box's `width` axis from the image's x axis, in degrees, clockwise
/// on screen (image y points down).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RotatedBox {
    /// Centre, pixels.
    pub cx: f32,
    /// Centre, pixels.
    pub cy: f32,
    /// Extent along the box's own x axis, pixels.
    pub width: f32,
    /// Extent across it, pixels.
    pub height: f32,
    /// Degrees from the image's x axis, clockwise on screen.
    pub angle: f32,
}

impl RotatedBox {
    /// The box's x and y axes in image coordinates, each scaled to half the box's extent along it.
    fn half_axes(&self) -> ((f32, f32), (f32, f32)) {
        let (sin, cos) = self.angle.to_radians().sin_cos();
        ((cos * self.width / 2.0, sin * self.width / 2.0), (-sin * self.height / 2.0, cos * self.height / 2.0))
    }

    /// The smallest axis-aligned box around it.
    pub fn bounding_box(&self) -> BoundingBox {
        let ((ux, uy), (vx, vy)) = self.half_axes();
        let (dx, dy) = (ux.abs() + vx.abs(), uy.abs() + vy.abs());
        BoundingBox { x0: self.cx - dx, y0: self.cy - dy, x1: self.cx + dx, y1: self.cy + dy }
    }

    /// The box in an image scaled by `sx` horizontally and `sy` vertically (from a model's input size back to
    /// the photo's): its axes scale with the image, so a box turned in a stretched image turns a little less
    /// or more in the original.
    pub fn scaled(&self, sx: f32, sy: f32) -> RotatedBox {
        let ((ux, uy), (vx, vy)) = self.half_axes();
        let (ux, uy, vx, vy) = (ux * sx, uy * sy, vx * sx, vy * sy);
        RotatedBox {
            cx: self.cx * sx,
            cy: self.cy * sy,
            width: 2.0 * ux.hypot(uy),
            height: 2.0 * vx.hypot(vy),
            angle: uy.atan2(ux).to_degrees(),
        }
    }
}

/// The part of `image` inside `region`, turned upright: `region.width` × `region.height` pixels (rounded),
/// each sampled bilinearly where the box puts it, edges repeated beyond the image. `None` when the box is
/// empty or its centre lies outside the image. An unturned box is cut as [`crop`] cuts its bounding box:
/// whole pixels, exactly as they are.
pub fn crop_rotated(image: &RgbImage, region: &RotatedBox) -> Option<RgbImage> {
    if region.angle == 0.0 {
        return crop(image, &region.bounding_box());
    }
    let (w, h) = (region.width.round(), region.height.round());
    let (iw, ih) = (image.width() as f32, image.height() as f32);
    let inside = (0.0..iw).contains(&region.cx) && (0.0..ih).contains(&region.cy);
    if !(w >= 1.0 && h >= 1.0 && inside) {
        return None;
    }
    let (w, h) = (w as u32, h as u32);
    let (sin, cos) = region.angle.to_radians().sin_cos();
    let src = image.as_raw();
    let stride = image.width() as usize * 3;
    let at = |x: usize, y: usize, c: usize| f32::from(src[y * stride + x * 3 + c]);
    let mut out = Vec::with_capacity((w * h * 3) as usize + crate::envelope::TRAILER_RESERVE);
    for v in 0..h {
        let dv = v as f32 + 0.5 - h as f32 / 2.0;
        for u in 0..w {
            let du = u as f32 + 0.5 - w as f32 / 2.0;
            // Where the pixel's centre falls in the image, in pixel-index space (centres at whole numbers).
            let x = (region.cx + du * cos - dv * sin - 0.5).clamp(0.0, iw - 1.0);
            let y = (region.cy + du * sin + dv * cos - 0.5).clamp(0.0, ih - 1.0);
            let (x0, y0) = (x.floor() as usize, y.floor() as usize);
            let (x1, y1) = ((x0 + 1).min(image.width() as usize - 1), (y0 + 1).min(image.height() as usize - 1));
            let (fx, fy) = (x - x0 as f32, y - y0 as f32);
            for c in 0..3 {
                let top = at(x0, y0, c) * (1.0 - fx) + at(x1, y0, c) * fx;
                let bottom = at(x0, y1, c) * (1.0 - fx) + at(x1, y1, c) * fx;
                out.push((top * (1.0 - fy) + bottom * fy).round() as u8);
            }
        }
    }
    RgbImage::from_raw(w, h, out)
}

/// The width and height of a PNG or JPEG, read from its header without decoding it: check a size before
/// paying for it.
pub fn dimensions(bytes: &[u8]) -> Result<(u32, u32)> {
    let mut reader = ::image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| Error::invalid_input(format!("cannot read the image: {e}")))?;
    // Reading the header allocates nothing; the decoder's memory limit would refuse a huge image unnamed.
    reader.no_limits();
    reader.into_dimensions().map_err(from_memory)
}

/// The bytes [`decode`] holds at its peak for `bytes`, from its header: the decoded pixels, and the RGB copy
/// of any image that is not 8-bit RGB already. What a function checks against its memory before it decodes.
pub fn decoded_bytes(bytes: &[u8]) -> Result<u64> {
    use ::image::ImageDecoder;
    let mut reader = ::image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| Error::invalid_input(format!("cannot read the image: {e}")))?;
    reader.no_limits();
    let decoder = reader.into_decoder().map_err(from_memory)?;
    let (w, h) = decoder.dimensions();
    let pixels = u64::from(w) * u64::from(h);
    let color = decoder.color_type();
    let copy = if color == ::image::ColorType::Rgb8 { 0 } else { 3 };
    Ok(pixels * (u64::from(color.bytes_per_pixel()) + copy))
}

/// Decode a PNG or JPEG (detected from its bytes) into RGB: an RGB image in place, others converted.
pub fn decode(bytes: &[u8]) -> Result<RgbImage> {
    Ok(::image::load_from_memory(bytes).map_err(from_memory)?.into_rgb8())
}

/// An error decoding bytes in memory: an I/O error there is the bytes ending early, the caller's image.
fn from_memory(e: ::image::ImageError) -> Error {
    match e {
        ::image::ImageError::IoError(e) => {
            Error::invalid_input(format!("image: {e}: the image is truncated or corrupt; send the whole file"))
        }
        e => e.into(),
    }
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

/// Resize to exactly `width` × `height` with bilinear filtering (area-aware when shrinking, as Pillow's).
///
/// `fast_image_resize`'s fixed-point convolution, not the `image` crate's float one: the sign reader's detector
/// input (480×240 to 640×320) took 7.5 ms there, and takes 0.9 ms here (natively): it was most of the glue's time.
pub fn resize(image: &RgbImage, width: u32, height: u32) -> RgbImage {
    use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer, images};
    if width == 0 || height == 0 || image.width() == 0 || image.height() == 0 {
        return RgbImage::new(width, height);
    }
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
    let mut out = images::Image::new(width, height, PixelType::U8x3);
    let resized = images::ImageRef::new(image.width(), image.height(), image.as_raw(), PixelType::U8x3)
        .map_err(|e| e.to_string())
        .and_then(|source| Resizer::new().resize(&source, &mut out, &options).map_err(|e| e.to_string()));
    match resized {
        Ok(()) => RgbImage::from_raw(width, height, out.into_vec()).expect("an image of width × height pixels"),
        // Never expected: an `RgbImage` holds whole U8x3 pixels, which need no alignment.
        Err(_) => ::image::imageops::resize(image, width, height, ::image::imageops::FilterType::Triangle),
    }
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
    let scale: [f32; 3] = std::array::from_fn(|c| 1.0 / (255.0 * norm.std[c]));
    let shift: [f32; 3] = std::array::from_fn(|c| norm.mean[c] / norm.std[c]);
    // Written straight into the tensor's bytes: a 640×640 image is 4.9 MB, which a `Vec<f32>` would be copied from.
    let mut data = vec![0u8; 3 * plane * 4];
    for (i, px) in image.as_raw().chunks_exact(3).enumerate() {
        for c in 0..3 {
            let at = (c * plane + i) * 4;
            data[at..at + 4].copy_from_slice(&(f32::from(px[c]) * scale[c] - shift[c]).to_le_bytes());
        }
    }
    Tensor::from_parts(DType::F32, &[1, 3, h as u64, w as u64], data)
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
    fn an_unturned_rotated_crop_is_the_plain_crop_and_a_turned_one_comes_out_upright() {
        let img = gradient(40, 30);
        let plain = crop(&img, &BoundingBox { x0: 4.0, y0: 6.0, x1: 14.0, y1: 11.0 }).unwrap();
        let straight = RotatedBox { cx: 9.0, cy: 8.5, width: 10.0, height: 5.0, angle: 0.0 };
        assert_eq!(crop_rotated(&img, &straight).unwrap(), plain);
        assert_eq!(straight.bounding_box(), BoundingBox { x0: 4.0, y0: 6.0, x1: 14.0, y1: 11.0 });

        // A bright bar 30 px long, 4 px thick, turned 10° clockwise about (40, 30) on a dark image.
        let angle = 10f32;
        let (sin, cos) = angle.to_radians().sin_cos();
        let bar = RgbImage::from_fn(80, 60, |x, y| {
            let (dx, dy) = (x as f32 + 0.5 - 40.0, y as f32 + 0.5 - 30.0);
            let (u, v) = (dx * cos + dy * sin, -dx * sin + dy * cos);
            let on = u.abs() < 15.0 && v.abs() < 2.0;
            ::image::Rgb(if on { [250; 3] } else { [10; 3] })
        });
        let region = RotatedBox { cx: 40.0, cy: 30.0, width: 28.0, height: 10.0, angle };
        let upright = crop_rotated(&bar, &region).unwrap();
        assert_eq!(upright.dimensions(), (28, 10));
        let row_mean = |y: u32| (0..28).map(|x| f32::from(upright.get_pixel(x, y).0[0])).sum::<f32>() / 28.0;
        // The bar runs along the middle rows and nowhere else: the crop is upright.
        assert!(row_mean(4) > 200.0 && row_mean(5) > 200.0, "{} {}", row_mean(4), row_mean(5));
        assert!(row_mean(0) < 30.0 && row_mean(9) < 30.0, "{} {}", row_mean(0), row_mean(9));
        let b = region.bounding_box();
        assert!((b.y1 - b.y0 - (28.0 * sin + 10.0 * cos)).abs() < 1e-3, "{b:?}");
        assert!(crop_rotated(&bar, &RotatedBox { cx: 90.0, ..region }).is_none());
    }

    #[test]
    fn a_rotated_box_scales_with_its_image() {
        let b = RotatedBox { cx: 10.0, cy: 20.0, width: 40.0, height: 8.0, angle: 30.0 };
        assert_eq!(b.scaled(1.0, 1.0).angle.round(), 30.0);
        let s = b.scaled(2.0, 2.0);
        assert!((s.width - 80.0).abs() < 1e-3 && (s.height - 16.0).abs() < 1e-3 && (s.angle - 30.0).abs() < 1e-3);
        // Stretched sideways, a turned line turns less.
        assert!(b.scaled(2.0, 1.0).angle < 30.0);
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

    #[test]
    fn decoding_costs_the_pixels_and_a_copy_unless_already_rgb() {
        let rgb = super::RgbImage::from_fn(10, 4, |x, _| ::image::Rgb([x as u8, 0, 0]));
        assert_eq!(super::decoded_bytes(&super::encode_png(&rgb).unwrap()).unwrap(), 10 * 4 * 3);
        let mut rgba = Vec::new();
        ::image::DynamicImage::ImageRgb8(rgb)
            .into_rgba8()
            .write_to(&mut std::io::Cursor::new(&mut rgba), ::image::ImageFormat::Png)
            .unwrap();
        assert_eq!(super::decoded_bytes(&rgba).unwrap(), 10 * 4 * (4 + 3));
    }

    #[test]
    fn a_truncated_image_is_the_callers_error() {
        let picture = super::RgbImage::from_fn(64, 64, |x, y| ::image::Rgb([x as u8, y as u8, (x * y) as u8]));
        let png = super::encode_png(&picture).unwrap();
        assert_eq!(super::decode(&png).unwrap(), picture);
        for cut in [png.len() / 2, 20] {
            let err = super::decode(&png[..cut]).unwrap_err();
            assert!(matches!(err, super::Error::InvalidInput(_)), "cut at {cut}: {err}");
        }
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

    #[test]
    fn resize_is_bilinear_as_the_image_crates_triangle_filter_is_within_three_levels() {
        // A smooth picture, scaled up and down as the glue does (the detector's and the recognizer's inputs).
        let picture =
            RgbImage::from_fn(48, 24, |x, y| ::image::Rgb([(x * 5) as u8, (y * 10) as u8, ((x + y) * 3) as u8]));
        for (w, h) in [(64, 32), (96, 48), (20, 10), (48, 7)] {
            let ours = resize(&picture, w, h);
            let theirs = ::image::imageops::resize(&picture, w, h, ::image::imageops::FilterType::Triangle);
            assert_eq!(ours.dimensions(), (w, h));
            let worst = (ours.as_raw().iter().zip(theirs.as_raw())).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
            assert!(worst <= 3, "{w}x{h}: a level differs by {worst}");
        }
        assert_eq!(resize(&picture, 0, 5).dimensions(), (0, 5));
        assert_eq!(resize(&RgbImage::new(0, 0), 4, 4), RgbImage::new(4, 4));
    }
}
