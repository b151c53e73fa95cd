//! `ocr-detect`: find the lines of text in a photo with a DB text detector (PP-OCR's), cut each line out and
//! `emit` it to the recognizer.
//!
//! **Input**: a PNG or JPEG image.
//!
//! **Model** (slot `det`, config `slot`): input `[1, 3, H, W]` `f32`, BGR, pixels scaled to `[-1, 1]`, H and W
//! multiples of 32; output the text probability map `[1, 1, H, W]`.
//!
//! **Glue around it**: the image is scaled so its longer side is at most `max_side` (default 960); the map is
//! thresholded at `threshold` (0.3) and dilated; each connected region becomes a box scored by the mean
//! probability inside it; boxes under `box_threshold` (0.5) or thinner than 3 pixels are dropped, the rest
//! grown by the DB "unclip" margin (`unclip` = 1.6: area × ratio / perimeter), and the `top_k` (32) best kept,
//! in reading order.
//!
//! **Emits**, on port `lines` (config `port`), one envelope per line: metadata [`Line`], body the line's pixels
//! as raw RGB.
//!
//! **Returns** JSON `{"lines": <number emitted>, "width": .., "height": ..}`; an image without text emits
//! nothing and returns `{"lines": 0, ...}`. Images over `max_pixels` (20 million) are refused as invalid
//! input before they are decoded.

use jig_sdk::image::{self, BoundingBox, Normalize, RgbImage};
use jig_sdk::{Envelope, Error, Function, Result, Tensor};
use serde::{Deserialize, Serialize};

/// Metadata of one emitted line (the same fields `crop` emits, plus the detector's score).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// Position in reading order.
    pub index: usize,
    /// Where the line is, in pixels of the input image.
    #[serde(rename = "box")]
    pub region: BoundingBox,
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
    pub max_side: u32,
    pub threshold: f32,
    pub box_threshold: f32,
    pub unclip: f32,
    pub top_k: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { max_side: 960, threshold: 0.3, box_threshold: 0.5, unclip: 1.6, top_k: 32 }
    }
}

impl Settings {
    fn from_config() -> Result<Settings> {
        let d = Settings::default();
        let s = Settings {
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

/// The detector's input for `image`: scaled (longer side ≤ `max_side`, both sides multiples of 32), BGR,
/// in `[-1, 1]`.
pub fn preprocess(image: &RgbImage, max_side: u32) -> Tensor {
    let (w, h) = image.dimensions();
    let ratio = (max_side as f32 / w.max(h) as f32).min(1.0);
    let round32 = |v: u32| ((v as f32 * ratio / 32.0).round() as u32).max(1) * 32;
    let mut resized = image::resize(image, round32(w), round32(h));
    image::swap_red_blue(&mut resized);
    image::to_nchw(&resized, Normalize::SYMMETRIC)
}

/// Boxes of text in a `[.., H, W]` probability map, in the map's pixels, with their scores, in reading order.
pub fn boxes(map: &[f32], width: usize, height: usize, s: &Settings) -> Vec<(BoundingBox, f32)> {
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
    let mut stack = Vec::new();
    for start in 0..width * height {
        if !mask[start] || seen[start] {
            continue;
        }
        // One 8-connected region: its bounding box.
        let (mut x0, mut y0, mut x1, mut y1) = (usize::MAX, usize::MAX, 0, 0);
        seen[start] = true;
        stack.push(start);
        while let Some(i) = stack.pop() {
            let (x, y) = (i % width, i / width);
            (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
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
        let (w, h) = ((x1 - x0 + 1) as f32, (y1 - y0 + 1) as f32);
        if w.min(h) < 3.0 {
            continue;
        }
        // "Fast" score: the mean probability over the box.
        let mut sum = 0.0;
        for y in y0..=y1 {
            sum += map[y * width + x0..=y * width + x1].iter().sum::<f32>();
        }
        let score = sum / (w * h);
        if score < s.box_threshold {
            continue;
        }
        // DB's unclip: the detector marks a shrunk text core; grow it back by area × ratio / perimeter.
        let d = w * h * s.unclip / (2.0 * (w + h));
        let region = BoundingBox {
            x0: (x0 as f32 - d).max(0.0),
            y0: (y0 as f32 - d).max(0.0),
            x1: (x1 as f32 + 1.0 + d).min(width as f32),
            y1: (y1 as f32 + 1.0 + d).min(height as f32),
        };
        found.push((region, score));
    }
    // The best `top_k`, then in reading order: top to bottom, left to right within a line.
    found.sort_by(|a, b| b.1.total_cmp(&a.1));
    found.truncate(s.top_k);
    found.sort_by(|(a, _), (b, _)| {
        let same_line = (a.y0 - b.y0).abs() < 0.5 * (a.y1 - a.y0).min(b.y1 - b.y0);
        if same_line { a.x0.total_cmp(&b.x0) } else { a.y0.total_cmp(&b.y0) }
    });
    found
}

/// Detect the lines of `image` and pass each, framed as an envelope, to `emit`.
pub fn detect(image: &RgbImage, s: &Settings, slot: &str, mut emit: impl FnMut(Vec<u8>)) -> Result<usize> {
    let input = preprocess(image, s.max_side);
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
    let mut emitted = 0;
    for (index, (b, score)) in boxes(map.as_slice(), map_w, map_h, s).into_iter().enumerate() {
        let region = BoundingBox { x0: b.x0 * sx, y0: b.y0 * sy, x1: b.x1 * sx, y1: b.y1 * sy };
        let Some(crop) = image::crop(image, &region) else { continue };
        let (width, height) = crop.dimensions();
        let meta = Line { index, region, score, width, height, encoding: "rgb8".into() };
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
    fn preprocess_keeps_multiples_of_32_and_the_side_limit() {
        let image = RgbImage::new(1000, 300);
        let t = preprocess(&image, 960);
        assert_eq!(t.shape(), &[1, 3, 288, 960]);
        let t = preprocess(&RgbImage::new(10, 10), 960);
        assert_eq!(t.shape(), &[1, 3, 32, 32]);
    }
}
