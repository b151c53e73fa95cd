//! `select`: filter detections by label, score and top-k, and route each kept detection to a port.
//!
//! **Input**: JSON `{"detections": [{"label": "person", "score": 0.93, "box": {...}, ...}, ...]}`. Each
//! detection needs `label` and `score`; every other field (a box, an image id) is passed through untouched.
//!
//! **Configuration** (all optional):
//! * `labels`: comma-separated labels to keep (default: all);
//! * `min-score`: lowest score kept (default `0.5`);
//! * `top-k`: keep at most this many, highest scores first (default: no limit);
//! * `route`: `label` sends each detection to the port named after its label; any other value is the one
//!   port all kept detections go to (default `selected`).
//!
//! **Emits** each kept detection as JSON on its port. **Returns** JSON `{"selected": [...], "dropped": n}`, the
//! kept detections in emission order, each with the `port` it went to.

use jig_sdk::{Error, Function, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One detection; fields other than `label` and `score` are kept as they came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    pub label: String,
    pub score: f64,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
struct Input {
    detections: Vec<Detection>,
}

/// Where kept detections go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// To the port named after the detection's label.
    ByLabel,
    /// All to one port.
    Port(String),
}

/// Which detections to keep and where to send them.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    pub labels: Option<Vec<String>>,
    pub min_score: f64,
    pub top_k: Option<usize>,
    pub route: Route,
}

impl Rules {
    /// The rules in this function's configuration.
    pub fn from_config() -> Result<Self> {
        let labels = jig_sdk::config("labels")
            .map(|l| l.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect());
        let min_score: f64 = jig_sdk::config_or("min-score", 0.5)?;
        if !min_score.is_finite() {
            return Err(Error::invalid_input("config key `min-score` must be a finite number"));
        }
        let top_k = jig_sdk::config("top-k")
            .map(|k| k.trim().parse().map_err(|e| Error::invalid_input(format!("config key `top-k` = {k:?}: {e}"))))
            .transpose()?;
        let route = match jig_sdk::config("route").as_deref().map(str::trim) {
            Some("label") => Route::ByLabel,
            Some(port) if !port.is_empty() => Route::Port(port.to_string()),
            _ => Route::Port("selected".to_string()),
        };
        Ok(Rules { labels, min_score, top_k, route })
    }

    /// The detections to keep, highest score first (ties keep input order), each with its port.
    pub fn apply(&self, detections: Vec<Detection>) -> Vec<(String, Detection)> {
        let mut kept: Vec<Detection> = detections
            .into_iter()
            .filter(|d| d.score >= self.min_score)
            .filter(|d| self.labels.as_ref().is_none_or(|labels| labels.contains(&d.label)))
            .collect();
        kept.sort_by(|a, b| b.score.total_cmp(&a.score));
        kept.truncate(self.top_k.unwrap_or(usize::MAX));
        kept.into_iter()
            .map(|d| {
                let port = match &self.route {
                    Route::ByLabel => d.label.clone(),
                    Route::Port(p) => p.clone(),
                };
                (port, d)
            })
            .collect()
    }
}

pub struct Select;

impl Function for Select {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let rules = Rules::from_config()?;
        let Input { detections } = serde_json::from_slice(&payload).map_err(|e| {
            Error::invalid_input(format!("expected {{\"detections\": [{{\"label\", \"score\", ...}}]}}: {e}"))
        })?;
        let total = detections.len();
        let kept = rules.apply(detections);
        let mut selected = Vec::with_capacity(kept.len());
        for (port, detection) in kept {
            jig_sdk::emit(&port, &serde_json::to_vec(&detection)?);
            let mut entry = serde_json::to_value(&detection)?;
            entry["port"] = Value::String(port);
            selected.push(entry);
        }
        let dropped = total - selected.len();
        Ok(serde_json::to_vec(&serde_json::json!({ "selected": selected, "dropped": dropped }))?)
    }
}

jig_sdk::export!(Select);

#[cfg(test)]
mod tests {
    use super::*;

    fn det(label: &str, score: f64) -> Detection {
        Detection { label: label.into(), score, rest: Map::new() }
    }

    #[test]
    fn filters_sorts_truncates_and_routes() {
        let rules = Rules {
            labels: Some(vec!["cat".into(), "dog".into()]),
            min_score: 0.3,
            top_k: Some(2),
            route: Route::ByLabel,
        };
        let out =
            rules.apply(vec![det("cat", 0.4), det("dog", 0.9), det("car", 0.99), det("cat", 0.2), det("dog", 0.5)]);
        let got: Vec<_> = out.iter().map(|(p, d)| (p.as_str(), d.score)).collect();
        assert_eq!(got, vec![("dog", 0.9), ("dog", 0.5)]);
    }
}
