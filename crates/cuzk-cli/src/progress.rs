//! Progress of long work (key generation, timing keys, key loads, bench repetitions, checks) through
//! `indicatif`: drawn on standard error when it is a terminal, silent with `--json` or when the output
//! goes to a file or a pipe.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar or spinner; it clears itself when dropped.
pub(crate) struct Progress {
    bar: ProgressBar,
}

fn target(quiet: bool) -> ProgressDrawTarget {
    if quiet || !std::io::stderr().is_terminal() {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    }
}

impl Progress {
    /// A bar of `total` steps labelled `label`.
    pub(crate) fn bar(label: &str, total: usize, quiet: bool) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total as u64), target(quiet));
        let style =
            ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} {elapsed_precise} (eta {eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("#> ");
        bar.set_style(style);
        bar.set_prefix(label.to_owned());
        Self { bar }
    }

    /// A spinner for work of unknown length, labelled `label`, with the time it has taken.
    pub(crate) fn spinner(label: &str, quiet: bool) -> Self {
        let bar = ProgressBar::with_draw_target(None, target(quiet));
        let style = ProgressStyle::with_template("{spinner} {prefix} {elapsed_precise}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.set_prefix(label.to_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        Self { bar }
    }

    /// One step done (from any thread).
    pub(crate) fn tick(&self) {
        self.bar.inc(1);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
