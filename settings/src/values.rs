//! The settings that take one of a few values, and the durations: each parsed from its
//! flag's text, rejecting anything else with an error naming the flag.

use crate::SettingsError;
use karpenter_cloudprovider::duration::parse_go_duration;
use karpenter_disruption::RepackOptions;
use karpenter_scheduling::model::Millis;
use karpenter_scheduling::solver::{MinValuesPolicy, PreferencePolicy};
use std::time::Duration;

/// Log verbosity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Everything.
    Debug,
    /// Decisions and state changes.
    Info,
    /// Errors only.
    Error,
}

/// Log format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object a line.
    Json,
    /// Human-readable lines.
    Text,
}

/// Where log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOutput {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// The cloud providers `karpenter controller` can run with.
///
/// New providers are added here (and in the operator's `controller::provider::build`); any
/// other name is rejected when the settings are parsed, before anything connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// The in-memory provider; the controller plays cloud and kubelet for its nodes.
    Fake,
    /// EC2, with EC2NodeClasses and the SQS interruption queue.
    Aws,
}

impl ProviderKind {
    /// Every provider name accepted by `--cloud-provider`.
    pub const NAMES: &'static str = "fake, aws";

    /// The provider named `text` (`--cloud-provider`).
    ///
    /// # Errors
    /// [`SettingsError::Invalid`] for any other name.
    pub fn parse(text: &str) -> Result<Self, SettingsError> {
        match text {
            "fake" => Ok(Self::Fake),
            "aws" => Ok(Self::Aws),
            _ => Err(invalid(
                "cloud-provider",
                "CLOUD_PROVIDER",
                text,
                Self::NAMES,
            )),
        }
    }
}

fn invalid(
    flag: &'static str,
    env: &'static str,
    value: &str,
    expected: &'static str,
) -> SettingsError {
    SettingsError::Invalid {
        flag,
        env,
        value: value.to_owned(),
        expected,
    }
}

impl LogLevel {
    /// `--log-level`; Karpenter accepts an empty level as info.
    ///
    /// # Errors
    /// [`SettingsError::Invalid`] for anything but `debug`, `info`, `error` or nothing.
    pub fn parse(text: &str) -> Result<Self, SettingsError> {
        match text {
            "debug" => Ok(Self::Debug),
            "info" | "" => Ok(Self::Info),
            "error" => Ok(Self::Error),
            other => Err(invalid(
                "log-level",
                "LOG_LEVEL",
                other,
                "debug, info, error",
            )),
        }
    }
}

impl LogLevel {
    /// The `tracing` filter directive for this level: the `karpenter` binary's own logs at
    /// the level, and at `debug` its dependencies one step quieter so the client's request
    /// logs do not drown the controller's. The Kubernetes client's own per-request failure
    /// lines (ERROR for every refused connection or 5xx, retried or not) are off: the
    /// controller reports each failed call itself, at the level its retry warrants
    /// (`RUST_LOG` can turn them back on). At `info` the client's warning that a watch
    /// stream ended early ("eof in poll", one per watch when the API server restarts) is off
    /// too: the watch resumes, and the controller logs any watch error at the level its
    /// retry warrants; `debug` keeps it.
    pub fn filter_directive(self) -> &'static str {
        match self {
            Self::Debug => "info,karpenter=debug,kube_client::client::builder=off",
            Self::Info => "info,kube_client::client::builder=off,kube_client::client=error",
            Self::Error => "error,kube_client::client::builder=off",
        }
    }
}

impl LogFormat {
    /// `--log-format`.
    ///
    /// # Errors
    /// [`SettingsError::Invalid`] for anything but `json` or `text`.
    pub fn parse(text: &str) -> Result<Self, SettingsError> {
        match text {
            "json" => Ok(Self::Json),
            "text" => Ok(Self::Text),
            other => Err(invalid("log-format", "LOG_FORMAT", other, "json, text")),
        }
    }
}

impl LogOutput {
    /// `--log-output-paths`: one path, `stdout` (also when empty) or `stderr`.
    ///
    /// # Errors
    /// [`SettingsError::Invalid`] for any other path.
    pub fn parse(text: &str) -> Result<Self, SettingsError> {
        match text {
            "stdout" | "" => Ok(Self::Stdout),
            "stderr" => Ok(Self::Stderr),
            other => Err(invalid(
                "log-output-paths",
                "LOG_OUTPUT_PATHS",
                other,
                "stdout, stderr",
            )),
        }
    }
}

/// Where a log line that cannot be written is reported (`LOG_ERROR_OUTPUT_PATHS`, zap's
/// `ErrorOutputPaths`: the logger's own errors, not error-level logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorOutput {
    /// Standard output.
    Stdout,
    /// Standard error (the default).
    Stderr,
    /// A file, appended to.
    File(std::path::PathBuf),
}

impl ErrorOutput {
    /// `--log-error-output-paths`: comma-separated `stdout`, `stderr` or absolute file
    /// paths (zap's URL forms are not read); empty: none.
    ///
    /// # Errors
    /// [`SettingsError::Invalid`] for a relative path or a URL.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, SettingsError> {
        text.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| match p {
                "stdout" => Ok(Self::Stdout),
                "stderr" => Ok(Self::Stderr),
                path if path.starts_with('/') => Ok(Self::File(path.into())),
                other => Err(invalid(
                    "log-error-output-paths",
                    "LOG_ERROR_OUTPUT_PATHS",
                    other,
                    "stdout, stderr or absolute file paths, comma-separated",
                )),
            })
            .collect()
    }
}

/// `--preference-policy`: `Respect` or `Ignore`, case-sensitive as in Karpenter.
///
/// # Errors
/// [`SettingsError::Invalid`] for any other text.
pub fn preference_policy(text: &str) -> Result<PreferencePolicy, SettingsError> {
    match text {
        "Respect" => Ok(PreferencePolicy::Respect),
        "Ignore" => Ok(PreferencePolicy::Ignore),
        other => Err(invalid(
            "preference-policy",
            "PREFERENCE_POLICY",
            other,
            "Respect, Ignore",
        )),
    }
}

/// `--min-values-policy`: `Strict` or `BestEffort`.
///
/// # Errors
/// [`SettingsError::Invalid`] for any other text.
pub fn min_values_policy(text: &str) -> Result<MinValuesPolicy, SettingsError> {
    match text {
        "Strict" => Ok(MinValuesPolicy::Strict),
        "BestEffort" => Ok(MinValuesPolicy::BestEffort),
        other => Err(invalid(
            "min-values-policy",
            "MIN_VALUES_POLICY",
            other,
            "Strict, BestEffort",
        )),
    }
}

/// A positive Go duration (`1m30s`, `500ms`) given to `flag` / `env`.
///
/// # Errors
/// [`SettingsError::Duration`] when Go's `time.ParseDuration` would reject the text or the
/// duration is zero or negative.
pub fn duration(
    flag: &'static str,
    env: &'static str,
    value: &str,
) -> Result<Duration, SettingsError> {
    let err = |reason: String| SettingsError::Duration {
        flag,
        env,
        value: value.to_owned(),
        reason,
    };
    let nanos = parse_go_duration(value).map_err(|e| err(e.to_string()))?;
    let nanos = u64::try_from(nanos)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| err("must be positive".into()))?;
    Ok(Duration::from_nanos(nanos))
}

/// `--repack-min-node-age` (REPACK_MIN_NODE_AGE): a Go duration from `0s` to `24h`, in
/// milliseconds.
///
/// # Errors
/// [`SettingsError::Duration`] when Go's `time.ParseDuration` would reject the text or the
/// duration is negative or above a day.
pub fn repack_min_node_age(value: &str) -> Result<Millis, SettingsError> {
    let err = |reason: String| SettingsError::Duration {
        flag: "repack-min-node-age",
        env: "REPACK_MIN_NODE_AGE",
        value: value.to_owned(),
        reason,
    };
    let nanos = parse_go_duration(value).map_err(|e| err(e.to_string()))?;
    let ms = nanos / 1_000_000;
    if nanos < 0 || !RepackOptions::valid_min_node_age(ms) {
        return Err(err(format!(
            "expected {}",
            RepackOptions::MIN_NODE_AGE_RANGE
        )));
    }
    Ok(ms)
}
