//! Structured logs through `tracing`: JSON (Karpenter's default, one object a line) or
//! text, at LOG_LEVEL, to stdout or stderr. `RUST_LOG` refines the filter when set.

use crate::settings::{LogFormat, LogLevel, LogOutput, Settings};
use tracing_subscriber::EnvFilter;

/// The filter directive for a level: our crates at `level`, dependencies one step quieter
/// at `debug` so kube's request logs do not drown the controller's.
pub fn directive(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Debug => "info,karpenter=debug",
        LogLevel::Info => "info",
        LogLevel::Error => "error",
    }
}

/// Installs the global subscriber. Returns an error if one is already installed.
///
/// # Errors
/// A subscriber was installed before.
pub fn init(settings: &Settings) -> Result<(), String> {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(directive(settings.log_level)));
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
