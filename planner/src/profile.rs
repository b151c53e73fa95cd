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
//! or, where GPU rows measured the host CPU their worker processes spent, with a ninth column:
//!
//! ```text
//! slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device,cpu_ms
//! voice,piper,mps:0:14,1,178.6,183.3,6.8,NVIDIA H200,170.2
//! voice,piper,cpu:1,1,90.5,96.7,11.1,Intel Xeon (16 cores),
//! ```
//!
//! * `slot`, `variant`: the model slot and the variant filling it, as named in the bundle manifest;
//! * `segment`: where it ran (`cpu:N`, `mig:GPU:PROFILE:MPS`, `mps:GPU:PERCENT[xPROCESSES]`);
//! * `batch`: rows per batch; `p50_ms`, `p95_ms`: latency of one batch; `throughput_rps`: rows per second
//!   running batches back to back;
//! * `device`: the processor or GPU measured, so tables from different machines are not mixed up;
//! * `cpu_ms` (optional): the host CPU time one batch on a GPU segment costs its worker process, ms (kernel
//!   launches, copies, waits, and any of the model's operators ONNX Runtime runs on the CPU); empty on CPU
//!   segments, whose cores the segment names, and where not measured. The planner counts it on the cores.
//!
//! Fields are trimmed and blank lines skipped; a name with a comma is quoted (`"…"`), as CSV quotes it. Rows
//! may come in any order.

use serde::Deserialize;

use crate::error::ParseError;

/// One measured point.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProfileRow {
    /// The model slot, as named in the bundle manifest; a task's `slot` in the spec.
    pub slot: String,
    /// The variant filling the slot.
    pub variant: String,
    /// Where it ran: `cpu:N`, `mig:GPU:PROFILE:MPS` or `mps:GPU:PERCENT[xPROCESSES]`.
    pub segment: String,
    /// Rows per batch.
    pub batch: u32,
    /// Median latency of one batch, ms.
    pub p50_ms: f64,
    /// p95 latency of one batch, ms: L(t,v,s,b).
    pub p95_ms: f64,
    /// Rows per second running batches back to back (of all the segment's processes together): H(t,v,s,b).
    pub throughput_rps: f64,
    /// The processor or GPU measured.
    pub device: String,
    /// The host CPU time of one batch on a GPU segment, ms; `None` on CPU segments and where not measured.
    #[serde(default)]
    pub cpu_ms: Option<f64>,
}

impl ProfileRow {
    /// Whether it was measured on the segment type `segment`: a row of `mps:0:50` or `mps:1:50` is of `mps:50`, as
    /// the planner reads it ([`SegmentKind::parse`](crate::spec::SegmentKind::parse) drops the GPU).
    pub fn is_on(&self, segment: &str) -> bool {
        use crate::spec::SegmentKind;
        self.segment == segment
            || matches!((SegmentKind::parse(&self.segment), SegmentKind::parse(segment)), (Ok(a), Ok(b)) if a == b)
    }
}

/// The rows as a GPU packed with shares runs them. An `mps:` row of one process is measured alone, with all of
/// the GPU's memory bandwidth and L2 behind it; on a GPU packed with shares the others take their part of both
/// (four quarter shares of PP-OCR's detector run 15–28% slower together than one alone on an H200). Where the
/// table also measures processes of the same share size running together (`mps:0:57x4`: four of 14%), a share
/// alone is read as one of them: its latencies no shorter than theirs, its throughput no more than theirs over
/// their number, by batch, from the most processes measured together. Otherwise four instances on four 14%
/// shares of one GPU would be planned to serve more than the same four processes measured serving one instance.
/// Rows with no such measurement, and MIG instances (whose memory is their own), stay as measured.
pub fn as_packed(rows: &[ProfileRow]) -> Vec<ProfileRow> {
    use crate::spec::SegmentKind;
    // (slot, variant, per-process percent, batch) → the row measured with the most processes together.
    let mut together: std::collections::HashMap<(&str, &str, u8, u32), (u8, &ProfileRow)> = Default::default();
    for row in rows {
        let Ok(SegmentKind::Mps { percent, processes }) = SegmentKind::parse(&row.segment) else { continue };
        if processes < 2 || row.throughput_rps <= 0.0 {
            continue;
        }
        let each = (f64::from(percent) / f64::from(processes)).round() as u8;
        let key = (row.slot.as_str(), row.variant.as_str(), each, row.batch);
        if together.get(&key).is_none_or(|&(k, _)| k < processes) {
            together.insert(key, (processes, row));
        }
    }
    rows.iter()
        .map(|row| {
            let mut row = row.clone();
            let Ok(SegmentKind::Mps { percent, processes: 1 }) = SegmentKind::parse(&row.segment) else { return row };
            if let Some(&(k, with)) = together.get(&(row.slot.as_str(), row.variant.as_str(), percent, row.batch)) {
                row.p50_ms = row.p50_ms.max(with.p50_ms);
                row.p95_ms = row.p95_ms.max(with.p95_ms);
                row.throughput_rps = row.throughput_rps.min(with.throughput_rps / f64::from(k));
            }
            row
        })
        .collect()
}

/// The header line a profile table starts with; it names the columns in order.
pub const HEADER: &str = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device";

/// The optional last column, after [`HEADER`]'s: a GPU row's host CPU a batch.
pub const CPU_COLUMN: &str = "cpu_ms";

/// The CSV text of `rows` (names quoted where CSV needs it), with the `cpu_ms` column where a row has it.
pub fn to_csv(rows: &[ProfileRow]) -> String {
    let mut out = csv::Writer::from_writer(Vec::new());
    let written = "writing CSV to memory cannot fail";
    let with_cpu = rows.iter().any(|r| r.cpu_ms.is_some());
    let mut header: Vec<&str> = HEADER.split(',').collect();
    header.extend(with_cpu.then_some(CPU_COLUMN));
    out.write_record(&header).expect(written);
    for r in rows {
        let (p50, p95, rps) =
            (format!("{:.3}", r.p50_ms), format!("{:.3}", r.p95_ms), format!("{:.2}", r.throughput_rps));
        let batch = r.batch.to_string();
        let mut record = vec![&r.slot, &r.variant, &r.segment, &batch, &p50, &p95, &rps, &r.device];
        let cpu = r.cpu_ms.map(|ms| format!("{ms:.3}")).unwrap_or_default();
        record.extend(with_cpu.then_some(&cpu));
        out.write_record(record).expect(written);
    }
    String::from_utf8(out.into_inner().expect(written)).expect("CSV of strings is UTF-8")
}

/// Read the profile table at `path`, which measures `what` (`the models`, `the blocks`): errors name the file.
pub fn read(path: &std::path::Path, what: &str) -> Result<Vec<ProfileRow>, crate::PlanError> {
    let at = |e: String| crate::PlanError::Input(format!("{}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| at(format!("{e}; profile {what} with `jig profile`")))?;
    from_csv(&text).map_err(|e| at(e.to_string()))
}

/// Parse a profile table; errors name the line and what is wrong with it.
pub fn from_csv(text: &str) -> Result<Vec<ProfileRow>, ParseError> {
    let plain = csv::StringRecord::from(HEADER.split(',').collect::<Vec<_>>());
    let mut with_cpu = plain.clone();
    with_cpu.push_field(CPU_COLUMN);
    let mut records = Records::new(text, None);
    let header = match records.next().transpose().map_err(ParseError)? {
        Some((_, found)) if found == plain => plain,
        Some((_, found)) if found == with_cpu => with_cpu,
        Some((line, found)) => {
            return Err(ParseError(format!(
                "line {line}: expected the header `{HEADER}` (or with `,{CPU_COLUMN}` after it), found `{}`",
                joined(&found)
            )));
        }
        None => return Err(ParseError(format!("the profile table is empty: write the header `{HEADER}` first"))),
    };
    records
        .map(|record| {
            let (line, record) = record.map_err(ParseError)?;
            let at = |what: &str| ParseError(format!("line {line}: {what} in `{}`", joined(&record)));
            if record.len() != header.len() {
                return Err(at(&format!("expected {} comma-separated fields, found {}", header.len(), record.len())));
            }
            let row: ProfileRow = record.deserialize(Some(&header)).map_err(|e| at(&why(&e, &header, &record)))?;
            for (name, value) in [
                ("p50_ms", row.p50_ms),
                ("p95_ms", row.p95_ms),
                ("throughput_rps", row.throughput_rps),
                (CPU_COLUMN, row.cpu_ms.unwrap_or(0.0)),
            ] {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(at(&format!("`{name}` is not a non-negative number")));
                }
            }
            Ok(row)
        })
        .collect()
}

/// The records of a CSV table held in memory, each with the line it ends on: fields trimmed, rows of any length
/// (each table checks its own), blank lines and lines starting with the `comment` byte skipped. The errors are
/// the messages of the rare records csv cannot read at all.
pub(crate) struct Records<'a> {
    text: &'a str,
    reader: csv::Reader<&'a [u8]>,
}

impl<'a> Records<'a> {
    /// The records of `text`.
    pub(crate) fn new(text: &'a str, comment: Option<u8>) -> Self {
        let reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .comment(comment)
            .from_reader(text.as_bytes());
        Records { text, reader }
    }
}

impl Iterator for Records<'_> {
    type Item = Result<(u64, csv::StringRecord), String>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut record = csv::StringRecord::new();
        loop {
            match self.reader.read_record(&mut record) {
                Ok(false) => return None,
                Err(e) => return Some(Err(e.to_string())),
                // A line of blanks.
                Ok(true) if record.len() == 1 && record[0].is_empty() => continue,
                Ok(true) => {
                    // csv's own `Position::line` is the line after the previous record, before the blank and comment
                    // lines it skipped (BurntSushi/rust-csv#208); the offset where this record ends is exact.
                    let read = self.text.as_bytes().get(..self.reader.position().byte() as usize).unwrap_or_default();
                    let line = read.trim_ascii_end().iter().filter(|&&b| b == b'\n').count() as u64 + 1;
                    return Some(Ok((line, record)));
                }
            }
        }
    }
}

/// What is wrong with `row`, which csv could not deserialize, naming the column by `header`.
pub(crate) fn why(error: &csv::Error, header: &csv::StringRecord, row: &csv::StringRecord) -> String {
    let csv::ErrorKind::Deserialize { err, .. } = error.kind() else { return error.to_string() };
    match (err.kind(), err.field().and_then(|i| header.get(i as usize))) {
        (csv::DeserializeErrorKind::ParseInt(_), Some(column)) => format!("`{column}` is not a whole number"),
        (csv::DeserializeErrorKind::ParseFloat(_), Some(column)) => format!("`{column}` is not a number"),
        (csv::DeserializeErrorKind::UnexpectedEndOfRow, _) => {
            format!("the row ends before column `{}`", header.get(row.len()).unwrap_or_default())
        }
        (kind, Some(column)) => format!("`{column}`: {kind}"),
        (kind, None) => kind.to_string(),
    }
}

/// A record as its line reads (fields trimmed), for messages.
pub(crate) fn joined(record: &csv::StringRecord) -> String {
    record.iter().collect::<Vec<_>>().join(",")
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
            cpu_ms: None,
        }];
        assert_eq!(from_csv(&to_csv(&rows)).unwrap(), rows);
        assert!(to_csv(&rows).starts_with(&format!("{HEADER}\n")), "no host CPU measured: no column");
        let gpu = ProfileRow { segment: "mps:0:14".into(), cpu_ms: Some(170.25), ..rows[0].clone() };
        let both = vec![rows[0].clone(), gpu];
        assert!(to_csv(&both).starts_with(&format!("{HEADER},cpu_ms\n")), "{}", to_csv(&both));
        assert_eq!(from_csv(&to_csv(&both)).unwrap(), both, "an empty cpu_ms reads as none");
        let err = from_csv(&format!("{HEADER}\nrec,v,cpu:1,x,1,2,3,d\n")).unwrap_err().to_string();
        assert!(err.starts_with("line 2") && err.contains("batch"), "{err}");
        assert!(from_csv("a,b\n").unwrap_err().to_string().contains("header"));
        let with_comma = vec![ProfileRow { device: "Xeon, 2 cores".into(), ..rows[0].clone() }];
        assert_eq!(from_csv(&to_csv(&with_comma)).unwrap(), with_comma, "a name with a comma is quoted");
    }

    /// A share measured alone is read as one of the most processes of its size measured together, batch by
    /// batch; a share with no such measurement, a faster measurement together and a MIG instance stay as measured.
    #[test]
    fn a_share_alone_is_read_as_one_of_the_most_processes_its_size_measured_together() {
        let text = format!(
            "{HEADER}\n\
             det,v,mps:0:14,8,12.5,13.0,634,d\n\
             det,v,mps:0:28x2,8,13.4,14.5,1190,d\n\
             det,v,mps:0:57x4,8,14.4,16.6,2171,d\n\
             det,v,mps:0:14,1,4.0,4.1,251,d\n\
             det,v,mps:0:57x4,1,3.9,4.0,1100,d\n\
             det,v,mps:0:14,2,5.0,5.4,400,d\n\
             det,v,mps:0:50,8,8.0,8.5,1000,d\n\
             det,v,mig:0:1g.10gb:1,8,20,21,400,d\n\
             det,v,mig:0:2g.20gb:2,8,25,26,640,d\n"
        );
        let rows = from_csv(&text).unwrap();
        let packed = as_packed(&rows);
        let at = |segment: &str, batch: u32| {
            let r = packed.iter().find(|r| r.segment == segment && r.batch == batch).unwrap();
            (r.p50_ms, r.p95_ms, r.throughput_rps)
        };
        assert_eq!(at("mps:0:14", 8), (14.4, 16.6, 2171.0 / 4.0), "as the four together, not the two");
        assert_eq!(at("mps:0:14", 1), (4.0, 4.1, 251.0), "four together ran faster: no faster than alone");
        assert_eq!(at("mps:0:14", 2), (5.0, 5.4, 400.0), "no batch of 2 measured together");
        assert_eq!(at("mps:0:50", 8), (8.0, 8.5, 1000.0), "no 50% shares measured together");
        assert_eq!(at("mig:0:1g.10gb:1", 8), (20.0, 21.0, 400.0), "a MIG instance's memory is its own");
        assert_eq!(at("mps:0:57x4", 8), (14.4, 16.6, 2171.0), "rows measured together stay");
        assert_eq!(packed.len(), rows.len());
    }

    /// Blank lines (and lines of blanks) are skipped, fields trimmed, CRLF read; a malformed row is named by its
    /// line in the file, blank lines counted.
    #[test]
    fn a_malformed_row_is_named_by_its_line() {
        let good = "rec, v , cpu:1, 1, 1.5, 2, 3, d";
        let text = format!("\n{HEADER}\r\n{good}\r\n\n   \n{good}\n");
        assert_eq!(from_csv(&text).unwrap().len(), 2);
        assert_eq!(from_csv(&text).unwrap()[0].variant, "v");
        let bad = |row: &str| from_csv(&format!("{text}\n{row}\n")).unwrap_err().to_string();
        let err = bad("rec,v,cpu:1,1,1.5,-2,3,d");
        assert!(err.starts_with("line 8: `p95_ms` is not a non-negative number"), "{err}");
        assert!(bad("rec,v,cpu:1,1,1.5,fast,3,d").starts_with("line 8: `p95_ms` is not a number"));
        assert!(bad("rec,v,cpu:1,1,1.5").starts_with("line 8: expected 8 comma-separated fields, found 5"));
        let with_cpu = format!("{HEADER},cpu_ms\nrec,v,mps:0:14,1,1.5,2,3,d,-4\n");
        let err = from_csv(&with_cpu).unwrap_err().to_string();
        assert!(err.starts_with("line 2: `cpu_ms` is not a non-negative number"), "{err}");
        let err = from_csv("\n\nslot,variant\n").unwrap_err().to_string();
        assert!(err.starts_with("line 3: expected the header"), "{err}");
        assert!(from_csv(" \n").unwrap_err().to_string().contains("empty"));
    }
}
