//! Why a setting cannot be used.

use karpenter_cluster::feature_gates::FeatureGateError;
use karpenter_cluster::scheduler_config::SchedulerConfigError;

/// A setting that cannot be used, naming the flag / variable and the offending text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A duration Go's `time.ParseDuration` would reject, or one that is not positive.
    #[error("--{flag} ({env}): invalid duration {value:?}: {reason}")]
    Duration {
        /// Flag name.
        flag: &'static str,
        /// Environment variable.
        env: &'static str,
        /// The text given.
        value: String,
        /// Why it is rejected.
        reason: String,
    },
    /// `FAKE_CAPACITY_RESERVATIONS` is not a JSON list of reservations.
    #[error("--fake-capacity-reservations (FAKE_CAPACITY_RESERVATIONS): {0}")]
    FakeReservations(String),
    /// A launch fault of the fake provider (`--fake-insufficient-capacity`,
    /// `--fake-launch-delay`) that cannot be used.
    #[error("--{flag} ({env}): {message}")]
    Fake {
        /// Flag name.
        flag: &'static str,
        /// Environment variable.
        env: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A setting only the fake provider acts on, given with another provider.
    #[error("--{flag} ({env}) is only acted on by --cloud-provider fake")]
    FakeOnly {
        /// Flag name.
        flag: &'static str,
        /// Environment variable.
        env: &'static str,
    },
    /// `FEATURE_GATES` is not a comma-separated list of `Name=true|false`.
    #[error("--feature-gates (FEATURE_GATES): {0}")]
    FeatureGates(#[from] FeatureGateError),
    /// A setting the chosen provider cannot run without.
    #[error("--{flag} ({env}) is required with --cloud-provider {provider}")]
    Required {
        /// Flag name.
        flag: &'static str,
        /// Environment variable.
        env: &'static str,
        /// The provider.
        provider: &'static str,
    },
    /// `SCHEDULER_CONFIG` is not a scheduler configuration the kube-scheduler would accept.
    #[error("--scheduler-config (SCHEDULER_CONFIG): {0}")]
    SchedulerConfig(#[from] SchedulerConfigError),
    /// A value outside its allowed set (log level, policies, provider …).
    #[error("--{flag} ({env}): invalid value {value:?}, expected one of {expected}")]
    Invalid {
        /// Flag name.
        flag: &'static str,
        /// Environment variable.
        env: &'static str,
        /// The text given.
        value: String,
        /// The accepted values.
        expected: &'static str,
    },
}
