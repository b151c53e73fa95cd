//! The two exposition formats a scraper may ask for: OpenMetrics 1.0 (what `prometheus_client` writes, and what
//! Prometheus asks for first) and the Prometheus text format 0.0.4 (what a client that does not ask for
//! OpenMetrics gets, as every Prometheus client library answers it).

/// OpenMetrics' content type.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The Prometheus text format's content type.
pub const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether a request's `Accept` header asks for OpenMetrics.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|accept| {
        accept.split(',').any(|range| {
            let mut params = range.split(';').map(str::trim);
            params.next().is_some_and(|media| media.eq_ignore_ascii_case("application/openmetrics-text"))
                && !params.any(|p| p.replace(' ', "") == "q=0")
        })
    })
}

/// OpenMetrics text as the Prometheus text format 0.0.4: a counter's family is named by its `_total` samples,
/// `info` is a gauge of its `_info` samples and `unknown` is `untyped`; units, exemplars and `# EOF` go.
pub fn to_text_format(openmetrics: &str) -> String {
    let lines: Vec<&str> = openmetrics.lines().collect();
    // Each family's type, by the name its `# TYPE` line gives it, for the `# HELP` line before it.
    let types: std::collections::HashMap<&str, &str> =
        lines.iter().filter_map(|line| line.strip_prefix("# TYPE ")?.split_once(' ')).collect();
    let renamed = |name: &str| -> (String, &'static str) {
        match types.get(name).copied() {
            Some("counter") => (format!("{name}_total"), "counter"),
            Some("info") => (format!("{name}_info"), "gauge"),
            Some("gauge") => (name.to_string(), "gauge"),
            Some("histogram") => (name.to_string(), "histogram"),
            Some("summary") => (name.to_string(), "summary"),
            _ => (name.to_string(), "untyped"),
        }
    };
    let mut out = String::with_capacity(openmetrics.len());
    for line in lines {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.push_str(&format!("# HELP {} {help}\n", renamed(name).0));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split_once(' ').map_or(rest, |(name, _)| name);
            let (name, kind) = renamed(name);
            out.push_str(&format!("# TYPE {name} {kind}\n"));
        } else if line.starts_with('#') {
            // `# UNIT` and `# EOF` have no place in the text format.
        } else {
            // A sample, without its exemplar (` # {…} value`).
            out.push_str(line.split_once(" # ").map_or(line, |(sample, _)| sample));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_is_asked_for_by_its_media_type() {
        let prometheus = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(wants_openmetrics(Some(prometheus)));
        assert!(!wants_openmetrics(Some("text/plain;version=0.0.4")));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(!wants_openmetrics(Some("application/openmetrics-text; q=0, text/plain")));
        assert!(!wants_openmetrics(None));
    }

    #[test]
    fn the_text_format_names_counters_by_their_samples_and_ends_without_eof() {
        let openmetrics = "# HELP jig_requests Invocations answered.\n# TYPE jig_requests counter\n\
            jig_requests_total{app=\"shop\",code=\"200\"} 3 # {trace=\"a\"} 1\n\
            # HELP jig_up Whether.\n# TYPE jig_up unknown\njig_up 1\n\
            # HELP process_cpu_seconds CPU time.\n# TYPE process_cpu_seconds counter\n# UNIT process_cpu_seconds seconds\n\
            process_cpu_seconds_total 1.5\n# EOF\n";
        assert_eq!(
            to_text_format(openmetrics),
            "# HELP jig_requests_total Invocations answered.\n# TYPE jig_requests_total counter\n\
             jig_requests_total{app=\"shop\",code=\"200\"} 3\n\
             # HELP jig_up Whether.\n# TYPE jig_up untyped\njig_up 1\n\
             # HELP process_cpu_seconds_total CPU time.\n# TYPE process_cpu_seconds_total counter\n\
             process_cpu_seconds_total 1.5\n"
        );
    }
}
