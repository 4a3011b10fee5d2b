//! EC2 instances as the provider sees them, their NodeClaim form, drift, and garbage
//! collection of leaked instances.

use crate::ami::AmiMatcher;
use crate::launch::{TAG_NODECLAIM, TAG_NODEPOOL};
use crate::nodeclass::{
    ANNOTATION_NODE_CLASS_HASH, ANNOTATION_NODE_CLASS_HASH_VERSION, EC2NodeClass, LABEL_NODE_CLASS,
    NODE_CLASS_HASH_VERSION,
};
use karpenter_cloudprovider::DriftReason;
use karpenter_cloudprovider::v1::{NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClassReference};
use karpenter_scheduling::labels;
use karpenter_scheduling::model::InstanceType;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

/// An EC2 instance, reduced to what Karpenter needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Ec2Instance {
    /// Instance id.
    pub id: String,
    /// Instance type.
    pub instance_type: String,
    /// Availability zone.
    pub zone: String,
    /// Subnet.
    pub subnet_id: String,
    /// AMI.
    pub image_id: String,
    /// Attached security groups, sorted.
    pub security_group_ids: Vec<String>,
    /// `spot`, `on-demand` or `reserved`.
    pub capacity_type: String,
    /// The capacity reservation a `reserved` instance runs in.
    pub capacity_reservation: Option<ReservationDetails>,
    /// `pending`, `running`, `stopping`, `stopped`, `shutting-down`, `terminated`.
    pub state: String,
    /// When EC2 launched it.
    pub launch_time: Option<SystemTime>,
    /// Tags.
    pub tags: BTreeMap<String, String>,
}

/// The capacity reservation an instance was launched into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationDetails {
    /// Reservation id (`cr-…`).
    pub id: String,
    /// `default` or `capacity-block`.
    pub reservation_type: String,
    /// Whether EC2 may reclaim the instance.
    pub interruptible: bool,
}

impl ReservationDetails {
    /// The node labels of an instance in this reservation.
    pub fn labels(&self) -> [(&'static str, String); 3] {
        [
            (labels::AWS_CAPACITY_RESERVATION_ID, self.id.clone()),
            (
                labels::AWS_CAPACITY_RESERVATION_TYPE,
                self.reservation_type.clone(),
            ),
            (
                labels::AWS_CAPACITY_RESERVATION_INTERRUPTIBLE,
                self.interruptible.to_string(),
            ),
        ]
    }
}

/// The capacity type of an SDK instance, as upstream reads it: spot when it came from a spot
/// request; `reserved` (with the `ReservedCapacity` gate on) when it runs in a capacity
/// reservation it was launched to target only reservations; on-demand otherwise. A
/// reservation that ended leaves its instances running as on-demand: the reservation id
/// disappears, and the capacity type with it.
fn capacity_type_of(
    i: &aws_sdk_ec2::types::Instance,
    reserved_capacity: bool,
) -> (String, Option<ReservationDetails>) {
    use aws_sdk_ec2::types::{CapacityReservationPreference, InstanceLifecycleType};
    if i.spot_instance_request_id().is_some()
        || i.instance_lifecycle() == Some(&InstanceLifecycleType::Spot)
    {
        return (labels::CAPACITY_TYPE_SPOT.into(), None);
    }
    let targeted = i
        .capacity_reservation_specification()
        .and_then(|s| s.capacity_reservation_preference())
        == Some(&CapacityReservationPreference::CapacityReservationsOnly);
    match i.capacity_reservation_id() {
        Some(id) if reserved_capacity && targeted => {
            let lifecycle = i.instance_lifecycle();
            let details = ReservationDetails {
                id: id.to_owned(),
                reservation_type: if lifecycle == Some(&InstanceLifecycleType::CapacityBlock) {
                    karpenter_cloudprovider::reserved::RESERVATION_TYPE_CAPACITY_BLOCK
                } else {
                    karpenter_cloudprovider::reserved::RESERVATION_TYPE_DEFAULT
                }
                .into(),
                interruptible: lifecycle
                    == Some(&InstanceLifecycleType::InterruptibleCapacityReservation),
            };
            (labels::CAPACITY_TYPE_RESERVED.into(), Some(details))
        }
        _ => (labels::CAPACITY_TYPE_ON_DEMAND.into(), None),
    }
}

/// `aws:///<zone>/<instance id>`.
pub fn provider_id(zone: &str, instance_id: &str) -> String {
    format!("aws:///{zone}/{instance_id}")
}

/// The instance id of a provider id (`aws:///us-east-1a/i-0123` → `i-0123`); `None` when the
/// text is not an AWS provider id.
pub fn parse_provider_id(provider_id: &str) -> Option<&str> {
    let rest = provider_id.strip_prefix("aws://")?;
    let id = rest.rsplit('/').next()?;
    id.starts_with("i-").then_some(id)
}

impl Ec2Instance {
    /// From an SDK instance; `None` without an id. `reserved_capacity` is the
    /// `ReservedCapacity` gate: off, no instance is `reserved`.
    pub fn from_sdk(i: &aws_sdk_ec2::types::Instance, reserved_capacity: bool) -> Option<Self> {
        let (capacity_type, capacity_reservation) = capacity_type_of(i, reserved_capacity);
        let mut sgs: Vec<String> = i
            .security_groups()
            .iter()
            .filter_map(|g| g.group_id().map(str::to_string))
            .collect();
        sgs.sort();
        Some(Self {
            id: i.instance_id()?.to_string(),
            instance_type: i
                .instance_type()
                .map(|t| t.as_str().to_string())
                .unwrap_or_default(),
            zone: i
                .placement()
                .and_then(|p| p.availability_zone())
                .unwrap_or_default()
                .to_string(),
            subnet_id: i.subnet_id().unwrap_or_default().to_string(),
            image_id: i.image_id().unwrap_or_default().to_string(),
            security_group_ids: sgs,
            capacity_type,
            capacity_reservation,
            state: i
                .state()
                .and_then(|s| s.name())
                .map(|n| n.as_str().to_string())
                .unwrap_or_default(),
            launch_time: i.launch_time().and_then(|t| SystemTime::try_from(*t).ok()),
            tags: i
                .tags()
                .iter()
                .filter_map(|t| {
                    Some((
                        t.key()?.to_string(),
                        t.value().unwrap_or_default().to_string(),
                    ))
                })
                .collect(),
        })
    }

    /// The provider id.
    pub fn provider_id(&self) -> String {
        provider_id(&self.zone, &self.id)
    }

    /// Whether the instance is gone or going (`shutting-down`, `terminated`).
    pub fn is_terminating(&self) -> bool {
        matches!(self.state.as_str(), "shutting-down" | "terminated")
    }

    /// The instance as a NodeClaim, as Karpenter reconstructs claims for garbage collection:
    /// name from the `karpenter.sh/nodeclaim` tag, labels for type, zone, capacity type and
    /// pool, the NodeClass reference from its tag, and the provider and image ids.
    pub fn to_node_claim(&self) -> NodeClaim {
        let mut labels_map = BTreeMap::new();
        labels_map.insert(
            labels::INSTANCE_TYPE.to_string(),
            self.instance_type.clone(),
        );
        labels_map.insert(labels::ZONE.to_string(), self.zone.clone());
        labels_map.insert(
            labels::CAPACITY_TYPE.to_string(),
            self.capacity_type.clone(),
        );
        if let Some(pool) = self.tags.get(TAG_NODEPOOL) {
            labels_map.insert(labels::NODEPOOL.to_string(), pool.clone());
        }
        if let Some(r) = &self.capacity_reservation {
            labels_map.extend(r.labels().map(|(k, v)| (k.to_owned(), v)));
        }
        let spec = NodeClaimSpec {
            taints: Vec::new(),
            startup_taints: Vec::new(),
            requirements: Vec::new(),
            resources: Default::default(),
            node_class_ref: NodeClassReference {
                group: crate::nodeclass::GROUP.into(),
                kind: crate::nodeclass::KIND.into(),
                name: self.tags.get(LABEL_NODE_CLASS).cloned().unwrap_or_default(),
            },
            termination_grace_period: None,
            expire_after: karpenter_cloudprovider::v1::default_expire_after(),
        };
        let mut claim = NodeClaim::new(
            self.tags.get(TAG_NODECLAIM).map_or("", String::as_str),
            spec,
        );
        claim.metadata.labels = Some(labels_map);
        claim.metadata.creation_timestamp = self.launch_time.and_then(|t| {
            k8s_openapi::jiff::Timestamp::try_from(t)
                .ok()
                .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)
        });
        if self.is_terminating() {
            claim.metadata.deletion_timestamp = claim.metadata.creation_timestamp.clone();
        }
        claim.status = Some(NodeClaimStatus {
            provider_id: self.provider_id(),
            image_id: self.image_id.clone(),
            ..Default::default()
        });
        claim
    }
}

/// `AMIDrift`.
pub const DRIFT_AMI: &str = "AMIDrift";
/// `SubnetDrift`.
pub const DRIFT_SUBNET: &str = "SubnetDrift";
/// `SecurityGroupDrift`.
pub const DRIFT_SECURITY_GROUP: &str = "SecurityGroupDrift";
/// `NodeClassDrift` (the static hash changed).
pub const DRIFT_NODE_CLASS: &str = "NodeClassDrift";

/// Why `instance`, launched for `claim` from `node_class`, no longer matches the class:
/// its AMI is not the one the class would launch its type with now, its subnet not among the
/// resolved subnets, its security groups differ from the resolved set, or the claim's hash
/// annotation (same hash version) differs from the class's hash. Checks run in that order
/// (Karpenter's).
///
/// `instance_type` is the instance's type as the provider offers it. With it, the AMI check
/// is Karpenter's: the image [`AmiMatcher`] picks for that type (so a GPU node booted from a
/// standard image drifts to the nvidia one). Without it (the type is no longer offered), the
/// instance's image only has to be among the resolved AMIs.
pub fn drift_reason(
    instance: &Ec2Instance,
    instance_type: Option<&InstanceType>,
    node_class: &EC2NodeClass,
    claim: &NodeClaim,
) -> Option<DriftReason> {
    let status = node_class.status_or_default();
    if !status.amis.is_empty() {
        let current = match instance_type {
            Some(it) => AmiMatcher::new(&status.amis).image_for(it) == Some(&instance.image_id),
            None => status.amis.iter().any(|a| a.id == instance.image_id),
        };
        if !current {
            return Some(DriftReason::new(DRIFT_AMI));
        }
    }
    if !status.subnets.is_empty() && !status.subnets.iter().any(|s| s.id == instance.subnet_id) {
        return Some(DriftReason::new(DRIFT_SUBNET));
    }
    // Every VPC instance has at least one group, so an empty list means EC2 did not report
    // them (moto's CreateFleet drops the template's groups); that is not drift.
    if !status.security_groups.is_empty() && !instance.security_group_ids.is_empty() {
        let want: BTreeSet<&str> = status
            .security_groups
            .iter()
            .map(|g| g.id.as_str())
            .collect();
        let have: BTreeSet<&str> = instance
            .security_group_ids
            .iter()
            .map(String::as_str)
            .collect();
        if want != have {
            return Some(DriftReason::new(DRIFT_SECURITY_GROUP));
        }
    }
    let same_version =
        claim.annotation(ANNOTATION_NODE_CLASS_HASH_VERSION) == Some(NODE_CLASS_HASH_VERSION);
    if same_version
        && let Some(hash) = claim.annotation(ANNOTATION_NODE_CLASS_HASH)
        && hash != node_class.hash()
    {
        return Some(DriftReason::new(DRIFT_NODE_CLASS));
    }
    None
}

/// Upstream's hash controller for a NodeClaim launched from `node_class`: when the claim's
/// hash was written by another hash version (an older karpenter-rs, or Karpenter itself),
/// its hash cannot be compared, so the current version is written, and with it the class's
/// current hash unless the claim already has a `Drifted` condition (which then stays, since
/// whether it still holds cannot be told). `None` when the claim is current. This is what
/// keeps an upgrade that changes the hash from drifting every node.
pub fn hash_version_update(
    claim: &NodeClaim,
    node_class: &EC2NodeClass,
) -> Option<BTreeMap<String, String>> {
    use karpenter_cloudprovider::v1::StatusConditions as _;
    if claim.annotation(ANNOTATION_NODE_CLASS_HASH_VERSION) == Some(NODE_CLASS_HASH_VERSION) {
        return None;
    }
    let mut annotations = BTreeMap::from([(
        ANNOTATION_NODE_CLASS_HASH_VERSION.to_owned(),
        NODE_CLASS_HASH_VERSION.to_owned(),
    )]);
    if claim.condition("Drifted").is_none() {
        annotations.insert(ANNOTATION_NODE_CLASS_HASH.to_owned(), node_class.hash());
    }
    Some(annotations)
}

/// Instances to terminate as leaked: not terminating, launched more than `min_age` before
/// `now`, and known to no NodeClaim (by provider id or instance id). Karpenter's garbage
/// collector uses a 30-second grace so a launch in flight is never collected. Sorted by id.
pub fn leaked_instances(
    instances: &[Ec2Instance],
    claimed_provider_ids: &BTreeSet<String>,
    now: SystemTime,
    min_age: Duration,
) -> Vec<String> {
    let claimed_ids: BTreeSet<&str> = claimed_provider_ids
        .iter()
        .filter_map(|p| parse_provider_id(p))
        .collect();
    let mut out: Vec<String> = instances
        .iter()
        .filter(|i| !i.is_terminating())
        .filter(|i| !claimed_ids.contains(i.id.as_str()))
        .filter(|i| {
            i.launch_time
                .is_some_and(|t| now.duration_since(t).is_ok_and(|age| age > min_age))
        })
        .map(|i| i.id.clone())
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_of_another_hash_version_are_restamped_not_drifted() {
        use karpenter_cloudprovider::v1::StatusConditions as _;
        let nc: EC2NodeClass =
            crate::nodeclass::from_yaml("metadata: {name: nc}\nspec: {userData: a}")
                .expect("parses");
        let mut claim = inst("i-1", 5, "running").to_node_claim();
        let annotations = claim.metadata.annotations.get_or_insert_with(BTreeMap::new);
        // Written by Karpenter v1.15 (or karpenter-rs before the open kubelet map).
        annotations.insert(
            ANNOTATION_NODE_CLASS_HASH.into(),
            "11148166120438674859".into(),
        );
        annotations.insert(ANNOTATION_NODE_CLASS_HASH_VERSION.into(), "v6".into());
        let update = hash_version_update(&claim, &nc).expect("re-stamped");
        assert_eq!(
            update[ANNOTATION_NODE_CLASS_HASH_VERSION],
            NODE_CLASS_HASH_VERSION
        );
        assert_eq!(update[ANNOTATION_NODE_CLASS_HASH], nc.hash());
        // Meanwhile the hash is not compared: no static drift.
        let mut current = claim.clone();
        current
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .extend(update);
        assert_eq!(hash_version_update(&current, &nc), None);
        // A claim already drifted keeps its hash (and so its drift).
        claim.set_true(
            "Drifted",
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        );
        let update = hash_version_update(&claim, &nc).expect("re-stamped");
        assert!(
            !update.contains_key(ANNOTATION_NODE_CLASS_HASH),
            "{update:?}"
        );
    }

    #[test]
    fn reserved_instances_are_read_as_upstream_reads_them() {
        use aws_sdk_ec2::types::{
            CapacityReservationPreference, CapacityReservationSpecificationResponse, Instance,
            InstanceLifecycleType,
        };
        let targeted = CapacityReservationSpecificationResponse::builder()
            .capacity_reservation_preference(
                CapacityReservationPreference::CapacityReservationsOnly,
            )
            .build();
        let base = || {
            Instance::builder()
                .instance_id("i-1")
                .capacity_reservation_id("cr-1")
                .capacity_reservation_specification(targeted.clone())
        };
        let i = Ec2Instance::from_sdk(&base().build(), true).expect("an instance");
        assert_eq!(i.capacity_type, labels::CAPACITY_TYPE_RESERVED);
        let r = i.capacity_reservation.clone().expect("its reservation");
        assert_eq!(
            (r.id.as_str(), r.reservation_type.as_str(), r.interruptible),
            ("cr-1", "default", false)
        );
        let claim = i.to_node_claim();
        assert_eq!(
            claim.label(labels::AWS_CAPACITY_RESERVATION_ID),
            Some("cr-1")
        );
        assert_eq!(claim.label(labels::CAPACITY_TYPE), Some("reserved"));

        let block = base()
            .instance_lifecycle(InstanceLifecycleType::CapacityBlock)
            .build();
        let r = Ec2Instance::from_sdk(&block, true)
            .and_then(|i| i.capacity_reservation)
            .expect("a block");
        assert_eq!(r.reservation_type, "capacity-block");
        let interruptible = base()
            .instance_lifecycle(InstanceLifecycleType::InterruptibleCapacityReservation)
            .build();
        assert!(
            Ec2Instance::from_sdk(&interruptible, true)
                .and_then(|i| i.capacity_reservation)
                .is_some_and(|r| r.interruptible)
        );

        // Gate off, or an instance that only happened to use an open reservation: on-demand.
        let off = Ec2Instance::from_sdk(&base().build(), false).expect("an instance");
        assert_eq!(
            (off.capacity_type.as_str(), off.capacity_reservation),
            ("on-demand", None)
        );
        let open = Instance::builder()
            .instance_id("i-2")
            .capacity_reservation_id("cr-1")
            .build();
        let open = Ec2Instance::from_sdk(&open, true).expect("an instance");
        assert_eq!(open.capacity_type, "on-demand");
        let spot = Instance::builder()
            .instance_id("i-3")
            .instance_lifecycle(InstanceLifecycleType::Spot)
            .build();
        assert_eq!(
            Ec2Instance::from_sdk(&spot, true)
                .expect("spot")
                .capacity_type,
            "spot"
        );
    }
    use crate::nodeclass::{AmiRequirement, AmiStatus, SecurityGroupStatus, SubnetStatus};

    fn inst(id: &str, age_secs: u64, state: &str) -> Ec2Instance {
        Ec2Instance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            subnet_id: "subnet-1".into(),
            image_id: "ami-1".into(),
            security_group_ids: vec!["sg-1".into()],
            capacity_type: "spot".into(),
            capacity_reservation: None,
            state: state.into(),
            launch_time: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1000 - age_secs)),
            tags: [
                (TAG_NODECLAIM.to_string(), "default-x".to_string()),
                (TAG_NODEPOOL.to_string(), "default".to_string()),
                (LABEL_NODE_CLASS.to_string(), "nc".to_string()),
            ]
            .into(),
        }
    }

    #[test]
    fn provider_ids() {
        assert_eq!(
            provider_id("us-east-1a", "i-0abc"),
            "aws:///us-east-1a/i-0abc"
        );
        assert_eq!(
            parse_provider_id("aws:///us-east-1a/i-0abc"),
            Some("i-0abc")
        );
        assert_eq!(parse_provider_id("fake://us-east-1a/i-0abc"), None);
        assert_eq!(parse_provider_id("aws:///us-east-1a/"), None);
    }

    #[test]
    fn garbage_collection_table() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let instances = vec![
            inst("i-old-unclaimed", 60, "running"),
            inst("i-young-unclaimed", 10, "running"),
            inst("i-old-claimed", 60, "running"),
            inst("i-old-terminated", 60, "terminated"),
            inst("i-old-stopped", 60, "stopped"),
        ];
        let claimed: BTreeSet<String> = [provider_id("us-east-1a", "i-old-claimed")].into();
        assert_eq!(
            leaked_instances(&instances, &claimed, now, Duration::from_secs(30)),
            vec!["i-old-stopped".to_string(), "i-old-unclaimed".to_string()]
        );
    }

    #[test]
    fn node_claim_from_instance() {
        let claim = inst("i-1", 5, "running").to_node_claim();
        assert_eq!(claim.name(), "default-x");
        assert_eq!(claim.provider_id(), "aws:///us-east-1a/i-1");
        assert_eq!(claim.label(labels::CAPACITY_TYPE), Some("spot"));
        assert_eq!(claim.label(labels::NODEPOOL), Some("default"));
        assert_eq!(claim.spec.node_class_ref.name, "nc");
        assert!(!claim.is_deleting());
        assert!(
            inst("i-2", 5, "shutting-down")
                .to_node_claim()
                .is_deleting()
        );
    }

    #[test]
    fn drift_table() {
        let mut nc: EC2NodeClass =
            crate::nodeclass::from_yaml("metadata: {name: nc}\nspec: {}").expect("parses");
        nc.status = Some(crate::nodeclass::EC2NodeClassStatus {
            subnets: vec![SubnetStatus {
                id: "subnet-1".into(),
                zone: "us-east-1a".into(),
                zone_id: String::new(),
            }],
            security_groups: vec![SecurityGroupStatus {
                id: "sg-1".into(),
                name: String::new(),
            }],
            amis: vec![AmiStatus {
                id: "ami-1".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        let mut claim = inst("i-1", 5, "running").to_node_claim();
        let annotations = claim.metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(ANNOTATION_NODE_CLASS_HASH.into(), nc.hash());
        annotations.insert(
            ANNOTATION_NODE_CLASS_HASH_VERSION.into(),
            NODE_CLASS_HASH_VERSION.into(),
        );
        let base = inst("i-1", 5, "running");
        assert_eq!(drift_reason(&base, None, &nc, &claim), None);
        let mut unreported = base.clone();
        unreported.security_group_ids.clear();
        assert_eq!(drift_reason(&unreported, None, &nc, &claim), None);
        type Mutate = fn(&mut Ec2Instance);
        let cases: Vec<(Mutate, &str)> = vec![
            (|i| i.image_id = "ami-2".into(), DRIFT_AMI),
            (|i| i.subnet_id = "subnet-2".into(), DRIFT_SUBNET),
            (
                |i| i.security_group_ids.push("sg-2".into()),
                DRIFT_SECURITY_GROUP,
            ),
        ];
        for (mutate, want) in cases {
            let mut i = base.clone();
            mutate(&mut i);
            assert_eq!(
                drift_reason(&i, None, &nc, &claim),
                Some(DriftReason::new(want))
            );
        }
        // With the instance type known, the image must be the one its variant maps to: a
        // GPU node on the standard image drifts, on the nvidia image it does not.
        let mut variants = nc.clone();
        variants.status.get_or_insert_with(Default::default).amis = vec![
            AmiStatus {
                id: "ami-1".into(),
                requirements: vec![AmiRequirement {
                    key: labels::AWS_INSTANCE_GPU_COUNT.into(),
                    operator: "DoesNotExist".into(),
                    values: vec![],
                }],
                ..Default::default()
            },
            AmiStatus {
                id: "ami-gpu".into(),
                requirements: vec![AmiRequirement {
                    key: labels::AWS_INSTANCE_GPU_COUNT.into(),
                    operator: "Exists".into(),
                    values: vec![],
                }],
                ..Default::default()
            },
        ];
        let catalogue = |name: &str| {
            karpenter_catalog::default_instance_types()
                .iter()
                .find(|it| it.name == name)
                .expect("in the catalogue")
                .clone()
        };
        let (m5, g4) = (catalogue("m5.large"), catalogue("g4dn.xlarge"));
        assert_eq!(drift_reason(&base, Some(&m5), &variants, &claim), None);
        let mut gpu = base.clone();
        gpu.instance_type = "g4dn.xlarge".into();
        assert_eq!(
            drift_reason(&gpu, Some(&g4), &variants, &claim),
            Some(DriftReason::new(DRIFT_AMI))
        );
        // Unknown type: membership is enough.
        assert_eq!(drift_reason(&gpu, None, &variants, &claim), None);
        gpu.image_id = "ami-gpu".into();
        assert_eq!(drift_reason(&gpu, Some(&g4), &variants, &claim), None);
        assert_eq!(
            drift_reason(&gpu, Some(&m5), &variants, &claim),
            Some(DriftReason::new(DRIFT_AMI))
        );

        let mut changed = nc.clone();
        changed.spec.user_data = Some("echo changed".into());
        assert_eq!(
            drift_reason(&base, None, &changed, &claim),
            Some(DriftReason::new(DRIFT_NODE_CLASS))
        );
        // Another hash version (e.g. upstream Karpenter's) is not drift.
        claim
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANNOTATION_NODE_CLASS_HASH_VERSION.into(), "v4".into());
        assert_eq!(drift_reason(&base, None, &changed, &claim), None);
    }
}
