//! Progress of long work on standard error: a bar (`indicatif`) when standard error is a terminal, the same
//! news as plain lines when it is not (a log file, CI, a script reading it), so those stay as they were.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `total` steps, drawn only on a terminal.
fn bar(total: u64, template: &str) -> Option<ProgressBar> {
    std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(total);
        bar.set_style(ProgressStyle::with_template(template).expect("a valid template").progress_chars("=> "));
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    })
}

/// Bytes of an upload sent: a bar of bytes, or a line every 16 MiB and at the end.
pub struct Transfer {
    bar: Option<ProgressBar>,
    prefix: &'static str,
    last_line: u64,
}

impl Transfer {
    /// Progress of sending `total` bytes, its lines starting `prefix: `.
    pub fn new(prefix: &'static str, total: u64) -> Transfer {
        let template = format!(
            "{prefix}: uploading [{{bar:30}}] {{binary_bytes}} of {{binary_total_bytes}} ({{binary_bytes_per_sec}})"
        );
        Transfer { bar: bar(total, &template), prefix, last_line: 0 }
    }

    /// `sent` of `total` bytes are out.
    pub fn update(&mut self, sent: u64, total: u64) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(sent);
                if sent == total {
                    bar.finish();
                }
            }
            None if sent == total || sent - self.last_line >= 16 << 20 => {
                self.last_line = sent;
                eprintln!(
                    "{}: uploaded {} of {}",
                    self.prefix,
                    crate::gateway::bytes(sent),
                    crate::gateway::bytes(total)
                );
            }
            None => {}
        }
    }
}

/// Steps of a known count, each reported by a line: on a terminal the lines scroll above a bar of the steps.
pub struct Steps {
    bar: Option<ProgressBar>,
}

impl Steps {
    /// Progress of `total` steps, the bar labelled `what`.
    pub fn new(what: &str, total: u64) -> Steps {
        Steps {
            bar: bar(total, &format!("{what} [{{bar:30}}] {{pos}}/{{len}} {{msg}} ({{elapsed}}, about {{eta}} left)")),
        }
    }

    /// Print a line (above the bar, on a terminal).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// What the current step is (shown beside the bar; nothing without one).
    pub fn set_message(&self, message: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(message);
        }
    }

    /// `n` steps done.
    pub fn advance(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }

    /// All done: the bar stays, full.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_with_message("done");
        }
    }
}
