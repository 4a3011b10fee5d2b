//! Karpenter-managed instance profiles: an EC2NodeClass that names a `role` gets an IAM
//! instance profile created for it, holding that role, which its nodes launch with.
//!
//! The scheme follows Karpenter v1.14.1 so that profiles created by either controller are
//! recognised, cleaned up and garbage-collected by the other:
//!
//! - name `{cluster}_{n}` where `n` is a 64-bit FNV-1 hash, in decimal;
//! - path `/karpenter/{region}/{cluster}/{nodeclass uid}/`;
//! - tags: the class's `spec.tags`, then `kubernetes.io/cluster/{cluster}=owned`,
//!   `eks:eks-cluster-name`, `karpenter.k8s.aws/ec2nodeclass` and
//!   `topology.kubernetes.io/region` (the keys the controller IAM policy conditions on).
//!
//! A role change gives the class a new profile rather than swapping the role of the profile
//! running nodes use; the old one stays protected from garbage collection for an hour and is
//! removed afterwards once no NodeClaim names it. Deleting the class deletes every profile
//! under its path, plus the profile name Karpenter used before it had paths.
//!
//! Unlike Karpenter, whose new profile names hash a random UUID, the hash here covers the
//! region, class name, class UID and role, so a reconcile whose status write was lost finds
//! the profile it created instead of making another one.

use crate::cache::{Clock, TtlCache};
use crate::error::AwsError;
use crate::nodeclass::{EC2NodeClass, LABEL_NODE_CLASS};
use crate::settings::AwsSettings;
use karpenter_cloudprovider::v1::NodeClaim;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

/// NodeClaim annotation naming the instance profile its instance was launched with; the
/// garbage collector keeps every profile a NodeClaim still names.
pub const ANNOTATION_INSTANCE_PROFILE: &str = "karpenter.k8s.aws/instance-profile-name";
/// How long a fetched profile is reused before IAM is asked again (Karpenter's
/// `InstanceProfileTTL`).
pub const PROFILE_TTL: Duration = Duration::from_secs(15 * 60);
/// How long a role IAM reported missing is not retried, so a class naming a role that does
/// not exist does not create a profile on every pass.
pub const MISSING_ROLE_TTL: Duration = Duration::from_secs(60);
/// How long a profile a class just moved to or away from is exempt from garbage collection,
/// covering NodeClaims launched with it that watches have not delivered yet.
pub const PROTECTED_TTL: Duration = Duration::from_secs(60 * 60);
/// How often profiles left behind by deleted classes are collected.
pub const GC_INTERVAL: Duration = Duration::from_secs(30 * 60);
/// How soon a failed garbage collection is retried.
pub const GC_RETRY: Duration = Duration::from_secs(60);
/// The IAM error code for a missing profile or role.
pub const NO_SUCH_ENTITY: &str = "NoSuchEntity";

/// An IAM instance profile as far as Karpenter cares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceProfile {
    /// Profile name.
    pub name: String,
    /// IAM path (`/karpenter/us-east-1/my-cluster/<uid>/`).
    pub path: String,
    /// The role it holds (a profile holds at most one).
    pub role: Option<String>,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
}

impl From<&aws_sdk_iam::types::InstanceProfile> for InstanceProfile {
    fn from(p: &aws_sdk_iam::types::InstanceProfile) -> Self {
        Self {
            name: p.instance_profile_name().to_string(),
            path: p.path().to_string(),
            role: p.roles().first().map(|r| r.role_name().to_string()),
            tags: p
                .tags()
                .iter()
                .map(|t| (t.key().to_string(), t.value().to_string()))
                .collect(),
        }
    }
}

/// Why a class's instance profile could not be resolved. [`Self::reason`] is the
/// `InstanceProfileReady` condition's reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InstanceProfileError {
    /// Profiles are keyed by the class's UID, which an object read from a file lacks.
    #[error(
        "EC2NodeClass {node_class:?}: metadata.uid is empty; a managed instance profile is keyed by it"
    )]
    MissingUid {
        /// The class.
        node_class: String,
    },
    /// IAM does not know the role (the error is cached for [`MISSING_ROLE_TTL`]).
    #[error("EC2NodeClass {node_class:?}: spec.role {role:?} not found: {source}")]
    RoleNotFound {
        /// The class.
        node_class: String,
        /// `spec.role`.
        role: String,
        /// IAM's answer.
        source: AwsError,
    },
    /// An IAM call failed.
    #[error("EC2NodeClass {node_class:?}: instance profile: {source}")]
    Iam {
        /// The class.
        node_class: String,
        /// The failed call.
        source: AwsError,
    },
    /// Profiles are not written (shadow mode) and none with the role exists yet.
    #[error(
        "EC2NodeClass {node_class:?}: no instance profile holds spec.role {role:?} and this controller does not create one (dry run)"
    )]
    NotCreated {
        /// The class.
        node_class: String,
        /// `spec.role`.
        role: String,
    },
}

impl InstanceProfileError {
    /// The condition reason for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingUid { .. } => "NodeClassUIDMissing",
            Self::RoleNotFound { .. } => "RoleNotFound",
            Self::Iam { .. } => "InstanceProfileReconcileFailed",
            Self::NotCreated { .. } => "InstanceProfileNotCreated",
        }
    }
}

/// FNV-1 (not FNV-1a) over `bytes`: what Go's hashstructure v2, used by Karpenter for
/// profile names, computes for a string.
pub fn fnv1_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h: u64, b| {
        h.wrapping_mul(0x0000_0100_0000_01b3) ^ u64::from(*b)
    })
}

/// `/a/b/c/` from segments, `/` for none.
pub fn format_path(segments: &[&str]) -> String {
    let mut path = String::from("/");
    for s in segments {
        path.push_str(s);
        path.push('/');
    }
    path
}

/// The path prefix of every profile managed for `cluster` in `region`.
pub fn cluster_path(region: &str, cluster: &str) -> String {
    format_path(&["karpenter", region, cluster])
}

/// The path of the profiles managed for the class with `uid`.
pub fn node_class_path(region: &str, cluster: &str, uid: &str) -> String {
    format_path(&["karpenter", region, cluster, uid])
}

/// The name of the profile for `role` of the class `name`/`uid`.
pub fn profile_name(cluster: &str, region: &str, name: &str, uid: &str, role: &str) -> String {
    let n = fnv1_64(format!("{region}{name}{uid}{role}").as_bytes());
    format!("{cluster}_{n}")
}

/// The name Karpenter gave a class's profile before profiles had paths
/// (`{cluster}_{fnv1(region + name)}`); deleted with the class.
pub fn legacy_profile_name(cluster: &str, region: &str, name: &str) -> String {
    format!(
        "{cluster}_{}",
        fnv1_64(format!("{region}{name}").as_bytes())
    )
}

/// Whether IAM accepts `name` as an instance profile name (1-128 of `[\w+=,.@-]`).
pub fn is_valid_profile_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_+=,.@-".contains(c))
}

/// The tags a managed profile carries: `spec.tags` overlaid with the cluster, class and
/// region keys the controller policy requires.
pub fn profile_tags(nc: &EC2NodeClass, cluster: &str, region: &str) -> BTreeMap<String, String> {
    let mut tags = nc.spec.tags.clone();
    tags.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
    tags.insert("eks:eks-cluster-name".into(), cluster.into());
    tags.insert(LABEL_NODE_CLASS.into(), nc.name().into());
    tags.insert("topology.kubernetes.io/region".into(), region.into());
    tags
}

/// The role name IAM stores: `AddRoleToInstanceProfile` takes no path, so `path/Role`
/// becomes `Role`.
pub fn role_name(role: &str) -> &str {
    role.rsplit('/').next().unwrap_or(role)
}

fn is_no_such_entity(e: &AwsError) -> bool {
    e.code() == Some(NO_SUCH_ENTITY)
}

/// Whether `AddRoleToInstanceProfile` on `profile` failed because the role is missing:
/// IAM answers `NoSuchEntity` for a missing profile too, and only the message tells them
/// apart (the profile's own name is ignored, as it may contain "role").
fn is_role_not_found(e: &AwsError, profile: &str) -> bool {
    match e {
        AwsError::Api { code, message, .. } if code == NO_SUCH_ENTITY => {
            message.replace(profile, "").to_lowercase().contains("role")
        }
        _ => false,
    }
}

/// Creates, reads, deletes and garbage-collects the instance profiles Karpenter manages.
#[derive(Debug)]
pub struct InstanceProfiles {
    iam: aws_sdk_iam::Client,
    cluster: String,
    region: String,
    /// Whether IAM may be written (off in shadow mode).
    writes: bool,
    /// Off in isolated VPCs, where IAM is unreachable: no cleanup on deletion, no GC.
    cleanup: bool,
    clock: Arc<dyn Clock>,
    profiles: TtlCache<String, InstanceProfile>,
    missing_roles: TtlCache<String, AwsError>,
    protected: TtlCache<String, ()>,
    next_gc: Mutex<Option<SystemTime>>,
}

impl InstanceProfiles {
    /// Profiles for `settings`' cluster and region, through `iam`.
    pub fn new(iam: aws_sdk_iam::Client, settings: &AwsSettings, clock: Arc<dyn Clock>) -> Self {
        Self {
            iam,
            cluster: settings.cluster_name.clone(),
            region: settings.region.clone(),
            writes: settings.manage_instance_profiles,
            cleanup: !settings.isolated_vpc,
            profiles: TtlCache::new(clock.clone(), PROFILE_TTL),
            missing_roles: TtlCache::new(clock.clone(), MISSING_ROLE_TTL),
            protected: TtlCache::new(clock.clone(), PROTECTED_TTL),
            clock,
            next_gc: Mutex::new(None),
        }
    }

    /// The profile `name` (cached for [`PROFILE_TTL`]), `None` if IAM has none.
    ///
    /// # Errors
    /// `GetInstanceProfile` failed other than with `NoSuchEntity`.
    pub async fn get(&self, name: &str) -> Result<Option<InstanceProfile>, AwsError> {
        if let Some(p) = self.profiles.get(&name.to_string()) {
            return Ok(Some(p));
        }
        match self
            .iam
            .get_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
        {
            Ok(out) => {
                let profile = out
                    .instance_profile()
                    .map(InstanceProfile::from)
                    .ok_or_else(|| AwsError::InvalidResponse {
                        operation: "GetInstanceProfile",
                        message: format!("no instance profile in the answer for {name:?}"),
                    })?;
                self.profiles.insert(name.to_string(), profile.clone());
                Ok(Some(profile))
            }
            Err(e) => {
                let e = AwsError::api("GetInstanceProfile", e);
                if is_no_such_entity(&e) {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Makes sure the profile `name` exists (created at `path` with `tags` when missing)
    /// and holds `role` and nothing else.
    ///
    /// # Errors
    /// The role is known to be missing (see [`MISSING_ROLE_TTL`]) or an IAM call failed.
    pub async fn create(
        &self,
        name: &str,
        role: &str,
        tags: &BTreeMap<String, String>,
        path: &str,
    ) -> Result<(), AwsError> {
        let role = role_name(role);
        if let Some(e) = self.missing_roles.get(&role.to_string()) {
            return Err(e);
        }
        let profile = match self.get(name).await? {
            Some(p) => p,
            None => self.create_profile(name, tags, path).await?,
        };
        if profile.role.as_deref() == Some(role) {
            return Ok(());
        }
        // The cached view may be stale (a role changed outside Karpenter): forget it so the
        // next attempt reads IAM again.
        self.profiles.remove(&name.to_string());
        if let Some(old) = &profile.role {
            self.remove_role(name, old).await?;
        }
        if let Err(e) = self
            .iam
            .add_role_to_instance_profile()
            .instance_profile_name(name)
            .role_name(role)
            .send()
            .await
        {
            let e = AwsError::api("AddRoleToInstanceProfile", e);
            if is_role_not_found(&e, name) {
                self.missing_roles.insert(role.to_string(), e.clone());
            }
            return Err(e);
        }
        self.profiles.insert(
            name.to_string(),
            InstanceProfile {
                role: Some(role.to_string()),
                ..profile
            },
        );
        Ok(())
    }

    async fn remove_role(&self, profile: &str, role: &str) -> Result<(), AwsError> {
        self.iam
            .remove_role_from_instance_profile()
            .instance_profile_name(profile)
            .role_name(role)
            .send()
            .await
            .map(drop)
            .map_err(|e| AwsError::api("RemoveRoleFromInstanceProfile", e))
    }

    async fn create_profile(
        &self,
        name: &str,
        tags: &BTreeMap<String, String>,
        path: &str,
    ) -> Result<InstanceProfile, AwsError> {
        let mut iam_tags = Vec::with_capacity(tags.len());
        for (k, v) in tags {
            let tag = aws_sdk_iam::types::Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| AwsError::Invalid {
                    what: format!("instance profile tag {k:?}"),
                    message: e.to_string(),
                })?;
            iam_tags.push(tag);
        }
        let out = self
            .iam
            .create_instance_profile()
            .instance_profile_name(name)
            .path(path)
            .set_tags(Some(iam_tags))
            .send()
            .await
            .map_err(|e| AwsError::api("CreateInstanceProfile", e))?;
        out.instance_profile()
            .map(InstanceProfile::from)
            .ok_or_else(|| AwsError::InvalidResponse {
                operation: "CreateInstanceProfile",
                message: format!("no instance profile in the answer for {name:?}"),
            })
    }

    /// Removes the profile's role, then the profile. A profile that does not exist is not
    /// an error.
    ///
    /// # Errors
    /// An IAM call failed other than with `NoSuchEntity`.
    pub async fn delete(&self, name: &str) -> Result<(), AwsError> {
        // Read IAM rather than the cache: the role must be detached before IAM deletes.
        self.profiles.remove(&name.to_string());
        let Some(profile) = self.get(name).await? else {
            self.protected.remove(&name.to_string());
            return Ok(());
        };
        if let Some(role) = &profile.role
            && let Err(e) = self.remove_role(name, role).await
            && !is_no_such_entity(&e)
        {
            return Err(e);
        }
        if let Err(e) = self
            .iam
            .delete_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
        {
            let e = AwsError::api("DeleteInstanceProfile", e);
            if !is_no_such_entity(&e) {
                return Err(e);
            }
        }
        self.profiles.remove(&name.to_string());
        self.protected.remove(&name.to_string());
        Ok(())
    }

    /// Every profile whose path starts with `path_prefix` (which should end with `/`, so
    /// `/karpenter/r/c/` does not match cluster `c2`).
    ///
    /// # Errors
    /// `ListInstanceProfiles` failed.
    pub async fn list(&self, path_prefix: &str) -> Result<Vec<InstanceProfile>, AwsError> {
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let page = self
                .iam
                .list_instance_profiles()
                .path_prefix(path_prefix)
                .set_marker(marker.take())
                .send()
                .await
                .map_err(|e| AwsError::api("ListInstanceProfiles", e))?;
            // The prefix is checked here too: the result feeds deletions, and an API that
            // ignored the filter (moto does) must not hand over another cluster's profiles.
            out.extend(
                page.instance_profiles()
                    .iter()
                    .filter(|p| p.path().starts_with(path_prefix))
                    .map(InstanceProfile::from),
            );
            match page.marker() {
                Some(m) if page.is_truncated() => marker = Some(m.to_string()),
                _ => return Ok(out),
            }
        }
    }

    /// Whether `name` is exempt from garbage collection for now.
    pub fn is_protected(&self, name: &str) -> bool {
        self.protected.get(&name.to_string()).is_some()
    }

    /// Exempts `name` from garbage collection for [`PROTECTED_TTL`].
    pub fn protect(&self, name: &str) {
        if !name.is_empty() {
            self.protected.insert(name.to_string(), ());
        }
    }

    /// The instance profile `nc`'s nodes launch with, for its `status.instanceProfile`:
    /// `spec.instanceProfile` as given, or for `spec.role` the managed profile holding that
    /// role — the one the status already names if it holds the role, else one created for
    /// it. The profile a class moves away from is protected from garbage collection.
    ///
    /// # Errors
    /// The class has no UID, the role does not exist, an IAM call failed, or (without
    /// writes) no profile with the role exists yet.
    pub async fn resolve(&self, nc: &EC2NodeClass) -> Result<String, InstanceProfileError> {
        let old = nc
            .status
            .as_ref()
            .map(|s| s.instance_profile.clone())
            .unwrap_or_default();
        let Some(role) = nc.spec.role.as_deref().filter(|r| !r.is_empty()) else {
            // A switch from `role` to `instanceProfile`: the managed profile may still be on
            // nodes, so it is kept until they are gone. Unmanaged names protected here are
            // harmless: the collector only looks under Karpenter's path.
            self.protect(&old);
            return Ok(nc.spec.instance_profile.clone().unwrap_or_default());
        };
        let node_class = nc.name().to_string();
        let iam_err = |source| InstanceProfileError::Iam {
            node_class: node_class.clone(),
            source,
        };
        let current_role = if old.is_empty() {
            None
        } else {
            self.get(&old).await.map_err(iam_err)?.and_then(|p| p.role)
        };
        if current_role.as_deref() == Some(role_name(role)) {
            return Ok(old);
        }
        let uid = nc.metadata.uid.as_deref().unwrap_or("");
        if uid.is_empty() {
            return Err(InstanceProfileError::MissingUid { node_class });
        }
        let name = profile_name(&self.cluster, &self.region, nc.name(), uid, role);
        if !self.writes {
            return match self.get(&name).await.map_err(iam_err)? {
                Some(p) if p.role.as_deref() == Some(role_name(role)) => Ok(name),
                _ => Err(InstanceProfileError::NotCreated {
                    node_class,
                    role: role.to_string(),
                }),
            };
        }
        let tags = profile_tags(nc, &self.cluster, &self.region);
        let path = node_class_path(&self.region, &self.cluster, uid);
        if let Err(e) = self.create(&name, role, &tags, &path).await {
            // A half-made profile (created, role not attached) is removed now rather than
            // left to the collector, unless it is the one the status still names.
            if name != old {
                let _ = self.delete(&name).await;
            }
            return Err(if is_role_not_found(&e, &name) {
                InstanceProfileError::RoleNotFound {
                    node_class,
                    role: role.to_string(),
                    source: e,
                }
            } else {
                iam_err(e)
            });
        }
        // Both stay out of the collector's reach until NodeClaims naming them are watched.
        self.protect(&name);
        if old != name {
            self.protect(&old);
        }
        Ok(name)
    }

    /// Deletes the profiles managed for the deleted class `nc`: all under its path, and the
    /// name Karpenter used before paths. Nothing in isolated VPCs or without writes.
    ///
    /// # Errors
    /// Listing or deleting failed.
    pub async fn finalize(&self, nc: &EC2NodeClass) -> Result<(), AwsError> {
        if !self.cleanup || !self.writes {
            return Ok(());
        }
        if let Some(uid) = nc.metadata.uid.as_deref().filter(|u| !u.is_empty()) {
            let path = node_class_path(&self.region, &self.cluster, uid);
            for p in self.list(&path).await? {
                self.delete(&p.name).await?;
            }
        }
        let legacy = legacy_profile_name(&self.cluster, &self.region, nc.name());
        if is_valid_profile_name(&legacy) {
            self.delete(&legacy).await?;
        }
        Ok(())
    }

    /// Deletes the cluster's managed profiles that no class's status (`current`) and no
    /// NodeClaim's [`ANNOTATION_INSTANCE_PROFILE`] (`active`) names and that are not
    /// protected; returns their names.
    ///
    /// # Errors
    /// Listing or a deletion failed (profiles before it are deleted).
    pub async fn collect_garbage(
        &self,
        current: &BTreeSet<String>,
        active: &BTreeSet<String>,
    ) -> Result<Vec<String>, AwsError> {
        let mut deleted = Vec::new();
        if !self.cleanup || !self.writes {
            return Ok(deleted);
        }
        for p in self
            .list(&cluster_path(&self.region, &self.cluster))
            .await?
        {
            if current.contains(&p.name) || active.contains(&p.name) || self.is_protected(&p.name) {
                continue;
            }
            self.delete(&p.name).await?;
            tracing::debug!(instance_profile = p.name, "deleted instance profile");
            deleted.push(p.name);
        }
        Ok(deleted)
    }

    /// [`Self::collect_garbage`] every [`GC_INTERVAL`] (the first call runs it), retried
    /// after [`GC_RETRY`] when it fails, keeping the profiles `classes`' statuses and
    /// `claims`' annotations name; `None` when not due (`claims` is then not called).
    ///
    /// # Errors
    /// As [`Self::collect_garbage`].
    pub async fn collect_garbage_if_due(
        &self,
        classes: &[Arc<EC2NodeClass>],
        claims: impl FnOnce() -> Vec<Arc<NodeClaim>>,
    ) -> Result<Option<Vec<String>>, AwsError> {
        let now = self.clock.now();
        {
            let mut next = self.next_gc.lock().unwrap_or_else(PoisonError::into_inner);
            if next.is_some_and(|t| now < t) {
                return Ok(None);
            }
            // Claimed before the calls so concurrent passes do not collect twice.
            *next = Some(now + GC_RETRY);
        }
        let current = classes
            .iter()
            .filter_map(|c| c.status.as_ref())
            .map(|s| s.instance_profile.clone())
            .filter(|p| !p.is_empty())
            .collect();
        let active = claims()
            .iter()
            .filter_map(|c| c.annotation(ANNOTATION_INSTANCE_PROFILE))
            .map(str::to_string)
            .collect();
        let out = self.collect_garbage(&current, &active).await?;
        *self.next_gc.lock().unwrap_or_else(PoisonError::into_inner) = Some(now + GC_INTERVAL);
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, tags: &[(&str, &str)]) -> EC2NodeClass {
        let mut nc: EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": name, "uid": "4b1c"},
            "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"id": "subnet-1"}],
                     "securityGroupSelectorTerms": [{"id": "sg-1"}]},
        }))
        .unwrap();
        nc.spec.tags = tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        nc
    }

    #[test]
    fn fnv1_matches_the_reference_vectors() {
        // FNV-1 64 test vectors (Noll); FNV-1a of "a" would be 0xaf63dc4c8601ec8c.
        assert_eq!(fnv1_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1_64(b"a"), 0xaf63_bd4c_8601_b7be);
        assert_eq!(fnv1_64(b"foobar"), 0x340d_8765_a4dd_a9c2);
    }

    #[test]
    fn paths_follow_karpenters_scheme() {
        assert_eq!(format_path(&[]), "/");
        assert_eq!(cluster_path("eu-west-1", "c"), "/karpenter/eu-west-1/c/");
        assert_eq!(
            node_class_path("eu-west-1", "c", "4b1c"),
            "/karpenter/eu-west-1/c/4b1c/"
        );
        // The class path lies under the cluster path, so the collector sees it.
        assert!(node_class_path("r", "c", "u").starts_with(&cluster_path("r", "c")));
    }

    #[test]
    fn names_are_cluster_prefixed_and_differ_per_role_and_uid() {
        let a = profile_name("c", "r", "default", "u1", "RoleA");
        assert!(a.starts_with("c_"), "{a}");
        assert!(a["c_".len()..].parse::<u64>().is_ok(), "{a}");
        assert_eq!(a, profile_name("c", "r", "default", "u1", "RoleA"));
        assert_ne!(a, profile_name("c", "r", "default", "u1", "RoleB"));
        assert_ne!(a, profile_name("c", "r", "default", "u2", "RoleA"));
        assert_eq!(
            legacy_profile_name("c", "r", "default"),
            format!("c_{}", fnv1_64(b"rdefault"))
        );
        assert!(is_valid_profile_name(&a));
    }

    #[test]
    fn profile_names_iam_refuses_are_recognised() {
        assert!(is_valid_profile_name("a-b_c+d=e,f.g@h"));
        assert!(!is_valid_profile_name(""));
        assert!(!is_valid_profile_name("has space"));
        assert!(!is_valid_profile_name("slash/name"));
        assert!(!is_valid_profile_name(&"x".repeat(129)));
    }

    #[test]
    fn tags_overlay_the_ownership_keys_on_spec_tags() {
        let nc = class(
            "default",
            &[("team", "a"), ("eks:eks-cluster-name", "spoofed")],
        );
        let tags = profile_tags(&nc, "c", "us-east-1");
        let expected: BTreeMap<String, String> = [
            ("team", "a"),
            ("eks:eks-cluster-name", "c"),
            ("kubernetes.io/cluster/c", "owned"),
            ("karpenter.k8s.aws/ec2nodeclass", "default"),
            ("topology.kubernetes.io/region", "us-east-1"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(tags, expected);
    }

    #[test]
    fn role_paths_are_dropped_as_iam_does() {
        assert_eq!(role_name("KarpenterNodeRole"), "KarpenterNodeRole");
        assert_eq!(
            role_name("team/nodes/KarpenterNodeRole"),
            "KarpenterNodeRole"
        );
    }

    #[test]
    fn a_missing_role_is_told_from_a_missing_profile() {
        let err = |message: &str| AwsError::Api {
            operation: "AddRoleToInstanceProfile",
            code: NO_SUCH_ENTITY.into(),
            message: message.into(),
        };
        assert!(is_role_not_found(
            &err("The role with name R cannot be found."),
            "c_1"
        ));
        assert!(is_role_not_found(&err("Role R not found"), "c_1"));
        assert!(!is_role_not_found(
            &err("Instance Profile c_1 cannot be found."),
            "c_1"
        ));
        assert!(!is_role_not_found(
            &err("Instance Profile myrole_1 cannot be found."),
            "myrole_1"
        ));
        let denied = AwsError::Api {
            operation: "AddRoleToInstanceProfile",
            code: "AccessDenied".into(),
            message: "not authorized to perform iam:AddRoleToInstanceProfile on role R".into(),
        };
        assert!(!is_role_not_found(&denied, "c_1"));
    }

    #[test]
    fn reasons_name_the_failure() {
        let e = InstanceProfileError::MissingUid {
            node_class: "default".into(),
        };
        assert_eq!(e.reason(), "NodeClassUIDMissing");
        assert!(e.to_string().contains("metadata.uid"), "{e}");
    }
}
