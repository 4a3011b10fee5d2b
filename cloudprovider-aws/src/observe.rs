//! What the provider reports for metrics, without depending on a metrics library: the
//! operator hands the provider a [`ProviderObserver`] (the `karpenter-metrics` crate
//! implements it over Prometheus families), as the interruption poller reports through its
//! sink.

use aws_sdk_ec2::types::CreateFleetError;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Where the provider and its SDK clients find their observer: set once, shared by every
/// clone of [`crate::settings::AwsClients`] (empty: nothing is reported).
pub type ObserverSlot = Arc<OnceLock<Arc<dyn ProviderObserver>>>;

/// One attempt of an AWS API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiAttempt {
    /// The HTTP status code, or `-1` when the attempt got no response.
    pub code: i32,
    /// From the start of the attempt to its end.
    pub duration: Duration,
}

/// One finished AWS API call (every attempt, retries included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRequest {
    /// The SDK's service id (`EC2`, `SQS`, `SSM`, `Pricing`, `IAM`).
    pub service: String,
    /// The operation (`CreateFleet`).
    pub action: String,
    /// The last attempt's status code (`-1` without a response, `0` without an attempt).
    pub code: i32,
    /// From the start of the call to its end.
    pub duration: Duration,
    /// Its attempts in order; retries are all but the first.
    pub attempts: Vec<ApiAttempt>,
}

impl ApiRequest {
    /// How many times the call was retried.
    pub fn retries(&self) -> usize {
        self.attempts.len().saturating_sub(1)
    }
}

/// One failed offering of a CreateFleet call (upstream counts per offering, not per
/// NodeClaim: one call can fail several types in several zones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchFailure {
    /// The override's availability zone (empty if EC2 named none).
    pub zone: String,
    /// The zone's id, resolved from the NodeClass's subnets (empty if unknown).
    pub zone_id: String,
    /// The launch's capacity type.
    pub capacity_type: String,
    /// [`launch_failure_reason`] of the error.
    pub reason: &'static str,
}

/// Receives the provider's metric events. Every method has a no-op default.
pub trait ProviderObserver: Send + Sync + std::fmt::Debug {
    /// A CreateFleet error for one offering.
    fn launch_failure(&self, _failure: &LaunchFailure) {}

    /// A TerminateInstances call failed for an instance in `zone` (`zone_id` may be empty).
    fn termination_failure(&self, _zone: &str, _zone_id: &str) {}

    /// User data of `bytes` bytes (raw, before base64) was rendered for `node_class`.
    fn user_data_rendered(&self, _node_class: &str, _bytes: usize) {}

    /// `node_class` is gone: its per-class series should go too.
    fn node_class_deleted(&self, _node_class: &str) {}

    /// An AWS API call finished (successfully or not).
    fn api_request(&self, _request: &ApiRequest) {}

    /// An instance the cluster owns newly failed a status check of `category`
    /// (`InstanceStatus`, `SystemStatus`, `EventStatus`): reported once while it lasts.
    fn instance_status_unhealthy(&self, _category: &str) {}

    /// A batch of `batcher` (`create_fleet`, `describe_instances`, `terminate_instances`)
    /// closed `elapsed` after its first request arrived.
    fn batch_window(&self, _batcher: &'static str, _elapsed: Duration) {}

    /// One call of `batcher` carries `size` callers' requests.
    fn batch_size(&self, _batcher: &'static str, _size: usize) {}
}

/// The observer used until one is set: reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObserver;

impl ProviderObserver for NoObserver {}

/// The failures to report for CreateFleet's `errors`: one per error, each zone's id from
/// `zone_id_of`.
pub fn launch_failures(
    errors: &[CreateFleetError],
    capacity_type: &str,
    zone_id_of: impl Fn(&str) -> Option<String>,
) -> Vec<LaunchFailure> {
    errors
        .iter()
        .map(|e| {
            let zone = e
                .launch_template_and_overrides()
                .and_then(|l| l.overrides())
                .and_then(|o| o.availability_zone())
                .unwrap_or_default()
                .to_string();
            LaunchFailure {
                zone_id: zone_id_of(&zone).unwrap_or_default(),
                zone,
                capacity_type: capacity_type.to_string(),
                reason: launch_failure_reason(
                    e.error_code().unwrap_or_default(),
                    e.error_message().unwrap_or_default(),
                ),
            }
        })
        .collect()
}

/// The well-known reason for an EC2 launch error, as upstream's provider names it (the
/// `reason` label of `karpenter_cloudprovider_instance_launch_failures_total`). Checks run
/// in upstream's order over `code: message`; capacity errors come last, and anything
/// unrecognised (an insufficient-capacity error included) is `LaunchFailed`.
pub fn launch_failure_reason(code: &str, message: &str) -> &'static str {
    let text = format!("{code}: {message}");
    let has = |s: &str| text.contains(s);
    if has("AuthFailure.ServiceLinkedRoleCreationNotPermitted") {
        return "SpotSLRCreationFailed";
    }
    if has("UnauthorizedOperation") || has("AccessDenied") || has("AuthFailure") {
        return match has("Not authorized for images") {
            true => "AMIAuthorizationFailure",
            false => "Unauthorized",
        };
    }
    let ordered: [(&[&str], &'static str); 14] = [
        (
            &["InvalidParameter", "belong to different networks"],
            "SecurityGroupSubnetVPCMismatch",
        ),
        (
            &["iamInstanceProfile.name is invalid"],
            "InstanceProfileNameInvalid",
        ),
        (
            &["InvalidLaunchTemplateId.NotFound"],
            "LaunchTemplateNotFound",
        ),
        (&["User data is limited to"], "UserDataSizeLimitExceeded"),
        (&["InvalidAMIID.Malformed"], "InvalidAMIID"),
        (&["InvalidAMIID.NotFound"], "AMINotFound"),
        (&["RequestLimitExceeded"], "RequestLimitExceeded"),
        (&["InternalError"], "InternalError"),
        (&["not eligible for Free Tier"], "FreeTierIneligible"),
        (&["MaxFleetCountExceeded"], "FleetQuotaExceeded"),
        (&["PendingVerification"], "AccountPendingVerification"),
        (&["MaxSpotInstanceCountExceeded"], "SpotQuotaExceeded"),
        (&["VcpuLimitExceeded"], "VCPULimitExceeded"),
        (
            &["InsufficientFreeAddressesInSubnet"],
            "InsufficientFreeAddressesInSubnet",
        ),
    ];
    ordered
        .iter()
        .find(|(needles, _)| needles.iter().all(|n| has(n)))
        .map_or("LaunchFailed", |(_, reason)| reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{FleetLaunchTemplateOverrides, LaunchTemplateAndOverridesResponse};

    #[test]
    fn reasons_follow_upstreams_order() {
        let cases = [
            (
                "AuthFailure.ServiceLinkedRoleCreationNotPermitted",
                "",
                "SpotSLRCreationFailed",
            ),
            ("UnauthorizedOperation", "denied", "Unauthorized"),
            (
                "AuthFailure",
                "Not authorized for images: [ami-1]",
                "AMIAuthorizationFailure",
            ),
            (
                "InvalidParameter",
                "sg-1 and subnet-1 belong to different networks",
                "SecurityGroupSubnetVPCMismatch",
            ),
            ("InvalidParameter", "something else", "LaunchFailed"),
            ("InvalidAMIID.NotFound", "", "AMINotFound"),
            ("InvalidAMIID.Malformed", "", "InvalidAMIID"),
            ("MaxSpotInstanceCountExceeded", "", "SpotQuotaExceeded"),
            ("VcpuLimitExceeded", "", "VCPULimitExceeded"),
            (
                "InsufficientFreeAddressesInSubnet",
                "",
                "InsufficientFreeAddressesInSubnet",
            ),
            ("InsufficientInstanceCapacity", "none left", "LaunchFailed"),
            // The message is searched too, and access errors win over capacity ones.
            (
                "VcpuLimitExceeded",
                "AccessDenied while checking",
                "Unauthorized",
            ),
        ];
        for (code, message, want) in cases {
            assert_eq!(
                launch_failure_reason(code, message),
                want,
                "{code}: {message}"
            );
        }
    }

    #[test]
    fn one_failure_per_error_with_its_zone_and_zone_id() {
        let err = |zone: &str, code: &str| {
            CreateFleetError::builder()
                .error_code(code)
                .error_message("m")
                .launch_template_and_overrides(
                    LaunchTemplateAndOverridesResponse::builder()
                        .overrides(
                            FleetLaunchTemplateOverrides::builder()
                                .availability_zone(zone)
                                .build(),
                        )
                        .build(),
                )
                .build()
        };
        let errors = [
            err("us-east-1a", "InsufficientInstanceCapacity"),
            err("us-east-1a", "InsufficientInstanceCapacity"),
            err("us-east-1b", "VcpuLimitExceeded"),
        ];
        let got = launch_failures(&errors, "spot", |z| {
            (z == "us-east-1a").then(|| "use1-az1".to_string())
        });
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].zone_id, "use1-az1");
        assert_eq!(got[0].reason, "LaunchFailed");
        assert_eq!(got[2].zone, "us-east-1b");
        assert_eq!(got[2].zone_id, "");
        assert_eq!(got[2].capacity_type, "spot");
        assert_eq!(got[2].reason, "VCPULimitExceeded");
    }
}
