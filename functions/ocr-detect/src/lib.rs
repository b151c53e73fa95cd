//! `ocr-detect`: find the lines of text in a photo with a DB text detector (PP-OCR's), cut each line out and
//! `emit` it to the recognizer.
//!
//! **Input**: a PNG or JPEG image.
//!
//! **Model** (slot `det`, config `slot`): input `[1, 3, H, W]` `f32`, BGR, pixels scaled to `[-1, 1]`, H and W
//! multiples of 32; output the text probability map `[1, 1, H, W]`.
//!
//! **Glue around it**: the image is scaled up so its shorter side is at least `min_side` (default 0: as it is;
//! PP-OCR's `limit_type = min` reading, which `rapidocr` uses with 736, grows small text to what the detector
//! was trained on), then down so its longer side is at most `max_side` (default 960); the map is
//! thresholded at `threshold` (0.3) and dilated; each connected region becomes a box turned as the region runs
//! (its principal axis, for regions at least twice as long as thick and turned by at most 45°; others stay
//! upright), scored by the mean probability inside it; boxes under `box_threshold` (0.5) or thinner than 3
//! pixels are dropped, the rest grown by the DB "unclip" margin (`unclip` = 1.6: area × ratio / perimeter),
//! and the `top_k` (32) best kept, in reading order. A sign photographed a few degrees askew thus gives
//! upright lines to the recognizer, as PP-OCR's own pipeline does with its minimum-area rectangles.
//!
//! **Emits**, on port `lines` (config `port`), one envelope per line: metadata [`Line`], body the line's pixels,
//! turned upright, as raw RGB.
//!
//! **Returns** JSON `{"lines": <number emitted>, "width": .., "height": ..}`; an image without text emits
//! nothing and returns `{"lines": 0, ...}`. Images over `max_pixels` (20 million), or that would take more than
//! `max_decoded_mib` (80) to decode (20 million pixels of 8-bit RGB take 60 MiB, of RGBA 140), are refused as
//! invalid input before they are decoded.

use jig_sdk::image::{self, BoundingBox, Normalize, RgbImage, RotatedBox};
use jig_sdk::{Envelope, Error, Function, Result, Tensor};
use serde::{Deserialize, Serialize};

/// Metadata of one emitted line (the same fields `crop` emits, plus the detector's score).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// Position in reading order.
    pub index: usize,
    /// The axis-aligned box around the line, in pixels of the input image.
    #[serde(rename = "box")]
    pub region: BoundingBox,
    /// The line's own box, turned as the line runs: what was cut out.
    pub rotated: RotatedBox,
    /// Mean text probability inside the box.
    pub score: f32,
    pub width: u32,
    pub height: u32,
    /// Always `rgb8`.
    pub encoding: String,
}

/// The glue's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub min_side: u32,
    pub max_side: u32,
    pub threshold: f32,
    pub box_threshold: f32,
    pub unclip: f32,
    pub top_k: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { min_side: 0, max_side: 960, threshold: 0.3, box_threshold: 0.5, unclip: 1.6, top_k: 32 }
    }
}

impl Settings {
    fn from_config() -> Result<Settings> {
        let d = Settings::default();
        let s = Settings {
            min_side: jig_sdk::config_or("min_side", d.min_side)?,
            max_side: jig_sdk::config_or("max_side", d.max_side)?,
            threshold: jig_sdk::config_or("threshold", d.threshold)?,
            box_threshold: jig_sdk::config_or("box_threshold", d.box_threshold)?,
            unclip: jig_sdk::config_or("unclip", d.unclip)?,
            top_k: jig_sdk::config_or("top_k", d.top_k)?,
        };
        if s.max_side < 32 {
            return Err(Error::invalid_input("config `max_side` must be at least 32"));
        }
        Ok(s)
    }
}

/// The detector's input for `image`: scaled (up until the shorter side is at least `min_side`, then down until
/// the longer side is at most `max_side`, both sides multiples of 32), BGR, in `[-1, 1]`.
pub fn preprocess(image: &RgbImage, min_side: u32, max_side: u32) -> Tensor {
    let (w, h) = image.dimensions();
    let up = (min_side as f32 / w.min(h).max(1) as f32).max(1.0);
    let ratio = up.min(max_side as f32 / w.max(h) as f32);
    let round32 = |v: u32| ((v as f32 * ratio / 32.0).round() as u32).max(1) * 32;
    let mut resized = image::resize(image, round32(w), round32(h));
    image::swap_red_blue(&mut resized);
    image::to_nchw(&resized, Normalize::SYMMETRIC)
}

/// Boxes of text in a `[.., H, W]` probability map, in the map's pixels, with their scores, in reading order.
pub fn boxes(map: &[f32], width: usize, height: usize, s: &Settings) -> Vec<(RotatedBox, f32)> {
    // Threshold, then dilate with a 2×2 kernel as PP-OCR does, so glyphs of one line join up.
    let mut mask = vec![false; width * height];
    for y in 0..height {
        for x in 0..width {
            let on = |dx: usize, dy: usize| x >= dx && y >= dy && map[(y - dy) * width + x - dx] > s.threshold;
            mask[y * width + x] = on(0, 0) || on(1, 0) || on(0, 1) || on(1, 1);
        }
    }
    let mut found = Vec::new();
    let mut seen = vec![false; width * height];
    let (mut stack, mut region) = (Vec::new(), Vec::new());
    for start in 0..width * height {
        if !mask[start] || seen[start] {
            continue;
        }
        // One 8-connected region, its pixels collected.
        region.clear();
        seen[start] = true;
        stack.push(start);
        while let Some(i) = stack.pop() {
            region.push(i);
            let (x, y) = (i % width, i / width);
            for (dx, dy) in [(-1i64, -1i64), (0, -1), (1, -1), (-1, 0), (1, 0), (-1, 1), (0, 1), (1, 1)] {
                let (nx, ny) = (x as i64 + dx, y as i64 + dy);
                if nx < 0 || ny < 0 || nx >= width as i64 || ny >= height as i64 {
                    continue;
                }
                let j = ny as usize * width + nx as usize;
                if mask[j] && !seen[j] {
                    seen[j] = true;
                    stack.push(j);
                }
            }
        }
        let Some(line) = enclose(&region, width) else { continue };
        if line.width.min(line.height) < 3.0 {
            continue;
        }
        let score = mean_inside(map, width, height, &line);
        if score < s.box_threshold {
            continue;
        }
        // DB's unclip: the detector marks a shrunk text core; grow it back by area × ratio / perimeter.
        let d = line.width * line.height * s.unclip / (2.0 * (line.width + line.height));
        found.push((RotatedBox { width: line.width + 2.0 * d, height: line.height + 2.0 * d, ..line }, score));
    }
    // The best `top_k`, then in reading order: top to bottom, left to right within a line.
    found.sort_by(|a, b| b.1.total_cmp(&a.1));
    found.truncate(s.top_k);
    found.sort_by(|(a, _), (b, _)| {
        let (a, b) = (a.bounding_box(), b.bounding_box());
        let same_line = (a.y0 - b.y0).abs() < 0.5 * (a.y1 - a.y0).min(b.y1 - b.y0);
        if same_line { a.x0.total_cmp(&b.x0) } else { a.y0.total_cmp(&b.y0) }
    });
    found
}

/// The box around a region's pixels (indices into a map `width` wide), turned along the region's principal
/// axis when the region is a line: at least twice as long as it is thick, and turned by at most 45° (steeper
/// regions, single glyphs and blobs get an upright box). Pixel `i` covers `[i, i + 1)`.
fn enclose(region: &[usize], width: usize) -> Option<RotatedBox> {
    let n = region.len() as f64;
    let xy = |i: usize| ((i % width) as f64, (i / width) as f64);
    let (mut mx, mut my) = (0.0, 0.0);
    for &i in region {
        let (x, y) = xy(i);
        (mx, my) = (mx + x, my + y);
    }
    (mx, my) = (mx / n, my / n);
    let (mut cxx, mut cyy, mut cxy) = (0.0, 0.0, 0.0);
    for &i in region {
        let (x, y) = xy(i);
        (cxx, cyy, cxy) = (cxx + (x - mx) * (x - mx), cyy + (y - my) * (y - my), cxy + (x - mx) * (y - my));
    }
    let angle = 0.5 * (2.0 * cxy).atan2(cxx - cyy);
    let spread = ((cxx - cyy) / 2.0).hypot(cxy);
    let (major, minor) = ((cxx + cyy) / 2.0 + spread, (cxx + cyy) / 2.0 - spread);
    // Variance grows with the square of length: twice as long is four times the variance.
    let angle = if major >= 4.0 * minor && angle.abs() <= std::f64::consts::FRAC_PI_4 { angle } else { 0.0 };
    let (sin, cos) = angle.sin_cos();
    let (mut u0, mut u1, mut v0, mut v1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &i in region {
        let (dx, dy) = (xy(i).0 - mx, xy(i).1 - my);
        let (u, v) = (dx * cos + dy * sin, -dx * sin + dy * cos);
        (u0, u1, v0, v1) = (u0.min(u), u1.max(u), v0.min(v), v1.max(v));
    }
    if (u1 - u0 + 1.0) / 2.0 * sin.abs() <= 1.0 && angle != 0.0 {
        // Turned by less than moves its ends a pixel: cut upright, whole pixels as they are, unresampled.
        return enclose_upright(region, width);
    }
    let (uc, vc) = ((u0 + u1) / 2.0, (v0 + v1) / 2.0);
    (!region.is_empty()).then(|| RotatedBox {
        cx: (mx + uc * cos - vc * sin + 0.5) as f32,
        cy: (my + uc * sin + vc * cos + 0.5) as f32,
        width: (u1 - u0 + 1.0) as f32,
        height: (v1 - v0 + 1.0) as f32,
        angle: angle.to_degrees() as f32,
    })
}

/// The upright box around a region's pixels.
fn enclose_upright(region: &[usize], width: usize) -> Option<RotatedBox> {
    let (mut x0, mut y0, mut x1, mut y1) = (usize::MAX, usize::MAX, 0, 0);
    for &i in region {
        let (x, y) = (i % width, i / width);
        (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
    }
    let (w, h) = ((x1 + 1 - x0) as f32, (y1 + 1 - y0) as f32);
    (!region.is_empty()).then(|| RotatedBox {
        cx: x0 as f32 + w / 2.0,
        cy: y0 as f32 + h / 2.0,
        width: w,
        height: h,
        angle: 0.0,
    })
}

/// The mean of the map over the pixels whose centres lie inside `b` (DB's "fast" box score, for a turned box).
fn mean_inside(map: &[f32], width: usize, height: usize, b: &RotatedBox) -> f32 {
    let (sin, cos) = b.angle.to_radians().sin_cos();
    let Some((x0, y0, w, h)) = b.bounding_box().pixels_within(width as u32, height as u32) else { return 0.0 };
    let (mut sum, mut count) = (0.0, 0u32);
    for y in y0..y0 + h {
        for x in x0..x0 + w {
            let (dx, dy) = (x as f32 + 0.5 - b.cx, y as f32 + 0.5 - b.cy);
            let (u, v) = (dx * cos + dy * sin, -dx * sin + dy * cos);
            if u.abs() <= b.width / 2.0 + 1e-3 && v.abs() <= b.height / 2.0 + 1e-3 {
                sum += map[y as usize * width + x as usize];
                count += 1;
            }
        }
    }
    if count == 0 { 0.0 } else { sum / count as f32 }
}

/// Detect the lines of `image` and pass each, framed as an envelope, to `emit`.
pub fn detect(image: &RgbImage, s: &Settings, slot: &str, mut emit: impl FnMut(Vec<u8>)) -> Result<usize> {
    let input = preprocess(image, s.min_side, s.max_side);
    let (map_h, map_w) = (input.shape()[2] as usize, input.shape()[3] as usize);
    let outputs = jig_sdk::infer(slot, &[input])?;
    let map = outputs.first().ok_or_else(|| Error::internal("the detector returned no output"))?.view::<f32>()?;
    if map.as_slice().len() != map_h * map_w {
        return Err(Error::internal(format!(
            "the detector's map has shape {:?}; expected [1, 1, {map_h}, {map_w}]",
            map.shape()
        )));
    }
    let (sx, sy) = (image.width() as f32 / map_w as f32, image.height() as f32 / map_h as f32);
    let (iw, ih) = (image.width() as f32, image.height() as f32);
    let mut emitted = 0;
    for (index, (b, score)) in boxes(map.as_slice(), map_w, map_h, s).into_iter().enumerate() {
        let rotated = b.scaled(sx, sy);
        let Some(crop) = image::crop_rotated(image, &rotated) else { continue };
        let around = rotated.bounding_box();
        let region = BoundingBox {
            x0: around.x0.max(0.0),
            y0: around.y0.max(0.0),
            x1: around.x1.min(iw),
            y1: around.y1.min(ih),
        };
        let (width, height) = crop.dimensions();
        let meta = Line { index, region, rotated, score, width, height, encoding: "rgb8".into() };
        emit(Envelope { meta, body: crop.into_raw() }.encode());
        emitted += 1;
    }
    Ok(emitted)
}

pub struct OcrDetect;

impl Function for OcrDetect {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let settings = Settings::from_config()?;
        let port = jig_sdk::config("port").unwrap_or_else(|| "lines".into());
        let slot = jig_sdk::config("slot").unwrap_or_else(|| "det".into());
        if payload.is_empty() {
            return Err(Error::invalid_input("the request is empty; send a PNG or JPEG image"));
        }
        let (w, h) = image::dimensions(&payload)?;
        let max_pixels: u64 = jig_sdk::config_or("max_pixels", 20_000_000)?;
        if u64::from(w) * u64::from(h) > max_pixels {
            return Err(Error::invalid_input(format!(
                "the image is {w}x{h}; the sign reader takes at most {max_pixels} pixels (config `max_pixels`)"
            )));
        }
        // Decoding must fit the function's memory (128 MiB by default) beside the request and the model's input.
        let max_decoded: u64 = jig_sdk::config_or("max_decoded_mib", 80)?;
        let needed = image::decoded_bytes(&payload)?;
        if needed > max_decoded << 20 {
            return Err(Error::invalid_input(format!(
                "the image is {w}x{h} and takes {} MiB to decode; the sign reader decodes at most {max_decoded} MiB \
                 (config `max_decoded_mib`): send it smaller, or as 8-bit RGB",
                needed.div_ceil(1 << 20)
            )));
        }
        let image = image::decode(&payload)?;
        let lines = detect(&image, &settings, &slot, |line| jig_sdk::emit(&port, &line))?;
        let (width, height) = image.dimensions();
        Ok(serde_json::to_vec(&serde_json::json!({ "lines": lines, "width": width, "height": height }))?)
    }
}

jig_sdk::export!(OcrDetect);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_words_on_a_line_and_one_below_come_out_in_reading_order() {
        let (w, h) = (64, 32);
        let mut map = vec![0.0f32; w * h];
        let mut fill = |x0: usize, y0: usize, x1: usize, y1: usize, p: f32| {
            for y in y0..y1 {
                for x in x0..x1 {
                    map[y * w + x] = p;
                }
            }
        };
        fill(30, 4, 50, 10, 0.9); // right word
        fill(4, 5, 20, 10, 0.8); // left word, same line
        fill(4, 20, 40, 26, 0.95); // next line
        fill(45, 28, 50, 31, 0.35); // above the threshold, but its box scores below the box threshold
        let s = Settings::default();
        let found = boxes(&map, w, h, &s);
        let found: Vec<(BoundingBox, f32)> = found.iter().map(|(b, score)| (b.bounding_box(), *score)).collect();
        let x0s: Vec<f32> = found.iter().map(|(b, _)| b.x0.round()).collect();
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(x0s[0] < x0s[1], "left word before right word: {found:?}");
        assert!(found[2].0.y0 > found[1].0.y1 - 6.0, "the second line comes after the first: {found:?}");
        // The mean probability over the dilated box: 16×5 pixels of 0.8 in 17×6.
        assert!((found[0].1 - 0.8 * 80.0 / 102.0).abs() < 1e-3, "{}", found[0].1);
        // Unclip grows the 17×6 dilated core by 17·6·1.6/46 ≈ 3.5 px on each side.
        assert!((found[0].0.x0 - 0.5).abs() < 0.6, "{:?}", found[0].0);
    }

    #[test]
    fn a_line_turned_a_few_degrees_is_found_along_its_slope() {
        // A line 200 px long and 12 px thick, turned 7° clockwise, as on a sign photographed askew: an upright
        // box around it would be two thirds empty and score under the box threshold.
        let (w, h, angle) = (320usize, 120usize, 7f32);
        let (sin, cos) = angle.to_radians().sin_cos();
        let map: Vec<f32> = (0..w * h)
            .map(|i| {
                let (dx, dy) = ((i % w) as f32 + 0.5 - 160.0, (i / w) as f32 + 0.5 - 60.0);
                let (u, v) = (dx * cos + dy * sin, -dx * sin + dy * cos);
                if u.abs() < 100.0 && v.abs() < 6.0 { 0.9 } else { 0.0 }
            })
            .collect();
        let found = boxes(&map, w, h, &Settings::default());
        assert_eq!(found.len(), 1, "{found:?}");
        let (line, score) = found[0];
        assert!((line.angle - angle).abs() < 0.5, "{line:?}");
        // 0.9 over most of the turned box (its edges take in some of the dilated stairstep's background).
        assert!(score > 0.7, "{score}");
        assert!((line.cx - 160.5).abs() < 1.5 && (line.cy - 60.5).abs() < 1.5, "{line:?}");
        // 201 × 13 dilated, grown by 201·13·1.6/428 ≈ 9.8 px on each side.
        assert!((line.width - 220.5).abs() < 3.0 && (line.height - 32.5).abs() < 3.0, "{line:?}");
    }

    #[test]
    fn preprocess_keeps_multiples_of_32_and_the_side_limits() {
        let image = RgbImage::new(1000, 300);
        let t = preprocess(&image, 0, 960);
        assert_eq!(t.shape(), &[1, 3, 288, 960]);
        let t = preprocess(&RgbImage::new(10, 10), 0, 960);
        assert_eq!(t.shape(), &[1, 3, 32, 32]);
        // A small sign grows until its shorter side is min_side; the longer side still caps it.
        let t = preprocess(&RgbImage::new(236, 120), 480, 960);
        assert_eq!(t.shape(), &[1, 3, 480, 960], "236×120 × 4 = 944×480");
        let t = preprocess(&RgbImage::new(400, 100), 480, 960);
        assert_eq!(t.shape(), &[1, 3, 256, 960], "the longer side's 960 bounds it first: 960×240");
        let t = preprocess(&image, 480, 960);
        assert_eq!(t.shape(), &[1, 3, 288, 960], "a large image is not grown");
    }
}
