//! `cuzk timeline`: a pipeline timeline (JSON lines as the scheduler writes them) summarised, and
//! optionally drawn as a Gantt chart or written as a Chrome trace.

use cuzk::sched::report::{parse_json_lines, TimelineReport};

use crate::flags::TimelineArgs;
use crate::output::CmdError;

/// Runs `cuzk timeline`.
pub(crate) fn run(a: &TimelineArgs) -> Result<(), CmdError> {
    let file = &a.file;
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let spans = parse_json_lines(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    if spans.is_empty() {
        return Err(format!("{}: no spans", file.display()).into());
    }
    let report = TimelineReport::from_spans(&spans);
    print!("{}", report.render());
    if let Some(out) = &a.svg {
        let title = format!(
            "{}: kernel utilisation {:.1}% over a {:.3} s kernel window",
            file.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            100.0 * report.kernel_utilization,
            report.window_s
        );
        let drawing = cuzk::sched::svg::gantt(&spans, &title)?;
        std::fs::write(out, drawing).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    if let Some(out) = &a.chrome {
        let t = cuzk::sched::Timeline::new();
        spans.into_iter().for_each(|s| t.push(s));
        std::fs::write(out, t.to_chrome_trace())
            .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    Ok(())
}
