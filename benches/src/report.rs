//! The report: a readable table (plain or Markdown) and the JSON file.

use crate::measure::{Api, Row, Steady};
use serde::Serialize;
use std::fmt::Write as _;

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `sim`, `rocr` or `cuda`.
    pub backend: &'static str,
    /// Why this backend: which others were tried and why they were not used.
    pub backend_reason: String,
    /// The machine, in words.
    pub machine: String,
    /// Samples per cell.
    pub iterations: usize,
    /// Samples per cell of the `*_long` rows.
    pub long_iterations: usize,
    /// How long the kernel before the `*_long` rows' event runs,
    /// microseconds.
    pub long_work_us: f64,
    /// Why the `*_long` rows are missing (the backend has no kernel of that
    /// length), or `None` (JSON `null`) when they were measured.
    pub long_rows_skipped: Option<String>,
    /// The CPU time the usage readings themselves put inside a timed
    /// window, microseconds (`measure::cpu_floor`, calibrated after every
    /// cell and taken off that cell's `cpu_us_per_op`): the median over
    /// the cells.
    pub cpu_floor_us: f64,
    /// Every cell.
    pub rows: Vec<Row>,
    /// The steady-state counters per tracker.
    pub steady_state: SteadyState,
}

/// Steady-state counters of both trackers.
#[derive(Clone, Debug, Serialize)]
pub struct SteadyState {
    /// The retiring tracker.
    pub retiring: Steady,
    /// The baseline tracker.
    pub baseline: Steady,
}

impl Report {
    fn find(&self, api: Api, tracker: &str, signals: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.api == api && r.tracker == tracker && r.signals == signals)
    }

    /// The p50 of `row` over the p50 of the row it is compared with: the
    /// baseline on the same signals, or for native rows' neighbours, native.
    fn ratio(&self, row: &Row) -> Option<(f64, &'static str)> {
        match row.tracker {
            "retiring" => {
                if let Some(native) = self.find(row.api, "native", "native") {
                    return Some((row.p50_us / native.p50_us, "x native"));
                }
                let base = self.find(row.api, "baseline", row.signals)?;
                Some((row.p50_us / base.p50_us, "x baseline"))
            }
            _ => None,
        }
    }

    /// The table as plain text (or Markdown).
    pub fn table(&self, markdown: bool) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "sigbench on {} ({})", self.backend, self.machine);
        let _ = writeln!(out, "backend choice: {}", self.backend_reason);
        let _ = writeln!(
            out,
            "host time per call in us over {} calls; traffic per call from the tracker's counters",
            self.iterations
        );
        let _ = writeln!(
            out,
            "*_long rows: a {:.0} us kernel before the event, {} calls{}",
            self.long_work_us,
            self.long_iterations,
            self.long_rows_skipped
                .as_ref()
                .map_or(String::new(), |why| format!(" (not measured: {why})"))
        );
        for line in [
            format!(
                "cpu us/op: mean CPU time of the calling (waiting) thread per call \
                 (CLOCK_THREAD_CPUTIME_ID), less the readings' own (median {:.2} us)",
                self.cpu_floor_us
            ),
            "vcsw/op: its voluntary context switches per call (getrusage RUSAGE_THREAD \
             ru_nvcsw; a yield is not one)"
                .to_string(),
            "slept: yes when the median call had at least one voluntary context switch".to_string(),
            "polls/op: the wait's loads of the completion signal per call (tracker counters; \
             - where nothing counts them)"
                .to_string(),
        ] {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out);
        let head = [
            "api",
            "tracker",
            "signals",
            "p50",
            "p10",
            "p90",
            "ratio",
            "cpu us/op",
            "slept",
            "vcsw/op",
            "polls/op",
            "dev loads/op",
            "fences/op",
            "flushes/op",
            "created",
        ];
        let mut lines = Vec::new();
        for api in Api::reported() {
            for row in self.rows.iter().filter(|r| r.api == api) {
                let ratio = self
                    .ratio(row)
                    .map_or(String::new(), |(r, what)| format!("{r:.2} {what}"));
                let cells = [
                    api.name().to_string(),
                    row.tracker.to_string(),
                    row.signals.to_string(),
                    format!("{:.2}", row.p50_us),
                    format!("{:.2}", row.p10_us),
                    format!("{:.2}", row.p90_us),
                    ratio,
                    format!("{:.2}", row.cpu_us_per_op),
                    if row.slept { "yes" } else { "no" }.to_string(),
                    format!("{:.2}", row.voluntary_switches_per_op),
                    row.polls_per_op
                        .map_or("-".to_string(), |p| format!("{p:.2}")),
                    format!("{:.3}", row.device_loads_per_op),
                    format!("{:.3}", row.fences_per_op),
                    format!("{:.3}", row.flushes_per_op),
                    row.signals_created.to_string(),
                ];
                lines.push(cells);
            }
        }
        render_table(&mut out, &head, &lines, 3, markdown);
        // A synchronize alone favours whichever side took longer to submit
        // (the GPU had a head start): show the submission plus the call too.
        let _ = writeln!(
            out,
            "\nsubmission plus the call (p50 us; the empty work, the event record and the wait):"
        );
        for api in Api::reported().filter(|a| a.waits_for_submission()) {
            if self.rows.iter().all(|r| r.api != api) {
                continue;
            }
            let cells: Vec<String> = self
                .rows
                .iter()
                .filter(|r| r.api == api)
                .map(|r| {
                    format!(
                        "{}/{} {:.2}",
                        r.tracker, r.signals, r.with_submission_p50_us
                    )
                })
                .collect();
            let ratio = match (
                self.find(api, "retiring", "host"),
                self.find(api, "native", "native"),
            ) {
                (Some(ours), Some(native)) => format!(
                    " (retiring/host {:.2} x native)",
                    ours.with_submission_p50_us / native.with_submission_p50_us
                ),
                _ => String::new(),
            };
            let _ = writeln!(out, "  {:<31} {}{ratio}", api.name(), cells.join(", "));
        }
        let _ = writeln!(
            out,
            "\nsteady state ({} uses after warm-up, {} signals):",
            self.steady_state.retiring.uses, self.steady_state.retiring.signals
        );
        for (name, s) in [
            ("retiring", &self.steady_state.retiring),
            ("baseline", &self.steady_state.baseline),
        ] {
            let _ = writeln!(
                out,
                "  {name:<9} {} loads per retired use {:.4} (saturated, no synchronize: {:.4}; waits' polls per use {:.3}) | flushes per re-arm {:.4} | fences per re-arm {:.4} | signals created after warm-up {} | heap allocations per use {:.4}",
                s.signals,
                s.device_loads_per_retired_use,
                s.saturated_device_loads_per_retired_use,
                s.device_polls_per_use,
                s.flushes_per_rearm,
                s.fences_per_rearm,
                s.signals_created_after_warmup,
                s.allocations_per_use
            );
        }
        let r = &self.steady_state.retiring;
        let bars = [
            (
                "device loads per retired use <= 1/32",
                r.device_loads_per_retired_use <= 1.0 / 32.0,
            ),
            (
                "flushes per re-armed signal <= 1/32",
                r.flushes_per_rearm <= 1.0 / 32.0,
            ),
            (
                "signals created after warm-up = 0",
                r.signals_created_after_warmup == 0,
            ),
            ("heap allocations per use = 0", r.allocations_per_use == 0.0),
        ];
        let _ = writeln!(out, "bars (docs/design.md section 7), retiring tracker:");
        for (bar, ok) in bars {
            let _ = writeln!(out, "  {} {bar}", if ok { "ok  " } else { "FAIL" });
        }
        out
    }
}

/// A table of `lines` under `header`: Markdown (the first `left` columns
/// left-aligned, the figures right-aligned), or padded columns for the
/// terminal, each as wide as its widest cell, aligned the same way.
pub(crate) fn render_table<L: AsRef<[String]>>(
    out: &mut String,
    header: &[&str],
    lines: &[L],
    left: usize,
    markdown: bool,
) {
    if markdown {
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let align: Vec<&str> = (0..header.len())
            .map(|i| if i < left { "---" } else { "---:" })
            .collect();
        let _ = writeln!(out, "|{}|", align.join("|"));
        for line in lines {
            let _ = writeln!(out, "| {} |", line.as_ref().join(" | "));
        }
        return;
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for line in lines {
        for (w, cell) in widths.iter_mut().zip(line.as_ref()) {
            *w = (*w).max(cell.len());
        }
    }
    let print = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let padded: Vec<String> = cells
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i < left {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", padded.join("  "));
    };
    print(out, &mut header.iter().copied());
    for line in lines {
        print(out, &mut line.as_ref().iter().map(String::as_str));
    }
}

#[cfg(test)]
mod tests {
    use super::render_table;

    fn lines() -> Vec<[String; 3]> {
        vec![
            ["ours".into(), "12.5".into(), "1.00".into()],
            ["cuda default".into(), "3".into(), "0.24".into()],
        ]
    }

    #[test]
    fn a_terminal_table_pads_names_left_and_figures_right() {
        let mut out = String::new();
        render_table(&mut out, &["who", "us", "x"], &lines(), 1, false);
        assert_eq!(
            out,
            "who             us     x\nours          12.5  1.00\ncuda default     3  0.24\n"
        );
    }

    #[test]
    fn a_markdown_table_aligns_its_figures_right() {
        let mut out = String::new();
        render_table(&mut out, &["who", "us", "x"], &lines(), 1, true);
        assert_eq!(
            out,
            "| who | us | x |\n|---|---:|---:|\n| ours | 12.5 | 1.00 |\n| cuda default | 3 | 0.24 |\n"
        );
    }
}
