//! Structured logs through `tracing`: JSON (Karpenter's default, one object a line) or
//! text, at LOG_LEVEL, to stdout or stderr. `RUST_LOG` refines the filter when set. A line
//! that cannot be written is reported to LOG_ERROR_OUTPUT_PATHS, as zap reports its write
//! errors to `ErrorOutputPaths`.

use crate::settings::{LogFormat, LogOutput, Settings};
use karpenter_settings::ErrorOutput;
use std::io::Write;
use std::sync::Arc;
use tracing_subscriber::EnvFilter;

/// Where write errors are reported. Reporting never fails: a sink that cannot be written
/// either is skipped (stderr may be the closed pipe that failed the line).
#[derive(Debug, Clone)]
struct ErrorSinks(Arc<Vec<ErrorOutput>>);

impl ErrorSinks {
    fn report(&self, error: &std::io::Error) {
        let line = format!("{} write error: {error}\n", jiff::Timestamp::now());
        for sink in self.0.iter() {
            let _ = match sink {
                ErrorOutput::Stdout => std::io::stdout().write_all(line.as_bytes()),
                ErrorOutput::Stderr => std::io::stderr().write_all(line.as_bytes()),
                ErrorOutput::File(path) => std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .and_then(|mut f| f.write_all(line.as_bytes())),
            };
        }
    }
}

/// A log writer whose failures are reported to the error sinks (the line itself is lost).
struct Reporting<W> {
    inner: W,
    sinks: ErrorSinks,
}

impl<W: Write> Write for Reporting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf).inspect_err(|e| self.sinks.report(e))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().inspect_err(|e| self.sinks.report(e))
    }
}

/// Installs the global subscriber. Returns an error if one is already installed.
///
/// # Errors
/// A subscriber was installed before.
pub fn init(settings: &Settings) -> Result<(), String> {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(settings.log_level.filter_directive()));
    // The subscriber's own report of a failed write (`eprintln!`) panics when stderr is a
    // closed pipe too; failures go to the error sinks instead.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true)
        .log_internal_errors(false);
    let sinks = ErrorSinks(Arc::new(settings.log_error_output.clone()));
    let output = settings.log_output;
    let writer = move || Reporting {
        inner: match output {
            LogOutput::Stdout => Box::new(std::io::stdout()) as Box<dyn Write>,
            LogOutput::Stderr => Box::new(std::io::stderr()),
        },
        sinks: sinks.clone(),
    };
    let result = match settings.log_format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_writer(writer)
            .try_init(),
        LogFormat::Text => builder.with_writer(writer).try_init(),
    };
    result.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "pipe closed",
            ))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_that_cannot_be_written_is_reported_to_the_error_output() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("errors.log");
        let sinks = ErrorSinks(Arc::new(vec![ErrorOutput::File(path.clone())]));
        let mut w = Reporting {
            inner: Broken,
            sinks: sinks.clone(),
        };
        assert!(w.write_all(b"{\"level\":\"INFO\"}\n").is_err());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with(" write error: pipe closed\n"), "{text}");
        // Lines that are written report nothing.
        let mut ok = Reporting {
            inner: Vec::new(),
            sinks,
        };
        ok.write_all(b"fine\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }
}
