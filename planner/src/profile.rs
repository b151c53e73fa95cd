//! Profile tables: measured p95 latency and throughput per model variant × segment × batch size, as
//! `jig profile` writes them and the planner reads them.
//!
//! The file is CSV with a header line; each row is one measurement:
//!
//! ```text
//! slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device
//! rec,ppocr-v4,cpu:2,8,41.2,43.9,182.2,AMD EPYC 7B13 (2 cores)
//! ```
//!
//! * `slot`, `variant`: the model slot and the variant filling it, as named in the bundle manifest;
//! * `segment`: where it ran (`cpu:N`, `mig:GPU:PROFILE:MPS`, `mps:GPU:PERCENT`);
//! * `batch`: rows per batch; `p50_ms`, `p95_ms`: latency of one batch; `throughput_rps`: rows per second
//!   running batches back to back;
//! * `device`: the processor or GPU measured, so tables from different machines are not mixed up.
//!
//! Names must not contain commas; rows may come in any order.

use std::fmt::Write as _;

use crate::error::ParseError;

/// One measured point.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileRow {
    /// The model slot, as named in the bundle manifest; a task's `slot` in the spec.
    pub slot: String,
    /// The variant filling the slot.
    pub variant: String,
    /// Where it ran: `cpu:N`, `mig:GPU:PROFILE:MPS` or `mps:GPU:PERCENT`.
    pub segment: String,
    /// Rows per batch.
    pub batch: u32,
    /// Median latency of one batch, ms.
    pub p50_ms: f64,
    /// p95 latency of one batch, ms: L(t,v,s,b).
    pub p95_ms: f64,
    /// Rows per second running batches back to back (on MIG, of all MPS processes together): H(t,v,s,b).
    pub throughput_rps: f64,
    /// The processor or GPU measured.
    pub device: String,
}

/// The header line a profile table starts with; it names the columns in order.
pub const HEADER: &str = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device";

/// The CSV text of `rows`.
pub fn to_csv(rows: &[ProfileRow]) -> String {
    let mut out = format!("{HEADER}\n");
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{:.3},{:.3},{:.2},{}",
            r.slot, r.variant, r.segment, r.batch, r.p50_ms, r.p95_ms, r.throughput_rps, r.device
        );
    }
    out
}

/// Read the profile table at `path`, which measures `what` (`the models`, `the blocks`): errors name the file.
pub fn read(path: &std::path::Path, what: &str) -> Result<Vec<ProfileRow>, crate::PlanError> {
    let at = |e: String| crate::PlanError::Input(format!("{}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| at(format!("{e}; profile {what} with `jig profile`")))?;
    from_csv(&text).map_err(|e| at(e.to_string()))
}

/// Parse a profile table; errors name the line and what is wrong with it.
pub fn from_csv(text: &str) -> Result<Vec<ProfileRow>, ParseError> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, header)) if header.trim() == HEADER => {}
        Some((_, header)) => {
            return Err(ParseError(format!("line 1: expected the header `{HEADER}`, found `{header}`")));
        }
        None => return Err(ParseError("the profile table is empty".into())),
    }
    lines
        .map(|(i, line)| {
            let at = |what: &str| ParseError(format!("line {}: {what} in `{line}`", i + 1));
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            let [slot, variant, segment, batch, p50, p95, rps, device] = f.as_slice() else {
                return Err(at("expected 8 comma-separated fields"));
            };
            let number = |v: &str, name: &str| -> Result<f64, ParseError> {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| at(&format!("`{name}` is not a non-negative number")))
            };
            Ok(ProfileRow {
                slot: slot.to_string(),
                variant: variant.to_string(),
                segment: segment.to_string(),
                batch: batch.parse().map_err(|_| at("`batch` is not a whole number"))?,
                p50_ms: number(p50, "p50_ms")?,
                p95_ms: number(p95, "p95_ms")?,
                throughput_rps: number(rps, "throughput_rps")?,
                device: device.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reports_bad_lines() {
        let rows = vec![ProfileRow {
            slot: "rec".into(),
            variant: "ppocr-v4".into(),
            segment: "cpu:2".into(),
            batch: 8,
            p50_ms: 41.25,
            p95_ms: 43.5,
            throughput_rps: 182.25,
            device: "EPYC".into(),
        }];
        assert_eq!(from_csv(&to_csv(&rows)).unwrap(), rows);
        let err = from_csv(&format!("{HEADER}\nrec,v,cpu:1,x,1,2,3,d\n")).unwrap_err().to_string();
        assert!(err.starts_with("line 2") && err.contains("batch"), "{err}");
        assert!(from_csv("a,b\n").unwrap_err().to_string().contains("header"));
    }
}
