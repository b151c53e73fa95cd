//! Demand traces: a request rate per bin of time (5 minutes by default, the controller's window), for
//! replaying load (`jig bench --trace`) and simulation (`jig simulate`); and a measured run's arrival times
//! ([`arrivals_from_csv`]), for simulating the very requests it sent.
//!
//! **File format**: CSV with the header `start_s,rps` and one row per bin, in order, equally spaced:
//! the bin's start in seconds from the trace's start and its mean request rate.
//!
//! **Generator** ([`Trace::diurnal`]): no public trace ships in a package here, so a day is generated with a
//! generic diurnal shape: a night trough around 04:00, a rise through the morning with a lunch bump, the peak
//! in the evening around 20:00, and ±4% of deterministic noise; scaled so the busiest bin is the given peak
//! (an application's largest serviceable demand, from `jig plan --max-demand`). It is not the paper's Twitter
//! trace: the paper calls 15:00–20:00 (its timestamps 180–240) its low-demand window.

use std::f64::consts::TAU;

use jig_planner::ParseError;
use jig_policy::rng::XorShift64;

/// A request rate per bin.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Length of a bin, seconds.
    pub bin_s: f64,
    /// Mean request rate of each bin, req/s.
    pub rates: Vec<f64>,
}

impl Trace {
    /// A day (86 400 s) of `bins` bins whose busiest bin has `peak` req/s; `seed` picks the noise.
    pub fn diurnal(peak: f64, bins: usize, seed: u64) -> Trace {
        let bins = bins.max(1);
        let mut rng = XorShift64::new(seed);
        let mut noise = || rng.signed_unit();
        let shape: Vec<f64> = (0..bins)
            .map(|i| {
                let hour = 24.0 * (i as f64 + 0.5) / bins as f64;
                // Daily wave: lowest at 04:00, highest at 16:00 …
                let day = 0.5 - 0.5 * (TAU * (hour - 4.0) / 24.0).cos();
                // … pushed later into the evening, with a lunch bump.
                let evening = (-((hour - 20.0) / 3.0).powi(2)).exp();
                let lunch = 0.25 * (-((hour - 12.5) / 1.2).powi(2)).exp();
                (0.25 + 0.55 * day + 0.35 * evening + lunch) * (1.0 + 0.04 * noise())
            })
            .collect();
        let max = shape.iter().copied().fold(f64::MIN_POSITIVE, f64::max);
        Trace { bin_s: 86_400.0 / bins as f64, rates: shape.into_iter().map(|s| s / max * peak).collect() }
    }

    /// The trace as CSV (see the module docs).
    pub fn to_csv(&self) -> String {
        let mut out = String::from("start_s,rps\n");
        for (i, r) in self.rates.iter().enumerate() {
            out.push_str(&format!("{},{r:.3}\n", i as f64 * self.bin_s));
        }
        out
    }

    /// Read a trace written as CSV; errors name the line.
    pub fn from_csv(text: &str) -> Result<Trace, ParseError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let mut records = reader.records();
        let line = |record: &csv::StringRecord| record.position().map_or(0, |p| p.line());
        match records.next() {
            Some(Ok(header)) if header.iter().eq(["start_s", "rps"]) => {}
            Some(Ok(header)) => {
                let got = header.iter().collect::<Vec<_>>().join(",");
                return Err(ParseError(format!(
                    "line {}: expected the header `start_s,rps`, got {got:?}",
                    line(&header)
                )));
            }
            Some(Err(e)) => return Err(ParseError(format!("not CSV: {e}"))),
            None => {
                return Err(ParseError(
                    "the trace is empty; expected the header `start_s,rps` and one row per bin".into(),
                ));
            }
        }
        let mut starts = Vec::new();
        let mut rates = Vec::new();
        for record in records {
            let record = record.map_err(|e| ParseError(format!("not CSV: {e}")))?;
            let row = record.iter().collect::<Vec<_>>().join(",");
            let bad = |what: &str| ParseError(format!("line {}: {what} in {row:?}", line(&record)));
            let (2, Some(start), Some(rate)) = (record.len(), record.get(0), record.get(1)) else {
                return Err(bad("expected `start_s,rps`"));
            };
            let start: f64 = start.parse().map_err(|_| bad("`start_s` is not a number"))?;
            let rate: f64 = rate.parse().map_err(|_| bad("`rps` is not a number"))?;
            if !(rate.is_finite() && rate >= 0.0) {
                return Err(bad("`rps` must be a non-negative rate"));
            }
            if let Some(&last) = starts.last()
                && start <= last
            {
                return Err(bad("bins must be in increasing order of `start_s`"));
            }
            starts.push(start);
            rates.push(rate);
        }
        let bin_s = match starts.as_slice() {
            [] => return Err(ParseError("the trace has no bins".into())),
            [_] => 300.0,
            [a, b, ..] => b - a,
        };
        for (i, pair) in starts.windows(2).enumerate() {
            if ((pair[1] - pair[0]) - bin_s).abs() > 1e-6 * bin_s.max(1.0) {
                return Err(ParseError(format!(
                    "bin {} starts at {} s: bins must be equally spaced ({bin_s} s)",
                    i + 2,
                    pair[1]
                )));
            }
        }
        Ok(Trace { bin_s, rates })
    }

    /// The busiest bin's rate.
    pub fn peak(&self) -> f64 {
        self.rates.iter().copied().fold(0.0, f64::max)
    }
}

/// Arrival times to replay (`jig simulate --arrivals`), in order: the `sent_s` column (seconds from the run's
/// start) of a CSV such as `jig bench --csv` writes; other columns are ignored. Errors name the line.
pub fn arrivals_from_csv(text: &str) -> Result<Vec<f64>, ParseError> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).trim(csv::Trim::All).from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| ParseError(format!("not CSV: {e}")))?.clone();
    let column = headers.iter().position(|h| h == "sent_s").ok_or_else(|| {
        ParseError(format!(
            "line 1: expected a `sent_s` column (as `jig bench --csv` writes), got {:?}",
            headers.iter().collect::<Vec<_>>().join(",")
        ))
    })?;
    let mut times = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| ParseError(format!("not CSV: {e}")))?;
        let line = record.position().map_or(0, |p| p.line());
        let sent = record.get(column).unwrap_or_default();
        match sent.parse::<f64>() {
            Ok(t) if t.is_finite() && t >= 0.0 => times.push(t),
            _ => return Err(ParseError(format!("line {line}: `sent_s` {sent:?} is not a time in seconds"))),
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_day_peaks_in_the_evening_and_bottoms_out_at_night() {
        let day = Trace::diurnal(100.0, 288, 1);
        assert_eq!((day.rates.len(), day.bin_s), (288, 300.0));
        assert!((day.peak() - 100.0).abs() < 1e-9);
        let busiest = day.rates.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
        let quietest = day.rates.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
        let hour = |bin: usize| bin as f64 / 12.0;
        assert!((17.0..22.0).contains(&hour(busiest)), "peak at {}h", hour(busiest));
        assert!((2.0..6.0).contains(&hour(quietest)), "trough at {}h", hour(quietest));
        assert!(day.rates[quietest] < 0.4 * day.peak());
        assert_eq!(day, Trace::diurnal(100.0, 288, 1), "deterministic");
    }

    #[test]
    fn csv_round_trips_and_bad_rows_name_their_line() {
        let day = Trace::diurnal(10.0, 24, 3);
        let back = Trace::from_csv(&day.to_csv()).unwrap();
        assert_eq!(back.bin_s, day.bin_s);
        assert!(back.rates.iter().zip(&day.rates).all(|(a, b)| (a - b).abs() < 1e-3));
        for (text, message) in [
            ("", "empty"),
            ("time,rate\n", "line 1: expected the header"),
            ("start_s,rps\n0,1\n300,x\n", "line 3: `rps` is not a number"),
            ("start_s,rps\n0,1\n300,-2\n", "line 3: `rps` must be a non-negative"),
            ("start_s,rps\n0,1\n0,2\n", "line 3: bins must be in increasing order"),
            ("start_s,rps\n0,1\n300,2\n900,2\n", "equally spaced"),
        ] {
            let error = Trace::from_csv(text).unwrap_err();
            assert!(error.to_string().contains(message), "{text:?}: {error}");
        }
    }

    #[test]
    fn arrivals_are_read_from_a_bench_record_in_order_and_bad_rows_name_their_line() {
        let record = "sent_s,latency_ms,status\n0.250000,12.0,200\n0.100000,9.5,200\n1.5,30,504\n";
        assert_eq!(arrivals_from_csv(record).unwrap(), vec![0.1, 0.25, 1.5]);
        for (text, message) in [
            ("start_s,rps\n0,1\n", "expected a `sent_s` column"),
            ("sent_s,status\n0.1,200\nsoon,200\n", "line 3: `sent_s` \"soon\""),
            ("sent_s\n-1\n", "line 2"),
        ] {
            let error = arrivals_from_csv(text).unwrap_err();
            assert!(error.to_string().contains(message), "{text:?}: {error}");
        }
    }
}
