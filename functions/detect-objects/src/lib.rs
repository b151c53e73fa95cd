//! `detect-objects`: a YOLOv5 detector's glue: letterbox-free resize to 640×640, run the model, decode and
//! suppress boxes, cut each detection out and route it to a port by its class.
//!
//! **Input**: a PNG or JPEG image.
//!
//! **Model** (slot `detector`, config `slot`): input `[1, 3, 640, 640]` `f32` in `[0, 1]`; output
//! `[1, 255, 8400]`: for each cell of the 80×80, 40×40 and 20×20 grids (strides 8, 16, 32, in that order), 3
//! anchors × (x, y, w, h, objectness, 80 COCO class scores), as raw scores (the sigmoid is applied here).
//!
//! **Glue**: YOLOv5's box decoding (xy = (2σ − ½ + cell) × stride, wh = (2σ)² × anchor), score = objectness ×
//! best class, kept above `threshold` (0.25), non-maximum suppression at IoU `iou` (0.45), the best `top_k`
//! (16). **Routes** (config `routes`, `PORT:CLASS|CLASS...` separated by commas, e.g. `car:2|7,person:0`):
//! each detection whose class is listed goes, cut out as raw RGB in an envelope (metadata: index, box, class,
//! score, width, height), to that port; without `routes`, every detection goes to port `objects`.
//!
//! **Returns** JSON `{"detections": [{"box", "class", "score"}...]}`, all kept detections.

use jig_sdk::image::{self, BoundingBox, Normalize};
use jig_sdk::{Envelope, Error, Result};

pub const INPUT: u32 = 640;
const ANCHORS: [[(f32, f32); 3]; 3] = [
    [(10., 13.), (16., 30.), (33., 23.)],
    [(30., 61.), (62., 45.), (59., 119.)],
    [(116., 90.), (156., 198.), (373., 326.)],
];

/// One detection, in pixels of the 640×640 input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detection {
    pub region: BoundingBox,
    pub class: usize,
    pub score: f32,
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Decode `[255, cells]` raw scores into detections above `threshold`.
pub fn decode(raw: &[f32], threshold: f32) -> Vec<Detection> {
    let cells = raw.len() / 255;
    let at = |channel: usize, cell: usize| raw[channel * cells + cell];
    let mut found = Vec::new();
    let mut cell = 0;
    for (level, stride) in [8.0f32, 16.0, 32.0].into_iter().enumerate() {
        let side = (INPUT as f32 / stride) as usize;
        for row in 0..side {
            for col in 0..side {
                for (a, &(aw, ah)) in ANCHORS[level].iter().enumerate() {
                    let base = a * 85;
                    let objectness = sigmoid(at(base + 4, cell));
                    if objectness < threshold {
                        continue;
                    }
                    let (class, best) = (0..80)
                        .map(|c| (c, sigmoid(at(base + 5 + c, cell))))
                        .fold((0, 0.0), |m, (c, p)| if p > m.1 { (c, p) } else { m });
                    let score = objectness * best;
                    if score < threshold {
                        continue;
                    }
                    let x = (sigmoid(at(base, cell)) * 2.0 - 0.5 + col as f32) * stride;
                    let y = (sigmoid(at(base + 1, cell)) * 2.0 - 0.5 + row as f32) * stride;
                    let w = (sigmoid(at(base + 2, cell)) * 2.0).powi(2) * aw;
                    let h = (sigmoid(at(base + 3, cell)) * 2.0).powi(2) * ah;
                    let region = BoundingBox { x0: x - w / 2.0, y0: y - h / 2.0, x1: x + w / 2.0, y1: y + h / 2.0 };
                    found.push(Detection { region, class, score });
                }
                cell += 1;
            }
        }
    }
    found
}

fn iou(a: &BoundingBox, b: &BoundingBox) -> f32 {
    let w = (a.x1.min(b.x1) - a.x0.max(b.x0)).max(0.0);
    let h = (a.y1.min(b.y1) - a.y0.max(b.y0)).max(0.0);
    let inter = w * h;
    let area = |r: &BoundingBox| (r.x1 - r.x0) * (r.y1 - r.y0);
    inter / (area(a) + area(b) - inter).max(f32::MIN_POSITIVE)
}

/// Greedy non-maximum suppression per class, best first, at most `top_k`.
pub fn suppress(mut found: Vec<Detection>, iou_limit: f32, top_k: usize) -> Vec<Detection> {
    found.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<Detection> = Vec::new();
    for d in found {
        if kept.len() == top_k {
            break;
        }
        if kept.iter().all(|k| k.class != d.class || iou(&k.region, &d.region) < iou_limit) {
            kept.push(d);
        }
    }
    kept
}

/// `PORT:CLASS|CLASS...,...` into (port, class) pairs.
fn routes(config: &str) -> Result<Vec<(String, usize)>> {
    let mut pairs = Vec::new();
    for route in config.split(',').filter(|r| !r.trim().is_empty()) {
        let bad = || Error::invalid_input(format!("config `routes`: `{route}` is not PORT:CLASS|CLASS..."));
        let (port, classes) = route.split_once(':').ok_or_else(bad)?;
        for class in classes.split('|') {
            pairs.push((port.trim().to_string(), class.trim().parse().map_err(|_| bad())?));
        }
    }
    Ok(pairs)
}

pub struct DetectObjects;

impl jig_sdk::Function for DetectObjects {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let slot = jig_sdk::config("slot").unwrap_or_else(|| "detector".into());
        let threshold: f32 = jig_sdk::config_or("threshold", 0.25)?;
        let iou_limit: f32 = jig_sdk::config_or("iou", 0.45)?;
        let top_k: usize = jig_sdk::config_or("top_k", 16)?;
        let routes = jig_sdk::config("routes").map(|r| routes(&r)).transpose()?;
        let picture = image::decode(&payload)?;
        let input = image::to_nchw(&image::resize(&picture, INPUT, INPUT), Normalize::UNIT);
        let outputs = jig_sdk::infer(&slot, &[input])?;
        let raw = outputs.first().ok_or_else(|| Error::internal("the detector returned no output"))?.view::<f32>()?;
        if raw.as_slice().len() % 255 != 0 || raw.as_slice().len() / 255 != 8400 {
            return Err(Error::internal(format!(
                "the detector's output has shape {:?}; expected [1, 255, 8400]",
                raw.shape()
            )));
        }
        let kept = suppress(decode(raw.as_slice(), threshold), iou_limit, top_k);
        // Back to the picture's pixels.
        let (sx, sy) = (picture.width() as f32 / INPUT as f32, picture.height() as f32 / INPUT as f32);
        let mut listed = Vec::new();
        for (index, d) in kept.iter().enumerate() {
            let r = &d.region;
            let region = BoundingBox { x0: r.x0 * sx, y0: r.y0 * sy, x1: r.x1 * sx, y1: r.y1 * sy };
            listed.push(serde_json::json!({ "box": region, "class": d.class, "score": d.score }));
            let port = match &routes {
                Some(routes) => match routes.iter().find(|(_, c)| *c == d.class) {
                    Some((port, _)) => port.as_str(),
                    None => continue,
                },
                None => "objects",
            };
            let Some(crop) = image::crop(&picture, &region) else { continue };
            let (width, height) = crop.dimensions();
            let meta = serde_json::json!({
                "index": index, "box": region, "class": d.class, "score": d.score, "width": width, "height": height,
                "encoding": "rgb8",
            });
            jig_sdk::emit(port, &Envelope { meta, body: crop.into_raw() }.encode());
        }
        Ok(serde_json::to_vec(&serde_json::json!({ "detections": listed }))?)
    }
}

jig_sdk::export!(DetectObjects);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_places_a_confident_cell_and_suppression_keeps_the_best() {
        let cells = 8400;
        let mut raw = vec![-10.0f32; 255 * cells];
        // Cell (row 2, col 3) of the 80×80 grid, anchor 0: centred in the cell, class 2.
        let cell = 2 * 80 + 3;
        for (channel, value) in [(0, 0.0), (1, 0.0), (2, 0.0), (3, 0.0), (4, 10.0), (5 + 2, 10.0)] {
            raw[channel * cells + cell] = value;
        }
        let found = decode(&raw, 0.25);
        assert_eq!(found.len(), 1);
        let d = found[0];
        assert_eq!(d.class, 2);
        // xy = (2·½ − ½ + cell) × 8: (3.5 × 8, 2.5 × 8); wh = (2·½)² × anchor (10, 13).
        assert!((d.region.x0 - (28.0 - 5.0)).abs() < 1e-4 && (d.region.y1 - (20.0 + 6.5)).abs() < 1e-4, "{d:?}");

        let shifted = Detection {
            region: BoundingBox { x0: d.region.x0 + 1.0, x1: d.region.x1 + 1.0, ..d.region },
            score: 0.5,
            ..d
        };
        let other = Detection { class: 0, ..shifted };
        let kept = suppress(vec![shifted, d, other], 0.45, 16);
        assert_eq!(kept.len(), 2, "the overlapping same-class box goes, the other class stays");
        assert_eq!(kept[0], d);
    }

    #[test]
    fn routes_are_port_class_pairs() {
        assert_eq!(routes("car:2, person:0").unwrap(), vec![("car".into(), 2), ("person".into(), 0)]);
        assert_eq!(routes("vehicle:2|7").unwrap(), vec![("vehicle".into(), 2), ("vehicle".into(), 7)]);
        assert!(routes("car").is_err());
    }
}
