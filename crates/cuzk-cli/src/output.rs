//! What every command shares in its output: JSON or text, errors with their causes.

use serde::Serialize;

/// A command's error, with its causes kept for the report.
pub(crate) type CmdError = Box<dyn std::error::Error>;

/// Prints `out` as pretty JSON, or through `text`.
pub(crate) fn print<T: Serialize>(json: bool, out: &T, text: impl FnOnce(&T)) -> Result<(), CmdError> {
    if json {
        println!("{}", serde_json::to_string_pretty(out)?);
    } else {
        text(out);
    }
    Ok(())
}

/// Writes `e` and its chain of causes to standard error.
pub(crate) fn report_error(e: &dyn std::error::Error) {
    eprintln!("error: {e}");
    let mut source = e.source();
    while let Some(s) = source {
        eprintln!("  caused by: {s}");
        source = s.source();
    }
}
