//! Launch planning and request building: which (instance type, zone, subnet, AMI) overrides
//! a NodeClaim's CreateFleet request carries, the launch template per AMI and configuration,
//! the tags, and how CreateFleet's per-override errors become insufficient-capacity marks.
//! Everything here is pure, so requests are tested without an AWS endpoint.

use crate::ami::AmiMatcher;
use crate::nodeclass::{EC2NodeClass, EC2NodeClassStatus, LABEL_NODE_CLASS};
use crate::reserved_launch::{ReservationKind, ReservedCandidate, TemplateTarget};
use aws_sdk_ec2::types::{
    CreateFleetError, DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, InstanceType as Ec2Type, OnDemandOptionsRequest,
    ReservedCapacityOptionsRequest, ResourceType, SpotAllocationStrategy, SpotOptionsRequest, Tag,
    TagSpecification, TargetCapacitySpecificationRequest,
};
use karpenter_cloudprovider::OfferingRef;
use karpenter_cloudprovider::reserved::allows_reservation;
use karpenter_scheduling::Resources;
use karpenter_scheduling::labels;
use karpenter_scheduling::model::InstanceType;
use karpenter_scheduling::requirements::Requirements;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// CreateFleet accepts at most this many overrides; Karpenter sends the cheapest 60.
pub const MAX_OVERRIDES: usize = 60;

/// CreateFleet error codes meaning "no capacity for this offering right now": the offering is
/// marked unavailable and the launch may be retried elsewhere.
pub const UNFULFILLABLE_CAPACITY_CODES: [&str; 7] = [
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "ReservationCapacityExceeded",
];

/// Tag on instances naming the NodeClaim.
pub const TAG_NODECLAIM: &str = "karpenter.sh/nodeclaim";
/// Tag on instances naming the NodePool.
pub const TAG_NODEPOOL: &str = "karpenter.sh/nodepool";
/// Tag naming the EKS cluster.
pub const TAG_EKS_CLUSTER_NAME: &str = "eks:eks-cluster-name";
/// Tag on launch templates naming the cluster they belong to.
pub const TAG_LAUNCH_TEMPLATE_CLUSTER: &str = "karpenter.k8s.aws/cluster";
/// Prefix of launch template names.
pub const LAUNCH_TEMPLATE_PREFIX: &str = "karpenter.k8s.aws";

/// `kubernetes.io/cluster/<name>`.
pub fn cluster_tag_key(cluster_name: &str) -> String {
    format!("kubernetes.io/cluster/{cluster_name}")
}

/// One override of a fleet request.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchOverride {
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Subnet in that zone.
    pub subnet_id: String,
    /// The AMI the type boots (its architecture and accelerator variant).
    pub image_id: String,
    /// Offering price.
    pub price: f64,
    /// The capacity reservation a reserved override launches into.
    pub reservation_id: Option<String>,
}

/// What one NodeClaim's launch will ask EC2 for.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchPlan {
    /// `reserved`, `spot` or `on-demand`.
    pub capacity_type: String,
    /// Overrides, cheapest first, at most [`MAX_OVERRIDES`].
    pub overrides: Vec<LaunchOverride>,
    /// For a reserved launch, the kind of reservation every override goes into.
    pub reservation: Option<ReservationKind>,
}

impl LaunchPlan {
    /// The reservation the override for `instance_type` in `zone` launches into.
    pub fn reservation_of(&self, instance_type: &str, zone: &str) -> Option<&str> {
        self.overrides
            .iter()
            .find(|o| o.instance_type == instance_type && o.zone == zone)
            .and_then(|o| o.reservation_id.as_deref())
    }
}

/// Why no launch can be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// No instance type/offering satisfies the claim.
    #[error("no instance type satisfies the requirements and requests of the NodeClaim")]
    NoCompatibleOffering,
    /// The NodeClass resolved no subnet in any compatible zone.
    #[error("no subnet of the EC2NodeClass is in a zone the NodeClaim allows")]
    NoSubnet,
    /// The NodeClass resolved no AMI at all.
    #[error("the EC2NodeClass resolved no AMI")]
    NoImage,
    /// AMIs exist, but none serves a compatible instance type (say only GPU types are
    /// allowed and the family publishes no nvidia image for their architecture).
    #[error("no AMI of the EC2NodeClass serves a compatible instance type")]
    NoImageForInstanceTypes,
}

fn allows(reqs: &Requirements, key: &str, value: &str) -> bool {
    reqs.get(key).is_none_or(|r| r.has(value))
}

/// The first (most free IPs; status order) subnet of each zone.
pub fn subnet_per_zone(status: &EC2NodeClassStatus) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for s in &status.subnets {
        out.entry(s.zone.clone()).or_insert_with(|| s.id.clone());
    }
    out
}

/// Plans a launch: the instance types compatible with `reqs` whose allocatable fits
/// `requests`, in zones with a subnet, each with the AMI [`AmiMatcher`] picks for it (types
/// no AMI serves are left out). Karpenter's preference decides the capacity type: reserved
/// when the claim allows it and some reservation it allows has room (narrowed by
/// [`crate::reserved_launch::choose`]), else spot when allowed and available, else
/// on-demand. Overrides are sorted by price, then type and zone, and truncated to 60.
pub fn plan_launch(
    reqs: &Requirements,
    requests: &Resources,
    instance_types: &[Arc<InstanceType>],
    status: &EC2NodeClassStatus,
) -> Result<LaunchPlan, PlanError> {
    let subnets = subnet_per_zone(status);
    let images = AmiMatcher::new(&status.amis);
    let mut candidates: Vec<LaunchOverride> = Vec::new();
    let mut spot: Vec<LaunchOverride> = Vec::new();
    let mut reserved: Vec<ReservedCandidate> = Vec::new();
    let mut saw_type = false;
    let mut saw_offering = false;
    let mut saw_zone = false;
    let mut saw_image = false;
    for it in instance_types {
        if it.requirements.intersects(reqs).is_err() || !requests.fits(&it.allocatable()) {
            continue;
        }
        saw_type = true;
        // Each type boots the AMI built for it (GPU types the nvidia variant, and so on).
        let image = images.image_for(it);
        for o in it.offerings.iter().filter(|o| o.available) {
            if !allows(reqs, labels::ZONE, &o.zone)
                || !allows(reqs, labels::CAPACITY_TYPE, &o.capacity_type)
                || !allows_reservation(reqs, o)
            {
                continue;
            }
            saw_offering = true;
            let Some(subnet) = subnets.get(&o.zone) else {
                continue;
            };
            saw_zone = true;
            let Some(image) = image else {
                continue;
            };
            saw_image = true;
            let ov = LaunchOverride {
                instance_type: it.name.clone(),
                zone: o.zone.clone(),
                subnet_id: subnet.clone(),
                image_id: image.to_string(),
                price: o.price,
                reservation_id: None,
            };
            match (o.capacity_type.as_str(), &o.reservation) {
                (labels::CAPACITY_TYPE_SPOT, _) => spot.push(ov),
                (labels::CAPACITY_TYPE_ON_DEMAND, _) => candidates.push(ov),
                (labels::CAPACITY_TYPE_RESERVED, Some(r)) => reserved.push(ReservedCandidate {
                    ov: LaunchOverride {
                        reservation_id: Some(r.id.clone()),
                        ..ov
                    },
                    kind: ReservationKind::of(r),
                    capacity: r.capacity,
                }),
                _ => {}
            }
        }
    }
    // Upstream's launch filters: without minValues, metal and accelerated types only when
    // nothing else fits; spot only where it is cheaper than the cheapest on-demand.
    let exotic: BTreeSet<&str> = instance_types
        .iter()
        .filter(|it| is_exotic(it))
        .map(|it| it.name.as_str())
        .collect();
    let generic_only = |ovs: &mut Vec<LaunchOverride>| {
        if !reqs.has_min_values()
            && ovs
                .iter()
                .any(|o| !exotic.contains(o.instance_type.as_str()))
        {
            ovs.retain(|o| !exotic.contains(o.instance_type.as_str()));
        }
    };
    let (capacity_type, mut overrides, reservation) =
        if let Some((kind, mut ovs)) = crate::reserved_launch::choose(reserved) {
            generic_only(&mut ovs);
            (labels::CAPACITY_TYPE_RESERVED, ovs, Some(kind))
        } else {
            let mut both: Vec<LaunchOverride> = spot.iter().chain(&candidates).cloned().collect();
            generic_only(&mut both);
            let kept: BTreeSet<&str> = both.iter().map(|o| o.instance_type.as_str()).collect();
            let keep = |o: &LaunchOverride| kept.contains(o.instance_type.as_str());
            let (mut spot, candidates): (Vec<_>, Vec<_>) = (
                spot.iter().filter(|o| keep(o)).cloned().collect(),
                candidates.iter().filter(|o| keep(o)).cloned().collect(),
            );
            let cheapest_on_demand = candidates.iter().map(|o| o.price).reduce(f64::min);
            if let Some(limit) = cheapest_on_demand
                && !reqs.has_min_values()
            {
                spot.retain(|o| o.price <= limit);
            }
            if !spot.is_empty() {
                (labels::CAPACITY_TYPE_SPOT, spot, None)
            } else {
                (labels::CAPACITY_TYPE_ON_DEMAND, candidates, None)
            }
        };
    if overrides.is_empty() {
        return Err(if !saw_type || !saw_offering {
            PlanError::NoCompatibleOffering
        } else if !saw_zone {
            PlanError::NoSubnet
        } else if images.is_empty() {
            PlanError::NoImage
        } else if !saw_image {
            PlanError::NoImageForInstanceTypes
        } else {
            PlanError::NoCompatibleOffering
        });
    }
    overrides.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.instance_type.cmp(&b.instance_type))
            .then_with(|| a.zone.cmp(&b.zone))
    });
    overrides.truncate(MAX_OVERRIDES);
    Ok(LaunchPlan {
        capacity_type: capacity_type.to_string(),
        overrides,
        reservation,
    })
}

/// Upstream's exotic instance types: metal sizes, and types with GPUs, Neuron devices or
/// Gaudi accelerators.
pub fn is_exotic(it: &InstanceType) -> bool {
    const ACCELERATORS: [&str; 5] = [
        "aws.amazon.com/neuron",
        "aws.amazon.com/neuroncore",
        "amd.com/gpu",
        "nvidia.com/gpu",
        "habana.ai/gaudi",
    ];
    let metal = it
        .requirements
        .get(labels::AWS_INSTANCE_SIZE)
        .is_some_and(|r| r.values().any(|v| v.contains("metal")));
    metal || ACCELERATORS.iter().any(|r| it.capacity.get(r) > 0)
}

/// The tags an instance of `node_pool` is launched with: the NodeClass's tags, then
/// Karpenter's static ones (which win): nodepool, ec2nodeclass, the cluster ownership tag
/// and `eks:eks-cluster-name`. Nothing names the claim, so the launches of identical claims
/// are identical requests that CreateFleet batching can merge; `Name` and
/// `karpenter.sh/nodeclaim` come later ([`crate::tagging`]), as upstream adds them.
pub fn instance_tags(
    cluster_name: &str,
    node_class: &EC2NodeClass,
    node_pool: &str,
) -> BTreeMap<String, String> {
    let mut tags = node_class.spec.tags.clone();
    tags.insert(TAG_NODEPOOL.into(), node_pool.into());
    tags.insert(LABEL_NODE_CLASS.into(), node_class.name().into());
    tags.insert(cluster_tag_key(cluster_name), "owned".into());
    tags.insert(TAG_EKS_CLUSTER_NAME.into(), cluster_name.into());
    tags
}

/// A tag specification for `resource` with `tags`.
pub fn tag_specification(
    resource: ResourceType,
    tags: &BTreeMap<String, String>,
) -> TagSpecification {
    let mut spec = TagSpecification::builder().resource_type(resource);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(k).value(v).build());
    }
    spec.build()
}

/// What a launch template is made for: an image, and the reservation it targets.
pub type TemplateKey = (String, Option<String>);

impl LaunchOverride {
    /// The launch template this override launches with.
    pub fn template_key(&self) -> TemplateKey {
        (self.image_id.clone(), self.reservation_id.clone())
    }
}

/// The launch template configs of a plan: one config per image and reservation (so per
/// launch template), each with its overrides, in plan order. `templates` maps each
/// [`TemplateKey`] to a template name.
pub fn launch_template_configs(
    plan: &LaunchPlan,
    templates: &BTreeMap<TemplateKey, String>,
) -> Vec<FleetLaunchTemplateConfigRequest> {
    launch_template_configs_by(plan, |ov| templates.get(&ov.template_key()).cloned())
}

/// [`launch_template_configs`] with each override's template named by `template_of`
/// (overrides of one template share a config, in plan order; an override without one is
/// left out): for instance types whose kubelet values, and so user data, differ.
pub fn launch_template_configs_by(
    plan: &LaunchPlan,
    template_of: impl Fn(&LaunchOverride) -> Option<String>,
) -> Vec<FleetLaunchTemplateConfigRequest> {
    let mut by_template: Vec<(String, Vec<&LaunchOverride>)> = Vec::new();
    for ov in &plan.overrides {
        let Some(name) = template_of(ov) else {
            continue;
        };
        match by_template.iter_mut().find(|(k, _)| *k == name) {
            Some((_, list)) => list.push(ov),
            None => by_template.push((name, vec![ov])),
        }
    }
    by_template
        .into_iter()
        .map(|(name, ovs)| {
            let mut cfg = FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_name(name)
                        .version("$Latest")
                        .build(),
                );
            for ov in ovs {
                cfg = cfg.overrides(
                    FleetLaunchTemplateOverridesRequest::builder()
                        .instance_type(Ec2Type::from(ov.instance_type.as_str()))
                        .subnet_id(&ov.subnet_id)
                        .availability_zone(&ov.zone)
                        // As upstream, always sent; EC2 reads it only under a prioritized
                        // strategy (lower first), which a price overlay asks for.
                        .priority(ov.price)
                        .build(),
                );
            }
            cfg.build()
        })
        .collect()
}

/// The capacity specification and options of a one-instance `instant` fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetOptions {
    /// One instance, of the plan's capacity type.
    pub target: TargetCapacitySpecificationRequest,
    /// `price-capacity-optimized`, for spot.
    pub spot: Option<SpotOptionsRequest>,
    /// `lowest-price`, for on-demand and ordinary reservations.
    pub on_demand: Option<OnDemandOptionsRequest>,
    /// For interruptible reservations.
    pub reserved: Option<ReservedCapacityOptionsRequest>,
}

/// The fleet options of `plan`: `price-capacity-optimized` for spot, `lowest-price` for
/// on-demand and ordinary reservations, and the reservation's own market for capacity
/// blocks and interruptible reservations. `prioritized` (a claim whose options carry
/// overlaid prices) switches to `capacity-optimized-prioritized` and `prioritized`, so EC2
/// follows the overrides' priorities (their overlaid prices) instead of its own prices.
pub fn fleet_options(plan: &LaunchPlan, prioritized: bool) -> FleetOptions {
    let (target_type, reserved) = match &plan.reservation {
        Some(kind) => crate::reserved_launch::target_capacity_type(kind),
        None if plan.capacity_type == labels::CAPACITY_TYPE_SPOT => {
            (DefaultTargetCapacityType::Spot, None)
        }
        None => (DefaultTargetCapacityType::OnDemand, None),
    };
    let on_demand = (target_type == DefaultTargetCapacityType::OnDemand).then(|| {
        OnDemandOptionsRequest::builder()
            .allocation_strategy(if prioritized {
                FleetOnDemandAllocationStrategy::Prioritized
            } else {
                FleetOnDemandAllocationStrategy::LowestPrice
            })
            .build()
    });
    let spot = (target_type == DefaultTargetCapacityType::Spot).then(|| {
        SpotOptionsRequest::builder()
            .allocation_strategy(if prioritized {
                SpotAllocationStrategy::CapacityOptimizedPrioritized
            } else {
                SpotAllocationStrategy::PriceCapacityOptimized
            })
            .build()
    });
    FleetOptions {
        target: TargetCapacitySpecificationRequest::builder()
            .total_target_capacity(1)
            .default_target_capacity_type(target_type)
            .build(),
        spot,
        on_demand,
        reserved,
    }
}

/// Splits CreateFleet errors into the offerings with no capacity (to mark unavailable) and
/// the other errors (`code: message`).
pub fn classify_fleet_errors(
    errors: &[CreateFleetError],
    capacity_type: &str,
) -> (Vec<OfferingRef>, Vec<(String, String)>) {
    let mut ice = Vec::new();
    let mut other = Vec::new();
    for e in errors {
        let code = e.error_code().unwrap_or("Unknown").to_string();
        let message = e.error_message().unwrap_or_default().to_string();
        if UNFULFILLABLE_CAPACITY_CODES.contains(&code.as_str()) {
            let ov = e
                .launch_template_and_overrides()
                .and_then(|l| l.overrides());
            if let Some(ov) = ov
                && let (Some(it), Some(zone)) = (ov.instance_type(), ov.availability_zone())
            {
                ice.push(OfferingRef {
                    instance_type: it.as_str().to_string(),
                    zone: zone.to_string(),
                    capacity_type: capacity_type.to_string(),
                });
                continue;
            }
        }
        other.push((code, message));
    }
    ice.sort();
    ice.dedup();
    (ice, other)
}

/// The name of the launch template for a NodeClass, image, generated user data and
/// reservation target ([`TemplateTarget::name_key`]): `karpenter.k8s.aws/<hash>`, where the
/// hash covers everything that goes into the template, so an unchanged configuration reuses
/// its template and any change makes a new one.
pub fn launch_template_name(
    cluster_name: &str,
    node_class: &EC2NodeClass,
    image_id: &str,
    user_data: &str,
    security_groups: &[String],
    instance_profile: &str,
    target: &TemplateTarget<'_>,
) -> String {
    // ipPrefixCount is outside the drift hash but inside the template.
    let text = format!(
        "{cluster_name}|{}|{}|{:?}|{image_id}|{user_data}|{}|{instance_profile}{}",
        node_class.name(),
        node_class.hash(),
        node_class.spec.ip_prefix_count,
        security_groups.join(","),
        target.name_key()
    );
    format!(
        "{LAUNCH_TEMPLATE_PREFIX}/{}",
        karpenter_catalog::pricing::fnv1a_64(text.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodeclass::{AmiRequirement, AmiStatus, SubnetStatus};
    use aws_sdk_ec2::types::{FleetLaunchTemplateOverrides, LaunchTemplateAndOverridesResponse};
    use karpenter_scheduling::requirements::{NodeSelectorRequirement, Operator};

    fn status() -> EC2NodeClassStatus {
        EC2NodeClassStatus {
            subnets: vec![
                SubnetStatus {
                    id: "subnet-a1".into(),
                    zone: "us-east-1a".into(),
                    zone_id: "use1-az1".into(),
                },
                SubnetStatus {
                    id: "subnet-b1".into(),
                    zone: "us-east-1b".into(),
                    zone_id: "use1-az2".into(),
                },
                SubnetStatus {
                    id: "subnet-a2".into(),
                    zone: "us-east-1a".into(),
                    zone_id: "use1-az1".into(),
                },
            ],
            amis: ["amd64", "arm64"]
                .iter()
                .map(|a| AmiStatus {
                    id: format!("ami-{a}"),
                    name: String::new(),
                    deprecated: false,
                    requirements: vec![AmiRequirement {
                        key: labels::ARCH.into(),
                        operator: "In".into(),
                        values: vec![a.to_string()],
                    }],
                })
                .collect(),
            ..Default::default()
        }
    }

    fn reqs(items: &[(&str, &[&str])]) -> Requirements {
        let selectors: Vec<NodeSelectorRequirement> = items
            .iter()
            .map(|(k, v)| NodeSelectorRequirement {
                key: k.to_string(),
                operator: Operator::In,
                values: v.iter().map(|s| s.to_string()).collect(),
                min_values: None,
            })
            .collect();
        Requirements::from_node_selector(&selectors).expect("valid")
    }

    fn types() -> Vec<Arc<InstanceType>> {
        karpenter_catalog::default_instance_types().to_vec()
    }

    #[test]
    fn prefers_spot_and_sorts_by_price_with_at_most_60_overrides() {
        let spot_only = reqs(&[(labels::CAPACITY_TYPE, &["spot"])]);
        let plan =
            plan_launch(&spot_only, &Resources::default(), &types(), &status()).expect("plan");
        assert_eq!(plan.capacity_type, "spot");
        assert_eq!(plan.overrides.len(), MAX_OVERRIDES);
        assert!(plan.overrides.windows(2).all(|w| w[0].price <= w[1].price));
        // Only zones with a subnet, and the subnet listed first for the zone.
        for ov in &plan.overrides {
            match ov.zone.as_str() {
                "us-east-1a" => assert_eq!(ov.subnet_id, "subnet-a1"),
                "us-east-1b" => assert_eq!(ov.subnet_id, "subnet-b1"),
                z => panic!("zone without subnet {z}"),
            }
        }
    }

    #[test]
    fn on_demand_when_spot_is_not_allowed_and_images_follow_architecture() {
        let r = reqs(&[
            (labels::CAPACITY_TYPE, &["on-demand"]),
            (labels::INSTANCE_TYPE, &["m5.large", "m6g.large"]),
            (labels::ZONE, &["us-east-1b"]),
        ]);
        let plan = plan_launch(&r, &Resources::default(), &types(), &status()).expect("plan");
        assert_eq!(plan.capacity_type, "on-demand");
        let pairs: Vec<(&str, &str, &str)> = plan
            .overrides
            .iter()
            .map(|o| {
                (
                    o.instance_type.as_str(),
                    o.zone.as_str(),
                    o.image_id.as_str(),
                )
            })
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("m6g.large", "us-east-1b", "ami-arm64"),
                ("m5.large", "us-east-1b", "ami-amd64")
            ]
        );
        let cfgs = launch_template_configs(
            &plan,
            &[
                (("ami-amd64".to_string(), None), "lt-amd".to_string()),
                (("ami-arm64".to_string(), None), "lt-arm".to_string()),
            ]
            .into(),
        );
        assert_eq!(cfgs.len(), 2);
        let spec = cfgs[0].launch_template_specification().expect("spec");
        assert_eq!(spec.launch_template_name(), Some("lt-arm"));
        assert_eq!(cfgs[0].overrides()[0].subnet_id(), Some("subnet-b1"));
        let opts = fleet_options(&plan, false);
        assert_eq!(opts.target.total_target_capacity(), Some(1));
        assert!(opts.spot.is_none() && opts.reserved.is_none());
        assert_eq!(
            opts.on_demand
                .and_then(|o| o.allocation_strategy().cloned()),
            Some(FleetOnDemandAllocationStrategy::LowestPrice)
        );
        let spot_plan = LaunchPlan {
            capacity_type: "spot".into(),
            ..plan
        };
        let opts = fleet_options(&spot_plan, false);
        assert!(opts.on_demand.is_none());
        assert_eq!(
            opts.spot.and_then(|o| o.allocation_strategy().cloned()),
            Some(SpotAllocationStrategy::PriceCapacityOptimized)
        );
        // A claim with overlaid prices: EC2 follows the priorities, which are the prices.
        let opts = fleet_options(&spot_plan, true);
        assert_eq!(
            opts.spot.and_then(|o| o.allocation_strategy().cloned()),
            Some(SpotAllocationStrategy::CapacityOptimizedPrioritized)
        );
        let on_demand = LaunchPlan {
            capacity_type: "on-demand".into(),
            ..spot_plan
        };
        assert_eq!(
            fleet_options(&on_demand, true)
                .on_demand
                .and_then(|o| o.allocation_strategy().cloned()),
            Some(FleetOnDemandAllocationStrategy::Prioritized)
        );
        let priorities: Vec<Option<f64>> = cfgs
            .iter()
            .flat_map(|c| c.overrides())
            .map(|o| o.priority())
            .collect();
        let prices: Vec<Option<f64>> = cfgs
            .iter()
            .flat_map(|c| c.overrides())
            .map(|o| {
                let ov = on_demand.overrides.iter().find(|p| {
                    Some(p.instance_type.as_str()) == o.instance_type().map(|t| t.as_str())
                        && Some(p.zone.as_str()) == o.availability_zone()
                });
                ov.map(|p| p.price)
            })
            .collect();
        assert_eq!(priorities, prices);
        assert!(priorities.iter().all(Option::is_some));
    }

    #[test]
    fn unavailable_offerings_and_missing_subnets_are_skipped() {
        let mut its = types();
        for it in &mut its {
            if it.name == "m5.large" {
                let mut copy = InstanceType::clone(it);
                for o in &mut copy.offerings {
                    if o.zone == "us-east-1a" {
                        o.available = false;
                    }
                }
                *it = Arc::new(copy);
            }
        }
        let r = reqs(&[
            (labels::INSTANCE_TYPE, &["m5.large"]),
            (labels::CAPACITY_TYPE, &["on-demand"]),
        ]);
        let plan = plan_launch(&r, &Resources::default(), &its, &status()).expect("plan");
        assert!(plan.overrides.iter().all(|o| o.zone == "us-east-1b"));
        let r = reqs(&[(labels::ZONE, &["us-east-1c"])]);
        assert_eq!(
            plan_launch(&r, &Resources::default(), &its, &status()),
            Err(PlanError::NoSubnet)
        );
        let mut no_amis = status();
        no_amis.amis.clear();
        assert_eq!(
            plan_launch(&reqs(&[]), &Resources::default(), &its, &no_amis),
            Err(PlanError::NoImage)
        );
        let huge = Resources {
            cpu_millis: 10_000_000,
            ..Default::default()
        };
        assert_eq!(
            plan_launch(&reqs(&[]), &huge, &its, &status()),
            Err(PlanError::NoCompatibleOffering)
        );
    }

    /// The status of an `al2023@latest` class: per architecture a standard and an nvidia
    /// image, and a neuron image for amd64, with the requirements discovery writes.
    fn variant_status() -> EC2NodeClassStatus {
        EC2NodeClassStatus {
            amis: crate::ami::test_support::al2023_status(),
            ..status()
        }
    }

    #[test]
    fn generic_types_first_and_spot_only_below_the_cheapest_on_demand() {
        let cpu2 = Resources {
            cpu_millis: 2_000,
            ..Default::default()
        };
        // Both capacity types allowed: no spot offering costs more than the cheapest
        // on-demand one the claim could launch.
        let plan = plan_launch(&reqs(&[]), &cpu2, &types(), &status()).expect("plan");
        assert_eq!(plan.capacity_type, "spot");
        let cheapest_od = types()
            .iter()
            .filter(|it| {
                cpu2.fits(&it.allocatable()) && it.requirements.intersects(&reqs(&[])).is_ok()
            })
            .flat_map(|it| it.offerings.iter())
            .filter(|o| o.available && o.capacity_type == "on-demand")
            .filter(|o| ["us-east-1a", "us-east-1b"].contains(&o.zone.as_str()))
            .map(|o| o.price)
            .fold(f64::INFINITY, f64::min);
        assert!(
            plan.overrides.iter().all(|o| o.price <= cheapest_od),
            "{cheapest_od}"
        );
        // Metal and accelerated types only when nothing generic fits.
        assert!(plan.overrides.iter().all(|o| {
            let it = types()
                .into_iter()
                .find(|t| t.name == o.instance_type)
                .unwrap();
            !is_exotic(&it)
        }));
        let mixed = reqs(&[
            (labels::CAPACITY_TYPE, &["on-demand"]),
            (
                labels::INSTANCE_TYPE,
                &["m5.large", "g4dn.xlarge", "m5.metal"],
            ),
        ]);
        let plan = plan_launch(&mixed, &Resources::default(), &types(), &status()).expect("plan");
        assert!(plan.overrides.iter().all(|o| o.instance_type == "m5.large"));
        let gpu = Resources {
            extended: vec![("nvidia.com/gpu".into(), 1)],
            ..Default::default()
        };
        let plan = plan_launch(&mixed, &gpu, &types(), &status()).expect("plan");
        assert!(
            plan.overrides
                .iter()
                .all(|o| o.instance_type == "g4dn.xlarge")
        );
    }

    #[test]
    fn each_instance_type_launches_with_its_variant_and_one_template_per_image() {
        // minValues turns upstream's exotic-type filter off, so the GPU and Neuron types
        // launch beside m5.large.
        let mut r = reqs(&[
            (labels::CAPACITY_TYPE, &["on-demand"]),
            (labels::ZONE, &["us-east-1a"]),
        ]);
        r.add(
            karpenter_scheduling::requirements::Requirement::new(
                labels::INSTANCE_TYPE,
                Operator::In,
                ["m5.large", "g4dn.xlarge", "inf2.xlarge", "g5g.xlarge"].map(String::from),
            )
            .expect("valid")
            .with_min_values(Some(1)),
        );
        let plan =
            plan_launch(&r, &Resources::default(), &types(), &variant_status()).expect("plan");
        let images: BTreeMap<&str, &str> = plan
            .overrides
            .iter()
            .map(|o| (o.instance_type.as_str(), o.image_id.as_str()))
            .collect();
        assert_eq!(
            images,
            BTreeMap::from([
                ("g4dn.xlarge", "ami-amd64-nvidia"),
                ("g5g.xlarge", "ami-arm64-nvidia"),
                ("inf2.xlarge", "ami-amd64-neuron"),
                ("m5.large", "ami-amd64-standard"),
            ])
        );
        let templates: BTreeMap<TemplateKey, String> = images
            .values()
            .map(|id| ((id.to_string(), None), format!("lt-{id}")))
            .collect();
        let cfgs = launch_template_configs(&plan, &templates);
        assert_eq!(cfgs.len(), 4);
        for cfg in &cfgs {
            let name = cfg
                .launch_template_specification()
                .and_then(|s| s.launch_template_name())
                .expect("template name");
            for ov in cfg.overrides() {
                let it = ov.instance_type().expect("type").as_str();
                assert_eq!(name, format!("lt-{}", images[it]), "{it}");
            }
        }
    }

    #[test]
    fn types_no_image_serves_are_left_out() {
        // Without the arm64 nvidia image, g5g cannot launch, but the other types still do.
        let mut st = variant_status();
        st.amis.retain(|a| a.id != "ami-arm64-nvidia");
        let r = reqs(&[
            (labels::CAPACITY_TYPE, &["on-demand"]),
            (labels::INSTANCE_TYPE, &["m5.large", "g5g.xlarge"]),
        ]);
        let plan = plan_launch(&r, &Resources::default(), &types(), &st).expect("plan");
        assert!(plan.overrides.iter().all(|o| o.instance_type == "m5.large"));
        let only_g5g = reqs(&[(labels::INSTANCE_TYPE, &["g5g.xlarge"])]);
        assert_eq!(
            plan_launch(&only_g5g, &Resources::default(), &types(), &st),
            Err(PlanError::NoImageForInstanceTypes)
        );
    }

    /// The catalogue with reservations cr-a (m5.large, 2 left, us-east-1a), cr-b (m5.large,
    /// 5 left, us-east-1a), cr-full (c5.large, none left) and a capacity block cr-block
    /// (p5.48xlarge, us-east-1b).
    fn reserved_types() -> Vec<Arc<InstanceType>> {
        use crate::capacity_reservation::{
            Availability, CapacityReservationStatus, TYPE_CAPACITY_BLOCK, with_reserved_offerings,
        };
        let cr = |id: &str, it: &str, zone: &str, kind: &str| CapacityReservationStatus {
            availability_zone: zone.into(),
            id: id.into(),
            instance_match_criteria: "targeted".into(),
            instance_type: it.into(),
            owner_id: "123456789012".into(),
            reservation_type: kind.into(),
            state: "active".into(),
            ..Default::default()
        };
        let availability = Availability::default();
        availability.sync([
            ("cr-a".to_owned(), 2),
            ("cr-b".to_owned(), 5),
            ("cr-full".to_owned(), 0),
            ("cr-block".to_owned(), 1),
        ]);
        with_reserved_offerings(
            types(),
            &[
                cr("cr-a", "m5.large", "us-east-1a", "default"),
                cr("cr-b", "m5.large", "us-east-1a", "default"),
                cr("cr-full", "c5.large", "us-east-1a", "default"),
                cr("cr-block", "p5.48xlarge", "us-east-1b", TYPE_CAPACITY_BLOCK),
            ],
            &availability,
        )
    }

    #[test]
    fn reserved_launches_go_into_the_reservation_with_most_room() {
        let its = reserved_types();
        // A claim the solver pinned to its reservations.
        let r = reqs(&[
            (labels::CAPACITY_TYPE, &["reserved"]),
            (labels::INSTANCE_TYPE, &["m5.large"]),
            (labels::AWS_CAPACITY_RESERVATION_ID, &["cr-a", "cr-b"]),
        ]);
        let plan = plan_launch(&r, &Resources::default(), &its, &status()).expect("plan");
        assert_eq!(plan.capacity_type, "reserved");
        let kind = plan.reservation.clone().expect("a reservation kind");
        assert_eq!(
            (kind.reservation_type.as_str(), kind.interruptible),
            ("default", false)
        );
        let ovs: Vec<(&str, Option<&str>)> = plan
            .overrides
            .iter()
            .map(|o| (o.zone.as_str(), o.reservation_id.as_deref()))
            .collect();
        assert_eq!(ovs, vec![("us-east-1a", Some("cr-b"))]);
        assert_eq!(plan.reservation_of("m5.large", "us-east-1a"), Some("cr-b"));
        let cfgs = launch_template_configs(
            &plan,
            &[(("ami-amd64".into(), Some("cr-b".into())), "lt-cr-b".into())].into(),
        );
        assert_eq!(cfgs.len(), 1);
        let fleet = fleet_options(&plan, false);
        assert_eq!(
            fleet.target.default_target_capacity_type(),
            Some(&DefaultTargetCapacityType::OnDemand)
        );
        assert!(fleet.on_demand.is_some() && fleet.reserved.is_none());

        // Reserved first whenever the claim allows it (Karpenter's order).
        let any = reqs(&[(labels::INSTANCE_TYPE, &["m5.large"])]);
        let plan = plan_launch(&any, &Resources::default(), &its, &status()).expect("plan");
        assert_eq!(plan.capacity_type, "reserved");

        // A claim that does not allow reserved capacity never lands in a reservation.
        let od = reqs(&[
            (labels::CAPACITY_TYPE, &["on-demand"]),
            (labels::INSTANCE_TYPE, &["m5.large"]),
        ]);
        let plan = plan_launch(&od, &Resources::default(), &its, &status()).expect("plan");
        assert_eq!(plan.capacity_type, "on-demand");
        assert!(plan.overrides.iter().all(|o| o.reservation_id.is_none()));
        assert!(plan.reservation.is_none());
    }

    #[test]
    fn full_reservations_fall_back_and_capacity_blocks_use_their_market() {
        let its = reserved_types();
        // cr-full has no room: a claim pinned to it has nothing to launch.
        let pinned = reqs(&[
            (labels::CAPACITY_TYPE, &["reserved"]),
            (labels::AWS_CAPACITY_RESERVATION_ID, &["cr-full"]),
        ]);
        assert_eq!(
            plan_launch(&pinned, &Resources::default(), &its, &status()),
            Err(PlanError::NoCompatibleOffering)
        );
        // A claim that also allows on-demand falls back to it.
        let c5 = reqs(&[
            (labels::CAPACITY_TYPE, &["reserved", "on-demand"]),
            (labels::INSTANCE_TYPE, &["c5.large"]),
        ]);
        let plan = plan_launch(&c5, &Resources::default(), &its, &status()).expect("plan");
        assert_eq!(plan.capacity_type, "on-demand");

        let block = reqs(&[
            (labels::CAPACITY_TYPE, &["reserved"]),
            (labels::INSTANCE_TYPE, &["p5.48xlarge"]),
        ]);
        let plan = plan_launch(&block, &Resources::default(), &its, &status()).expect("plan");
        assert_eq!(
            plan.reservation_of("p5.48xlarge", "us-east-1b"),
            Some("cr-block")
        );
        assert!(
            plan.reservation
                .as_ref()
                .is_some_and(|k| k.is_capacity_block())
        );
        let fleet = fleet_options(&plan, false);
        assert_eq!(
            fleet.target.default_target_capacity_type(),
            Some(&DefaultTargetCapacityType::CapacityBlock)
        );
        assert!(fleet.on_demand.is_none() && fleet.spot.is_none());
    }

    #[test]
    fn fleet_errors_are_classified() {
        let err = |code: &str, it: &str| {
            CreateFleetError::builder()
                .error_code(code)
                .error_message("no capacity")
                .launch_template_and_overrides(
                    LaunchTemplateAndOverridesResponse::builder()
                        .overrides(
                            FleetLaunchTemplateOverrides::builder()
                                .instance_type(Ec2Type::from(it))
                                .availability_zone("us-east-1a")
                                .build(),
                        )
                        .build(),
                )
                .build()
        };
        let (ice, other) = classify_fleet_errors(
            &[
                err("InsufficientInstanceCapacity", "m5.large"),
                err("InsufficientInstanceCapacity", "m5.large"),
                err("UnauthorizedOperation", "c5.large"),
                err("MaxSpotInstanceCountExceeded", "c5.large"),
            ],
            "spot",
        );
        assert_eq!(ice.len(), 2);
        assert_eq!(ice[0].instance_type, "c5.large");
        assert_eq!(ice[0].capacity_type, "spot");
        assert_eq!(
            other,
            vec![(
                "UnauthorizedOperation".to_string(),
                "no capacity".to_string()
            )]
        );
    }

    const OPEN: TemplateTarget<'static> = TemplateTarget::Open;

    #[test]
    fn tags_and_template_names() {
        let mut nc: EC2NodeClass = crate::nodeclass::from_yaml(
            "metadata: {name: default}\nspec: {tags: {team: a, Name: custom}}",
        )
        .expect("parses");
        let tags = instance_tags("demo", &nc, "general");
        assert_eq!(tags["karpenter.sh/nodepool"], "general");
        assert!(!tags.contains_key("karpenter.sh/nodeclaim"));
        assert_eq!(tags["karpenter.k8s.aws/ec2nodeclass"], "default");
        assert_eq!(tags["kubernetes.io/cluster/demo"], "owned");
        assert_eq!(tags["eks:eks-cluster-name"], "demo");
        assert_eq!(tags["team"], "a");
        assert_eq!(tags["Name"], "custom");
        let spec = tag_specification(ResourceType::Instance, &tags);
        assert_eq!(spec.tags().len(), tags.len());
        let a = launch_template_name("demo", &nc, "ami-1", "ud", &["sg-1".into()], "p", &OPEN);
        assert!(a.starts_with("karpenter.k8s.aws/"));
        assert_eq!(
            a,
            launch_template_name("demo", &nc, "ami-1", "ud", &["sg-1".into()], "p", &OPEN)
        );
        assert_ne!(
            a,
            launch_template_name("demo", &nc, "ami-2", "ud", &["sg-1".into()], "p", &OPEN)
        );
        nc.spec.detailed_monitoring = Some(true);
        let b = launch_template_name("demo", &nc, "ami-1", "ud", &["sg-1".into()], "p", &OPEN);
        assert_ne!(a, b);
        // ipPrefixCount is not in the drift hash, but the template must change with it.
        nc.spec.ip_prefix_count = Some(2);
        assert_ne!(
            b,
            launch_template_name("demo", &nc, "ami-1", "ud", &["sg-1".into()], "p", &OPEN)
        );
    }
}
