//! [`AwsCloudProvider`]: the [`CloudProvider`] over EC2. It keeps the EC2NodeClasses the
//! operator gives it ([`AwsCloudProvider::apply_node_class`]), resolves their selectors
//! ([`AwsCloudProvider::reconcile_node_class`]), and launches, finds, lists, terminates and
//! drift-checks instances.

use crate::batcher::describe::DescribeApi;
use crate::batcher::ec2::{BatchWindows, Ec2Api, Ec2Batchers};
use crate::cache::{Clock, SystemClock, UnavailableOfferings};
use crate::capacity_reservation::{Availability, CapacityReservations};
use crate::discovery::Discovery;
use crate::error::AwsError;
use crate::instance::{Ec2Instance, ReservationDetails, drift_reason, parse_provider_id};
use crate::instance_profile::{ANNOTATION_INSTANCE_PROFILE, InstanceProfiles};
use crate::instancetype::InstanceTypeProvider;
use crate::kubelet_resolve::{KubeletResolver, TypeKubelet};
use crate::launch::{
    LaunchOverride, LaunchPlan, PlanError, TAG_LAUNCH_TEMPLATE_CLUSTER, TemplateKey,
    classify_fleet_errors, cluster_tag_key, fleet_options, instance_tags,
    launch_template_configs_by, launch_template_name, plan_launch, tag_specification,
};
use crate::nodeclass::{
    AMI_FAMILY_BOTTLEROCKET, ANNOTATION_NODE_CLASS_HASH, ANNOTATION_NODE_CLASS_HASH_VERSION,
    CONDITION_AMIS_READY, CONDITION_CAPACITY_RESERVATIONS_READY, CONDITION_INSTANCE_PROFILE_READY,
    CONDITION_SECURITY_GROUPS_READY, CONDITION_SUBNETS_READY, CONDITION_VALIDATION_SUCCEEDED,
    EC2NodeClass, LABEL_NODE_CLASS, NODE_CLASS_HASH_VERSION,
};
use crate::observe::{NoObserver, ProviderObserver, launch_failures};
use crate::pricing::PricingProvider;
use crate::reserved_launch::TemplateTarget;
use crate::settings::{AwsClients, AwsSettings};
use crate::userdata::{BootstrapOptions, NodeTaint};
use aws_sdk_ec2::operation::create_fleet::builders::CreateFleetInputBuilder;
use aws_sdk_ec2::types::{
    Filter, FleetType, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataEndpointState, LaunchTemplateInstanceMetadataOptionsRequest,
    LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, LaunchTemplatesMonitoringRequest,
    RequestLaunchTemplateData, ResourceType, VolumeType,
};
use base64::Engine;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_cloudprovider::overlay::{PRICE_OVERLAY_APPLIED_ANNOTATION, Published};
use karpenter_cloudprovider::v1::{
    ConditionStatus, NodeClaim, NodeClaimStatus, NodePool, StatusConditions,
};
use karpenter_cloudprovider::{CloudProvider, CloudProviderError, DriftReason, RepairPolicy};
use karpenter_scheduling::model::InstanceType;
use karpenter_scheduling::requirements::{NodeSelectorRequirement, Requirements};
use karpenter_scheduling::{Quantity, Resources, labels};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

/// The provider name used in metrics.
pub const PROVIDER_NAME: &str = "aws";

/// The AWS cloud provider.
#[derive(Debug)]
pub struct AwsCloudProvider {
    clients: AwsClients,
    settings: AwsSettings,
    clock: Arc<dyn Clock>,
    discovery: Discovery,
    instance_types: InstanceTypeProvider,
    instance_profiles: InstanceProfiles,
    unavailable: Arc<UnavailableOfferings>,
    node_classes: RwLock<BTreeMap<String, EC2NodeClass>>,
    templates: Mutex<BTreeSet<String>>,
    reservations: CapacityReservations,
    overlays: Published,
    ec2_api: Ec2Api,
    batchers: Ec2Batchers,
}

fn now_time(clock: &dyn Clock) -> Time {
    Time(
        k8s_openapi::jiff::Timestamp::try_from(clock.now())
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

fn to_k8s(resources: &Resources) -> BTreeMap<String, K8sQuantity> {
    resources
        .to_quantities()
        .into_iter()
        .map(|(k, q)| (k, K8sQuantity(q.to_string())))
        .collect()
}

fn create_err(reason: &str, message: String) -> CloudProviderError {
    CloudProviderError::Create {
        reason: reason.into(),
        message,
    }
}

fn requirements_of(
    what: &str,
    reqs: &[karpenter_cloudprovider::v1::NodeSelectorRequirementWithMinValues],
) -> Result<Requirements, CloudProviderError> {
    let selectors: Vec<NodeSelectorRequirement> = reqs.iter().map(|r| r.to_model()).collect();
    Requirements::from_node_selector(&selectors)
        .map_err(|e| create_err("InvalidRequirements", format!("{what}: {e}")))
}

fn requests_of(claim: &NodeClaim) -> Result<Resources, CloudProviderError> {
    let mut parsed = Vec::new();
    for (name, q) in &claim.spec.resources.requests {
        let q = Quantity::parse(&q.0).map_err(|e| {
            create_err(
                "InvalidResourceRequests",
                format!(
                    "NodeClaim {:?}: spec.resources.requests[{name}]: {e}",
                    claim.name()
                ),
            )
        })?;
        parsed.push((name.as_str(), q));
    }
    Resources::from_quantities(parsed.iter().map(|(n, q)| (*n, q))).map_err(|e| {
        create_err(
            "InvalidResourceRequests",
            format!("NodeClaim {:?}: spec.resources.requests: {e}", claim.name()),
        )
    })
}

impl AwsCloudProvider {
    /// A provider over `clients` with `settings`, on the system clock.
    pub fn new(clients: AwsClients, settings: AwsSettings) -> Self {
        Self::with_clock(clients, settings, Arc::new(SystemClock))
    }

    /// A provider whose caches run on `clock`.
    pub fn with_clock(clients: AwsClients, settings: AwsSettings, clock: Arc<dyn Clock>) -> Self {
        let unavailable = Arc::new(UnavailableOfferings::new(clock.clone()));
        let pricing = Arc::new(PricingProvider::new(
            clients.ec2.clone(),
            clients.pricing.clone(),
            &settings,
            clock.clone(),
        ));
        let ec2_api = Ec2Api::new(clients.ec2.clone(), settings.reserved_capacity);
        Self {
            discovery: Discovery::new(
                clients.ec2.clone(),
                clients.ssm.clone(),
                settings.clone(),
                clock.clone(),
            ),
            instance_types: InstanceTypeProvider::new(
                clients.ec2.clone(),
                settings.clone(),
                pricing,
                unavailable.clone(),
                clock.clone(),
            ),
            reservations: CapacityReservations::new(
                clients.ec2.clone(),
                clock.clone(),
                settings.discovery_ttl,
            ),
            instance_profiles: InstanceProfiles::new(clients.iam.clone(), &settings, clock.clone()),
            ec2_api: ec2_api.clone(),
            batchers: Ec2Batchers::new(ec2_api, clients.observer.clone(), BatchWindows::default()),
            clients,
            settings,
            clock,
            unavailable,
            node_classes: RwLock::new(BTreeMap::new()),
            templates: Mutex::new(BTreeSet::new()),
            overlays: Published::default(),
        }
    }

    /// Launches with the NodeOverlays of `overlays` applied, as upstream's provider does
    /// with the NodeOverlay gate on: a claim's offerings are ranked and truncated by their
    /// overlaid prices, and a claim annotated `karpenter.sh/price-overlay-applied` asks
    /// CreateFleet for the prioritized allocation strategies with those prices as
    /// priorities. Without it (the gate off) launches use the provider's own prices.
    #[must_use]
    pub fn with_overlays(mut self, overlays: Published) -> Self {
        self.overlays = overlays;
        self
    }

    /// Batches EC2 calls with `windows` instead of upstream's (35 ms idle for CreateFleet,
    /// 100 ms for DescribeInstances and TerminateInstances). Wider windows trade launch
    /// latency for fewer calls; tests use them so that concurrent requests share a call
    /// however slowly a loaded machine brings them to the batcher.
    #[must_use]
    pub fn with_batch_windows(mut self, windows: BatchWindows) -> Self {
        self.batchers =
            Ec2Batchers::new(self.ec2_api.clone(), self.clients.observer.clone(), windows);
        self
    }

    /// Sets where the provider and its SDK clients (every clone of its [`AwsClients`])
    /// report their metric events: launch and termination failures, user data sizes, API
    /// calls. Only the first call takes effect; it returns whether this one did. Until then
    /// nothing is reported.
    pub fn set_observer(&self, observer: Arc<dyn ProviderObserver>) -> bool {
        self.clients.observer.set(observer).is_ok()
    }

    fn observer(&self) -> &dyn ProviderObserver {
        self.clients
            .observer
            .get()
            .map_or(&NoObserver, |o| o.as_ref())
    }

    /// The EC2 client (unbatched calls).
    pub(crate) fn ec2_client(&self) -> &aws_sdk_ec2::Client {
        &self.clients.ec2
    }

    /// The settings.
    pub fn settings(&self) -> &AwsSettings {
        &self.settings
    }

    /// The insufficient-capacity cache.
    pub fn unavailable_offerings(&self) -> &Arc<UnavailableOfferings> {
        &self.unavailable
    }

    /// The discovery caches (for the NodeClass controller's periodic refresh).
    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    /// The instance-type provider.
    pub fn instance_type_provider(&self) -> &InstanceTypeProvider {
        &self.instance_types
    }

    /// The managed instance profiles (deleted with their class, garbage-collected).
    pub fn instance_profiles(&self) -> &InstanceProfiles {
        &self.instance_profiles
    }

    /// Stores (or replaces) a NodeClass; launches use the stored object and its status.
    pub fn apply_node_class(&self, node_class: EC2NodeClass) {
        let mut map = self
            .node_classes
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        map.insert(node_class.name().to_string(), node_class);
    }

    /// Forgets a NodeClass.
    pub fn delete_node_class(&self, name: &str) {
        let mut map = self
            .node_classes
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        map.remove(name);
        self.observer().node_class_deleted(name);
    }

    /// A stored NodeClass.
    pub fn node_class(&self, name: &str) -> Option<EC2NodeClass> {
        let map = self
            .node_classes
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        map.get(name).cloned()
    }

    fn ready_node_class(&self, name: &str) -> Result<EC2NodeClass, AwsError> {
        let nc = self
            .node_class(name)
            .ok_or_else(|| AwsError::NodeClassNotReady {
                name: name.into(),
                reason: "not found".into(),
            })?;
        if !nc.is_true(karpenter_cloudprovider::v1::CONDITION_READY) {
            let reason = nc
                .condition(karpenter_cloudprovider::v1::CONDITION_READY)
                .map_or_else(|| "not reconciled yet".to_string(), |c| c.message.clone());
            return Err(AwsError::NodeClassNotReady {
                name: name.into(),
                reason,
            });
        }
        Ok(nc)
    }

    /// The controller's checks of `nc.spec.kubelet` (upstream's validation controller): the
    /// configuration itself, then its expressions for every instance type EC2 describes.
    /// A failure to ask EC2 leaves the second check undecided (passed) until the next
    /// resolution.
    async fn kubelet_validation(&self, nc: &EC2NodeClass) -> Result<(), (String, String)> {
        crate::kubelet::check(
            nc.spec.kubelet.as_ref(),
            &nc.ami_family(),
            self.settings.node_class_cel,
        )
        .map_err(|(reason, message)| (reason.to_owned(), message))?;
        match self.instance_types.kubelet_expression_failure(nc).await {
            Ok(Some(message)) => Err((
                crate::kubelet::reason::EXPRESSION_EVAL_FAILED.to_owned(),
                message,
            )),
            Ok(None) => Ok(()),
            Err(e) => {
                tracing::debug!(nodeclass = nc.name(), error = %e, "kubelet expressions not checked: instance types unavailable");
                Ok(())
            }
        }
    }

    /// Resolves a NodeClass's selectors and returns it with a fresh status: subnets (most
    /// free IPs first), security groups, AMIs (newest first), the instance profile (for `role`,
    /// the managed profile created through IAM; see [`InstanceProfiles::resolve`]), and the
    /// conditions rolled up into `Ready`. API failures become `False` conditions rather than
    /// errors, so the status always says what is wrong.
    pub async fn reconcile_node_class(&self, node_class: &EC2NodeClass) -> EC2NodeClass {
        let mut nc = node_class.clone();
        let now = now_time(self.clock.as_ref());
        let mut status = nc.status.clone().unwrap_or_default();
        let conditions = std::mem::take(&mut status.conditions);
        nc.status = Some(status);
        nc.status.get_or_insert_with(Default::default).conditions = conditions;
        let set = |nc: &mut EC2NodeClass, t: &str, ok: Result<(), (String, String)>| {
            match ok {
                Ok(()) => nc.set_condition(t, ConditionStatus::True, t, "", now.clone()),
                Err((reason, message)) => {
                    nc.set_condition(t, ConditionStatus::False, &reason, &message, now.clone())
                }
            };
        };
        let validation = match nc.validate() {
            Err(e) => Err(("ValidationFailed".to_string(), e.to_string())),
            Ok(()) => self.kubelet_validation(&nc).await,
        };
        set(&mut nc, CONDITION_VALIDATION_SUCCEEDED, validation);

        let subnets = self.discovery.subnets(&nc.spec.subnet_selector_terms).await;
        let res = match subnets {
            Ok(s) if !s.is_empty() => {
                nc.status.get_or_insert_with(Default::default).subnets =
                    s.iter().map(|s| s.to_status()).collect();
                Ok(())
            }
            Ok(_) => Err((
                "SubnetsNotFound".into(),
                "SubnetSelector did not match any Subnets".into(),
            )),
            Err(e) => Err(("SubnetsNotFound".into(), e.to_string())),
        };
        set(&mut nc, CONDITION_SUBNETS_READY, res);

        let sgs = self
            .discovery
            .security_groups(&nc.spec.security_group_selector_terms)
            .await;
        let res = match sgs {
            Ok(s) if !s.is_empty() => {
                nc.status
                    .get_or_insert_with(Default::default)
                    .security_groups = s;
                Ok(())
            }
            Ok(_) => Err((
                "SecurityGroupsNotFound".into(),
                "SecurityGroupSelector did not match any SecurityGroups".into(),
            )),
            Err(e) => Err(("SecurityGroupsNotFound".into(), e.to_string())),
        };
        set(&mut nc, CONDITION_SECURITY_GROUPS_READY, res);

        let amis = self.discovery.amis(&nc.spec.ami_selector_terms).await;
        let res = match amis {
            Ok(a) if !a.is_empty() => {
                nc.status.get_or_insert_with(Default::default).amis = a;
                Ok(())
            }
            Ok(_) => Err((
                "AMINotFound".into(),
                "AMISelector did not match any AMIs".into(),
            )),
            Err(e) => Err(("AMINotFound".into(), e.to_string())),
        };
        set(&mut nc, CONDITION_AMIS_READY, res);

        let res = self.resolve_reservations(&mut nc).await;
        set(&mut nc, CONDITION_CAPACITY_RESERVATIONS_READY, res);

        let res = match self.instance_profiles.resolve(&nc).await {
            Ok(profile) if profile.is_empty() => Err((
                "InstanceProfileNotFound".into(),
                "neither role nor instanceProfile is set".into(),
            )),
            Ok(profile) => {
                nc.status
                    .get_or_insert_with(Default::default)
                    .instance_profile = profile;
                Ok(())
            }
            Err(e) => Err((e.reason().to_string(), e.to_string())),
        };
        set(&mut nc, CONDITION_INSTANCE_PROFILE_READY, res);
        nc
    }

    /// Fills `status.capacityReservations` from the class's selector terms (nothing with the
    /// `ReservedCapacity` gate off). A reservation EC2 describes in a way Karpenter cannot
    /// use is left out and logged; a failed listing keeps the last status and says why.
    async fn resolve_reservations(&self, nc: &mut EC2NodeClass) -> Result<(), (String, String)> {
        let terms = &nc.spec.capacity_reservation_selector_terms;
        if !self.settings.reserved_capacity || terms.is_empty() {
            nc.status
                .get_or_insert_with(Default::default)
                .capacity_reservations
                .clear();
            return Ok(());
        }
        let (found, unusable) = self.reservations.list(terms).await.map_err(|e| {
            (
                "CapacityReservationsNotFound".to_owned(),
                format!("listing capacity reservations: {e}"),
            )
        })?;
        for e in unusable {
            tracing::warn!(ec2nodeclass = nc.name(), error = %e, "capacity reservation left out");
        }
        nc.status
            .get_or_insert_with(Default::default)
            .capacity_reservations = found;
        Ok(())
    }

    /// Of the reservations `ids`, the capacity blocks that are expiring (upstream's
    /// expiration controller deletes the NodeClaims in them).
    ///
    /// # Errors
    /// DescribeCapacityReservations failed.
    pub async fn expiring_reservations(
        &self,
        ids: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, AwsError> {
        let terms: Vec<crate::nodeclass::CapacityReservationSelectorTerm> = ids
            .iter()
            .map(|id| crate::nodeclass::CapacityReservationSelectorTerm {
                id: id.clone(),
                ..Default::default()
            })
            .collect();
        let (found, _) = self.reservations.list(&terms).await?;
        Ok(found
            .into_iter()
            .filter(|r| r.state == crate::capacity_reservation::STATE_EXPIRING)
            .map(|r| r.id)
            .collect())
    }

    /// One pass of upstream's capacity-type and expiration controllers over the cluster's
    /// `claims` and `nodes` ([`crate::reservation_sync`]). EC2 is asked only when some claim
    /// runs in a reservation.
    ///
    /// # Errors
    /// DescribeInstances or DescribeCapacityReservations failed.
    pub async fn reservation_sync<'a>(
        &self,
        claims: impl Iterator<Item = &'a NodeClaim> + Clone,
        nodes: impl Iterator<Item = &'a k8s_openapi::api::core::v1::Node>,
    ) -> Result<crate::reservation_sync::ReservationSync, AwsError> {
        use crate::reservation_sync::{ReservationSync, plan, reservation_ids};
        let ids = reservation_ids(claims.clone());
        if ids.is_empty() {
            return Ok(ReservationSync::default());
        }
        let instances = self.list_instances().await?;
        let expiring = self.expiring_reservations(&ids).await?;
        Ok(plan(claims, nodes, &instances, &expiring))
    }

    /// The capacity reservations' remaining instance counts.
    pub fn reservation_availability(&self) -> &Arc<Availability> {
        self.reservations.availability()
    }

    /// The instance types of a NodeClass (unfiltered by any NodePool), with a reserved
    /// offering for each of its capacity reservations when the `ReservedCapacity` gate is
    /// on.
    pub async fn node_class_instance_types(
        &self,
        node_class: &EC2NodeClass,
    ) -> Result<Vec<Arc<InstanceType>>, AwsError> {
        let types = self.instance_types.list(node_class).await?;
        if !self.settings.reserved_capacity {
            return Ok(types);
        }
        Ok(crate::capacity_reservation::with_reserved_offerings(
            types,
            &node_class.status_or_default().capacity_reservations,
            self.reservations.availability(),
        ))
    }

    fn block_device_mappings(
        &self,
        nc: &EC2NodeClass,
    ) -> Vec<LaunchTemplateBlockDeviceMappingRequest> {
        let gib =
            |bytes: i64| i32::try_from((bytes + (1 << 30) - 1) / (1 << 30)).unwrap_or(i32::MAX);
        let mappings = &nc.spec.block_device_mappings;
        if mappings.is_empty() {
            // The families' defaults: a 20 GiB encrypted gp3 root (AL2023), or a 4 GiB OS
            // volume plus a 20 GiB data volume (Bottlerocket).
            let ebs = |size: i32| {
                LaunchTemplateEbsBlockDeviceRequest::builder()
                    .volume_size(size)
                    .volume_type(VolumeType::Gp3)
                    .encrypted(true)
                    .delete_on_termination(true)
                    .build()
            };
            let dev = |name: &str, size: i32| {
                LaunchTemplateBlockDeviceMappingRequest::builder()
                    .device_name(name)
                    .ebs(ebs(size))
                    .build()
            };
            return if nc.ami_family() == AMI_FAMILY_BOTTLEROCKET {
                vec![dev("/dev/xvda", 4), dev("/dev/xvdb", 20)]
            } else {
                vec![dev("/dev/xvda", 20)]
            };
        }
        mappings
            .iter()
            .map(|m| {
                let mut b = LaunchTemplateBlockDeviceMappingRequest::builder()
                    .set_device_name(m.device_name.clone());
                if let Some(e) = &m.ebs {
                    let size = e
                        .volume_size
                        .as_ref()
                        .and_then(|q| Quantity::parse(&q.0).ok())
                        .map(|q| gib(q.value()));
                    b = b.ebs(
                        LaunchTemplateEbsBlockDeviceRequest::builder()
                            .set_delete_on_termination(e.delete_on_termination)
                            .set_encrypted(e.encrypted)
                            .set_iops(e.iops.and_then(|v| i32::try_from(v).ok()))
                            .set_kms_key_id(e.kms_key_id.clone())
                            .set_snapshot_id(e.snapshot_id.clone())
                            .set_throughput(e.throughput.and_then(|v| i32::try_from(v).ok()))
                            .set_volume_size(size)
                            .set_volume_type(e.volume_type.as_deref().map(VolumeType::from))
                            .build(),
                    );
                }
                b.build()
            })
            .collect()
    }

    /// The launch template data of a NodeClass for one image, user data and reservation
    /// target.
    pub fn launch_template_data(
        &self,
        nc: &EC2NodeClass,
        image_id: &str,
        user_data: &str,
        target: &TemplateTarget<'_>,
    ) -> RequestLaunchTemplateData {
        let status = nc.status_or_default();
        let sgs: Vec<String> = status
            .security_groups
            .iter()
            .map(|g| g.id.clone())
            .collect();
        let m = &nc.spec.metadata_options;
        let mut data = RequestLaunchTemplateData::builder()
            .image_id(image_id)
            .user_data(base64::engine::general_purpose::STANDARD.encode(user_data))
            .iam_instance_profile(
                LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                    .name(&status.instance_profile)
                    .build(),
            )
            .metadata_options(
                LaunchTemplateInstanceMetadataOptionsRequest::builder()
                    .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::from(
                        m.http_endpoint.as_str(),
                    ))
                    .http_protocol_ipv6(LaunchTemplateInstanceMetadataProtocolIpv6::from(
                        m.http_protocol_ipv6.as_str(),
                    ))
                    .http_put_response_hop_limit(
                        i32::try_from(m.http_put_response_hop_limit).unwrap_or(1),
                    )
                    .http_tokens(LaunchTemplateHttpTokensState::from(m.http_tokens.as_str()))
                    .build(),
            )
            .monitoring(
                LaunchTemplatesMonitoringRequest::builder()
                    .enabled(nc.spec.detailed_monitoring.unwrap_or(false))
                    .build(),
            )
            // Always written, as upstream writes it.
            .enclave_options(
                aws_sdk_ec2::types::LaunchTemplateEnclaveOptionsRequest::builder()
                    .enabled(nc.enclaves_enabled())
                    .build(),
            )
            .set_block_device_mappings(Some(self.block_device_mappings(nc)))
            // Written only when set, as upstream writes it.
            .set_cpu_options(
                nc.spec
                    .cpu_options
                    .as_ref()
                    .and_then(|c| c.nested_virtualization.as_deref())
                    .map(|nv| {
                        aws_sdk_ec2::types::LaunchTemplateCpuOptionsRequest::builder()
                            .nested_virtualization(nv.into())
                            .build()
                    }),
            );
        let (reservation_spec, market) = target.options();
        data = data
            .set_capacity_reservation_specification(reservation_spec)
            .set_instance_market_options(market);
        let tracking = nc.spec.connection_tracking.as_ref().map(|c| {
            aws_sdk_ec2::types::ConnectionTrackingSpecificationRequest::builder()
                .set_tcp_established_timeout(c.tcp_established_timeout)
                .set_udp_stream_timeout(c.udp_stream_timeout)
                .set_udp_timeout(c.udp_timeout)
                .build()
        });
        let public = nc.spec.associate_public_ip_address;
        let prefixes = nc.spec.ip_prefix_count;
        if public.is_some() || prefixes.is_some() || tracking.is_some() {
            // Security groups move onto the primary interface when one is specified (as
            // upstream writes it); the subnet still comes from each fleet override.
            data = data.network_interfaces(
                LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                    .device_index(0)
                    .set_associate_public_ip_address(public)
                    .set_ipv4_prefix_count(prefixes)
                    .set_connection_tracking_specification(tracking)
                    .set_groups(Some(sgs))
                    .build(),
            );
        } else {
            data = data.set_security_group_ids(Some(sgs));
        }
        data.build()
    }

    async fn ensure_launch_template(
        &self,
        name: &str,
        data: RequestLaunchTemplateData,
        nc: &EC2NodeClass,
    ) -> Result<(), AwsError> {
        if self
            .templates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(name)
        {
            return Ok(());
        }
        let existing = self
            .clients
            .ec2
            .describe_launch_templates()
            .launch_template_names(name)
            .send()
            .await;
        let exists = match existing {
            Ok(out) => !out.launch_templates().is_empty(),
            Err(e) => {
                let err = AwsError::api("DescribeLaunchTemplates", e);
                if !err.is_not_found() {
                    return Err(err);
                }
                false
            }
        };
        if !exists {
            let mut tags = nc.spec.tags.clone();
            tags.insert(
                TAG_LAUNCH_TEMPLATE_CLUSTER.into(),
                self.settings.cluster_name.clone(),
            );
            tags.insert(LABEL_NODE_CLASS.into(), nc.name().into());
            tags.insert(cluster_tag_key(&self.settings.cluster_name), "owned".into());
            let res = self
                .clients
                .ec2
                .create_launch_template()
                .launch_template_name(name)
                .launch_template_data(data)
                .tag_specifications(tag_specification(ResourceType::LaunchTemplate, &tags))
                .send()
                .await;
            if let Err(e) = res {
                let err = AwsError::api("CreateLaunchTemplate", e);
                // Another replica created it first.
                if !err.code().is_some_and(|c| c.contains("AlreadyExists")) {
                    return Err(err);
                }
            }
        }
        self.templates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_string());
        Ok(())
    }

    /// The user data each of `plan`'s instance types boots with: one text for every type
    /// unless the class's kubelet expressions give them different values. Each distinct
    /// text is reported once.
    async fn user_data_by_type(
        &self,
        nc: &EC2NodeClass,
        claim: &NodeClaim,
        plan: &LaunchPlan,
    ) -> Result<BTreeMap<String, String>, AwsError> {
        let resolver = crate::instancetype::kubelet_resolver(nc, &self.settings)?;
        let entries = match resolver.per_type() {
            true => Some(self.instance_types.entries().await?),
            false => None,
        };
        let mut by_values: BTreeMap<TypeKubelet, String> = BTreeMap::new();
        let mut out = BTreeMap::new();
        for ov in &plan.overrides {
            let values = match &entries {
                Some(entries) => {
                    let Some(entry) = entries.iter().find(|e| e.name == ov.instance_type) else {
                        continue;
                    };
                    resolver
                        .for_type(entry)
                        .map_err(|message| AwsError::Invalid {
                            what: format!("EC2NodeClass {:?} spec.kubelet", nc.name()),
                            message,
                        })?
                }
                None => resolver.shared(),
            };
            let user_data = match by_values.get(&values) {
                Some(text) => text.clone(),
                None => {
                    let mut opts = self.bootstrap_options(nc, claim);
                    opts.kubelet = nc
                        .spec
                        .kubelet
                        .as_ref()
                        .map(|raw| KubeletResolver::resolved_config(raw, &values));
                    let text =
                        crate::userdata::generate(&nc.ami_family(), &opts).map_err(|source| {
                            AwsError::UserData {
                                name: nc.name().into(),
                                source,
                            }
                        })?;
                    self.observer().user_data_rendered(nc.name(), text.len());
                    by_values.insert(values, text.clone());
                    text
                }
            };
            out.insert(ov.instance_type.clone(), user_data);
        }
        Ok(out)
    }

    fn bootstrap_options(&self, nc: &EC2NodeClass, claim: &NodeClaim) -> BootstrapOptions {
        let mut node_labels: BTreeMap<String, String> =
            claim.metadata.labels.clone().unwrap_or_default();
        node_labels.insert(LABEL_NODE_CLASS.into(), nc.name().into());
        let taints = claim
            .spec
            .taints
            .iter()
            .chain(&claim.spec.startup_taints)
            .map(|t| NodeTaint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: t.effect.as_str().to_string(),
            })
            .collect();
        BootstrapOptions {
            cluster_name: self.settings.cluster_name.clone(),
            cluster_endpoint: self.settings.cluster_endpoint.clone(),
            ca_bundle: self.settings.cluster_ca_bundle.clone(),
            cluster_cidr: self.settings.cluster_cidr.clone(),
            labels: node_labels,
            taints,
            kubelet: nc.spec.kubelet.clone(),
            max_pods: None,
            custom_user_data: nc.spec.user_data.clone(),
            instance_store_policy: nc.spec.instance_store_policy.clone(),
        }
    }

    /// DescribeInstances: a call for one id goes through the batcher (merged with
    /// concurrent ones), any other straight to EC2 (every page).
    async fn describe_instances(
        &self,
        filters: Vec<Filter>,
        mut ids: Vec<String>,
    ) -> Result<Vec<Ec2Instance>, AwsError> {
        match (ids.pop(), ids.is_empty()) {
            (Some(id), true) => self.batchers.describe_instance(filters, id).await,
            (last, _) => {
                ids.extend(last);
                self.ec2_api.describe(&filters, &ids).await
            }
        }
    }

    /// The zone id of `instance`'s subnet, from the stored NodeClasses' resolved subnets
    /// (empty when no class lists it).
    fn zone_id(&self, instance: &Ec2Instance) -> String {
        let map = self
            .node_classes
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let mut subnets = map.values().flat_map(|nc| {
            let status = nc.status.as_ref();
            status.into_iter().flat_map(|s| s.subnets.iter())
        });
        subnets
            .find(|s| s.id == instance.subnet_id)
            .map(|s| s.zone_id.clone())
            .unwrap_or_default()
    }

    /// The instance behind a provider id; `NotFound` when it does not exist or is
    /// terminating.
    pub async fn get_instance(&self, provider_id: &str) -> Result<Ec2Instance, CloudProviderError> {
        let not_found = || CloudProviderError::NotFound {
            provider_id: provider_id.to_string(),
        };
        let id = parse_provider_id(provider_id).ok_or_else(|| {
            CloudProviderError::Other(format!("{provider_id:?} is not an AWS provider id"))
        })?;
        let found = match self.describe_instances(vec![], vec![id.to_string()]).await {
            Ok(f) => f,
            Err(e) if e.is_not_found() => return Err(not_found()),
            Err(e) => return Err(e.into()),
        };
        found
            .into_iter()
            .find(|i| i.id == id && !i.is_terminating())
            .ok_or_else(not_found)
    }

    /// Every instance of this cluster that Karpenter launched (tagged with a NodePool and
    /// the cluster), terminating ones excluded.
    pub async fn list_instances(&self) -> Result<Vec<Ec2Instance>, AwsError> {
        let filters = vec![
            Filter::builder()
                .name("tag-key")
                .values(crate::launch::TAG_NODEPOOL)
                .build(),
            Filter::builder()
                .name(format!(
                    "tag:{}",
                    cluster_tag_key(&self.settings.cluster_name)
                ))
                .values("owned")
                .build(),
            Filter::builder()
                .name("instance-state-name")
                .values("pending")
                .values("running")
                .values("stopping")
                .values("stopped")
                .build(),
        ];
        let mut list = self.describe_instances(filters, vec![]).await?;
        list.retain(|i| !i.is_terminating());
        list.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(list)
    }

    /// Terminates instances by id, each through the TerminateInstances batcher (so
    /// concurrent terminations share calls); the first failure, if any.
    pub async fn terminate_instances(&self, ids: &[String]) -> Result<(), AwsError> {
        let calls = ids
            .iter()
            .map(|id| self.batchers.terminate_instance(id.clone()));
        futures::future::join_all(calls).await.into_iter().collect()
    }

    /// Leaked instances: listed instances older than `min_age` that no claim in
    /// `claimed_provider_ids` owns (see [`crate::instance::leaked_instances`]).
    pub async fn leaked_instances(
        &self,
        claimed_provider_ids: &BTreeSet<String>,
        min_age: Duration,
    ) -> Result<Vec<String>, AwsError> {
        let instances = self.list_instances().await?;
        Ok(crate::instance::leaked_instances(
            &instances,
            claimed_provider_ids,
            self.clock.now(),
            min_age,
        ))
    }

    async fn launch(
        &self,
        claim: &NodeClaim,
        nc: &EC2NodeClass,
        plan: &LaunchPlan,
        prioritized: bool,
    ) -> Result<Ec2Instance, CloudProviderError> {
        let status = nc.status_or_default();
        let sgs: Vec<String> = status
            .security_groups
            .iter()
            .map(|g| g.id.clone())
            .collect();
        // One user data per distinct set of kubelet values: with kubelet expressions the
        // plan's instance types may boot with different ones (upstream resolves a launch
        // template per group of types that share them).
        let user_data_of = self
            .user_data_by_type(nc, claim, plan)
            .await
            .map_err(|e| create_err("UserDataInvalid", e.to_string()))?;
        let mut templates: BTreeMap<(TemplateKey, String), String> = BTreeMap::new();
        for ov in &plan.overrides {
            let key = ov.template_key();
            let Some(user_data) = user_data_of.get(&ov.instance_type) else {
                continue;
            };
            if templates.contains_key(&(key.clone(), user_data.clone())) {
                continue;
            }
            let target = match (&key.1, &plan.reservation) {
                (Some(id), Some(kind)) => TemplateTarget::Reservation { id, kind },
                _ if self.settings.reserved_capacity => TemplateTarget::NoReservation,
                _ => TemplateTarget::Open,
            };
            let name = launch_template_name(
                &self.settings.cluster_name,
                nc,
                &key.0,
                user_data,
                &sgs,
                &status.instance_profile,
                &target,
            );
            self.ensure_launch_template(
                &name,
                self.launch_template_data(nc, &key.0, user_data, &target),
                nc,
            )
            .await
            .map_err(|e| create_err("LaunchTemplateCreationFailed", e.to_string()))?;
            templates.insert((key, user_data.clone()), name);
        }
        let template_of = |ov: &LaunchOverride| {
            let user_data = user_data_of.get(&ov.instance_type)?;
            templates
                .get(&(ov.template_key(), user_data.clone()))
                .cloned()
        };
        let pool = claim.node_pool().unwrap_or_default();
        let tags = instance_tags(&self.settings.cluster_name, nc, pool);
        let fleet = fleet_options(plan, prioritized);
        let input = CreateFleetInputBuilder::default()
            .r#type(FleetType::Instant)
            .set_launch_template_configs(Some(launch_template_configs_by(plan, template_of)))
            .target_capacity_specification(fleet.target)
            .set_spot_options(fleet.spot)
            .set_on_demand_options(fleet.on_demand)
            .set_reserved_capacity_options(fleet.reserved)
            .tag_specifications(tag_specification(ResourceType::Instance, &tags))
            .tag_specifications(tag_specification(ResourceType::Volume, &tags))
            .set_context(nc.spec.context.clone());
        // Identical requests of concurrent launches share one fleet (upstream's batcher).
        let out = self
            .batchers
            .create_fleet(input)
            .await
            .map_err(|e| create_err("CreateFleetFailed", e.to_string()))?;
        let launched = out
            .instances
            .iter()
            .find_map(|i| i.instance_ids().first().map(|id| (id.clone(), i)));
        let zone_id_of = |zone: &str| {
            let subnet = status.subnets.iter().find(|s| s.zone == zone);
            subnet.map(|s| s.zone_id.clone())
        };
        for failure in launch_failures(&out.errors, &plan.capacity_type, zone_id_of) {
            self.observer().launch_failure(&failure);
        }
        let (ice, other) = classify_fleet_errors(&out.errors, &plan.capacity_type);
        for offering in &ice {
            match plan.reservation_of(&offering.instance_type, &offering.zone) {
                // A full reservation is counted empty until the next listing; the
                // type's other offerings stay available (upstream).
                Some(id) => self.reservations.availability().exhausted(id),
                None => self.unavailable.mark_unavailable(offering.clone()),
            }
        }
        let Some((id, fleet_instance)) = launched else {
            if let Some((code, message)) = other.first() {
                return Err(create_err(code, message.clone()));
            }
            return Err(CloudProviderError::InsufficientCapacity {
                message: format!(
                    "CreateFleet launched nothing for NodeClaim {:?} ({} offerings without capacity)",
                    claim.name(),
                    ice.len()
                ),
                offerings: ice,
            });
        };
        // DescribeInstances is authoritative for type, zone and image; the fleet response is
        // the fallback while the instance is not yet visible (eventual consistency).
        match self.describe_instances(vec![], vec![id.clone()]).await {
            Ok(found) => {
                if let Some(i) = found.into_iter().next() {
                    return Ok(i);
                }
            }
            Err(e) => tracing::debug!(error = %e, "instance not yet describable"),
        }
        let ov = fleet_instance
            .launch_template_and_overrides()
            .and_then(|l| l.overrides());
        let instance_type = fleet_instance
            .instance_type()
            .map(|t| t.as_str().to_string())
            .or_else(|| {
                ov.and_then(|o| o.instance_type())
                    .map(|t| t.as_str().to_string())
            })
            .unwrap_or_default();
        let chosen = plan
            .overrides
            .iter()
            .find(|o| o.instance_type == instance_type);
        Ok(Ec2Instance {
            id,
            zone: ov
                .and_then(|o| o.availability_zone())
                .map(str::to_string)
                .or_else(|| chosen.map(|c| c.zone.clone()))
                .unwrap_or_default(),
            subnet_id: chosen.map(|c| c.subnet_id.clone()).unwrap_or_default(),
            image_id: chosen.map(|c| c.image_id.clone()).unwrap_or_default(),
            security_group_ids: sgs,
            capacity_type: plan.capacity_type.clone(),
            capacity_reservation: None,
            state: "pending".into(),
            launch_time: Some(self.clock.now()),
            tags,
            instance_type,
        })
    }
}

#[async_trait::async_trait]
impl CloudProvider for AwsCloudProvider {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let nc = self.ready_node_class(&node_claim.spec.node_class_ref.name)?;
        let reqs = requirements_of(
            &format!("NodeClaim {:?}: spec.requirements", node_claim.name()),
            &node_claim.spec.requirements,
        )?;
        let requests = requests_of(node_claim)?;
        let types = self
            .node_class_instance_types(&nc)
            .await
            .map_err(CloudProviderError::from)?;
        // Standalone claims (no pool) get no overlays, as upstream.
        let types = match node_claim.node_pool() {
            Some(pool) => self
                .overlays
                .apply(pool, &types)
                .map_err(|e| create_err("NodeOverlayEvaluationPending", e.to_string()))?,
            None => types,
        };
        let prioritized = node_claim
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(PRICE_OVERLAY_APPLIED_ANNOTATION));
        let plan = match plan_launch(&reqs, &requests, &types, &nc.status_or_default()) {
            Ok(p) => p,
            Err(PlanError::NoImage) => {
                return Err(CloudProviderError::NodeClassNotReady {
                    name: nc.name().into(),
                    reason: PlanError::NoImage.to_string(),
                });
            }
            Err(e) => {
                return Err(CloudProviderError::InsufficientCapacity {
                    offerings: Vec::new(),
                    message: format!("NodeClaim {:?}: {e}", node_claim.name()),
                });
            }
        };
        let mut instance = self.launch(node_claim, &nc, &plan, prioritized).await?;
        if let (Some(kind), Some(id)) = (
            &plan.reservation,
            plan.reservation_of(&instance.instance_type, &instance.zone),
        ) {
            self.reservations.availability().launched(id);
            // DescribeInstances may not show the reservation yet; the fleet went into it.
            if instance.capacity_reservation.is_none() {
                instance.capacity_type = labels::CAPACITY_TYPE_RESERVED.into();
                instance.capacity_reservation = Some(ReservationDetails {
                    id: id.to_owned(),
                    reservation_type: kind.reservation_type.clone(),
                    interruptible: kind.interruptible,
                });
            }
        }
        let mut out = node_claim.clone();
        let it = types.iter().find(|t| t.name == instance.instance_type);
        let node_labels = out.metadata.labels.get_or_insert_with(BTreeMap::new);
        if let Some(it) = it {
            node_labels.extend(it.requirements.single_valued_labels());
        }
        node_labels.insert(labels::INSTANCE_TYPE.into(), instance.instance_type.clone());
        node_labels.insert(labels::ZONE.into(), instance.zone.clone());
        node_labels.insert(labels::CAPACITY_TYPE.into(), instance.capacity_type.clone());
        node_labels.insert(LABEL_NODE_CLASS.into(), nc.name().into());
        if let Some(r) = &instance.capacity_reservation {
            node_labels.extend(r.labels().map(|(k, v)| (k.to_owned(), v)));
        }
        let annotations = out.metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(ANNOTATION_NODE_CLASS_HASH.into(), nc.hash());
        annotations.insert(
            ANNOTATION_NODE_CLASS_HASH_VERSION.into(),
            NODE_CLASS_HASH_VERSION.into(),
        );
        // The garbage collector keeps a profile while any NodeClaim launched with it exists.
        annotations.insert(
            ANNOTATION_INSTANCE_PROFILE.into(),
            nc.status_or_default().instance_profile,
        );
        let status = out.status.get_or_insert_with(NodeClaimStatus::default);
        status.provider_id = instance.provider_id();
        status.image_id = instance.image_id.clone();
        if let Some(it) = it {
            status.capacity = to_k8s(&it.capacity);
            status.allocatable = to_k8s(&it.allocatable());
        }
        Ok(out)
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        // Once the instance is gone its reservation has room again (counted once: the
        // claim's finalizer goes with the `NotFound` answer).
        let gone = || {
            if let Some(id) = node_claim.label(labels::AWS_CAPACITY_RESERVATION_ID) {
                self.reservations.availability().terminated(id);
            }
        };
        let instance = match self.get_instance(node_claim.provider_id()).await {
            Err(e @ CloudProviderError::NotFound { .. }) => {
                gone();
                return Err(e);
            }
            other => other?,
        };
        match self
            .terminate_instances(std::slice::from_ref(&instance.id))
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => {
                // Upstream counts every failed TerminateInstances, not-found included.
                self.observer()
                    .termination_failure(&instance.zone, &self.zone_id(&instance));
                match e.is_not_found() {
                    true => {
                        gone();
                        Err(CloudProviderError::NotFound {
                            provider_id: node_claim.provider_id().to_string(),
                        })
                    }
                    false => Err(e.into()),
                }
            }
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        Ok(self.get_instance(provider_id).await?.to_node_claim())
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        Ok(self
            .list_instances()
            .await?
            .iter()
            .map(Ec2Instance::to_node_claim)
            .collect())
    }

    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let template = &node_pool.spec.template.spec;
        let nc = self.ready_node_class(&template.node_class_ref.name)?;
        let reqs = requirements_of(
            &format!(
                "NodePool {:?}: spec.template.spec.requirements",
                node_pool.metadata.name.as_deref().unwrap_or("")
            ),
            &template.requirements,
        )?;
        let types = self
            .node_class_instance_types(&nc)
            .await
            .map_err(CloudProviderError::from)?;
        Ok(types
            .into_iter()
            .filter(|it| it.requirements.intersects(&reqs).is_ok())
            .collect())
    }

    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<DriftReason>, CloudProviderError> {
        let Some(nc) = self.node_class(&node_claim.spec.node_class_ref.name) else {
            return Ok(None);
        };
        let instance = self.get_instance(node_claim.provider_id()).await?;
        // AMI drift compares with the image the type would boot now (its variant), so the
        // type comes from the same list launches use.
        let types = self
            .node_class_instance_types(&nc)
            .await
            .map_err(CloudProviderError::from)?;
        let it = types.iter().find(|t| t.name == instance.instance_type);
        Ok(drift_reason(&instance, it.map(|t| &**t), &nc, node_claim))
    }

    /// Karpenter v1.15.1's policies: the kubelet's `Ready` and the Node Monitoring Agent's
    /// conditions after 30 minutes, drained for at most 10; `AcceleratedHardwareReady=False`
    /// is the set's fallback (30 minutes), and its GPU XID codes known to clear on a reboot or
    /// to be fatal are repaired after 10 minutes, drained for at most 5 (upstream reboots the
    /// former with `RebootForRepair`; karpenter-rs replaces them).
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        use karpenter_cloudprovider::RepairAction;
        let thirty = Duration::from_secs(30 * 60);
        let ten = Duration::from_secs(10 * 60);
        let five = Duration::from_secs(5 * 60);
        let any = |t: &str, status| {
            RepairPolicy::replace(t, status, thirty)
                .for_reasons(".*")
                .drain_bound(ten)
        };
        let mut out = vec![
            any("Ready", ConditionStatus::False),
            any("Ready", ConditionStatus::Unknown),
        ];
        let gpu = "AcceleratedHardwareReady";
        out.push(
            RepairPolicy::replace(gpu, ConditionStatus::False, ten)
                .for_reasons(".*XID(46|48|54|62|63|95|109|110|136|140|143|155|156|158).*")
                .drain_bound(five),
        );
        out.push(
            RepairPolicy::replace(gpu, ConditionStatus::False, ten)
                .for_reasons(".*XID(64|74|79|119|120).*")
                .drain_bound(five),
        );
        out.push(RepairPolicy::replace(gpu, ConditionStatus::False, thirty).drain_bound(ten));
        for t in [
            "StorageReady",
            "NetworkingReady",
            "KernelReady",
            "ContainerRuntimeReady",
        ] {
            out.push(any(t, ConditionStatus::False));
        }
        debug_assert!(out.iter().all(|p| p.action == RepairAction::ReplaceNode));
        out
    }

    fn name(&self) -> &str {
        PROVIDER_NAME
    }
}
