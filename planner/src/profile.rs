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
//! * `segment`: where it ran (`cpu:N`, `mig:GPU:PROFILE:MPS`, `mps:GPU:PERCENT[xPROCESSES]`);
//! * `batch`: rows per batch; `p50_ms`, `p95_ms`: latency of one batch; `throughput_rps`: rows per second
//!   running batches back to back;
//! * `device`: the processor or GPU measured, so tables from different machines are not mixed up.
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

/// The header line a profile table starts with; it names the columns in order.
pub const HEADER: &str = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device";

/// The CSV text of `rows` (names quoted where CSV needs it).
pub fn to_csv(rows: &[ProfileRow]) -> String {
    let mut out = csv::Writer::from_writer(Vec::new());
    let written = "writing CSV to memory cannot fail";
    out.write_record(HEADER.split(',')).expect(written);
    for r in rows {
        let (p50, p95, rps) =
            (format!("{:.3}", r.p50_ms), format!("{:.3}", r.p95_ms), format!("{:.2}", r.throughput_rps));
        let batch = r.batch.to_string();
        out.write_record([&r.slot, &r.variant, &r.segment, &batch, &p50, &p95, &rps, &r.device]).expect(written);
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
    let header = csv::StringRecord::from(HEADER.split(',').collect::<Vec<_>>());
    let mut records = Records::new(text, None);
    match records.next().transpose().map_err(ParseError)? {
        Some((_, found)) if found == header => {}
        Some((line, found)) => {
            return Err(ParseError(format!("line {line}: expected the header `{HEADER}`, found `{}`", joined(&found))));
        }
        None => return Err(ParseError(format!("the profile table is empty: write the header `{HEADER}` first"))),
    }
    records
        .map(|record| {
            let (line, record) = record.map_err(ParseError)?;
            let at = |what: &str| ParseError(format!("line {line}: {what} in `{}`", joined(&record)));
            if record.len() != header.len() {
                return Err(at(&format!("expected {} comma-separated fields, found {}", header.len(), record.len())));
            }
            let row: ProfileRow = record.deserialize(Some(&header)).map_err(|e| at(&why(&e, &header, &record)))?;
            for (name, value) in
                [("p50_ms", row.p50_ms), ("p95_ms", row.p95_ms), ("throughput_rps", row.throughput_rps)]
            {
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
        }];
        assert_eq!(from_csv(&to_csv(&rows)).unwrap(), rows);
        let err = from_csv(&format!("{HEADER}\nrec,v,cpu:1,x,1,2,3,d\n")).unwrap_err().to_string();
        assert!(err.starts_with("line 2") && err.contains("batch"), "{err}");
        assert!(from_csv("a,b\n").unwrap_err().to_string().contains("header"));
        let with_comma = vec![ProfileRow { device: "Xeon, 2 cores".into(), ..rows[0].clone() }];
        assert_eq!(from_csv(&to_csv(&with_comma)).unwrap(), with_comma, "a name with a comma is quoted");
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
        let err = from_csv("\n\nslot,variant\n").unwrap_err().to_string();
        assert!(err.starts_with("line 3: expected the header"), "{err}");
        assert!(from_csv(" \n").unwrap_err().to_string().contains("empty"));
    }
}
