//! Structured logs through `tracing`: JSON (Karpenter's default, one object a line) or
//! text, at LOG_LEVEL, to stdout or stderr. `RUST_LOG` refines the filter when set.

use crate::settings::{LogFormat, LogOutput, Settings};
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. Returns an error if one is already installed.
///
/// # Errors
/// A subscriber was installed before.
pub fn init(settings: &Settings) -> Result<(), String> {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(settings.log_level.filter_directive()));
    // A log line that cannot be written is dropped: by default the subscriber reports the
    // failure with `eprintln!`, which panics when stderr is a closed pipe too.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true)
        .log_internal_errors(false);
    let result = match (settings.log_format, settings.log_output) {
        (LogFormat::Json, LogOutput::Stdout) => builder
            .json()
            .flatten_event(true)
            .with_writer(std::io::stdout)
            .try_init(),
        (LogFormat::Json, LogOutput::Stderr) => builder
            .json()
            .flatten_event(true)
            .with_writer(std::io::stderr)
            .try_init(),
        (LogFormat::Text, LogOutput::Stdout) => builder.with_writer(std::io::stdout).try_init(),
        (LogFormat::Text, LogOutput::Stderr) => builder.with_writer(std::io::stderr).try_init(),
    };
    result.map_err(|e| e.to_string())
}
