//! Node requirements with Karpenter's semantics: a set of values (or its complement) per key,
//! numeric bounds for Gt/Lt/Gte/Lte, and minValues.
//!
//! The algebra follows `sigs.k8s.io/karpenter/pkg/scheduling` (v1.14): `Requirement` is a
//! finite allowed set or the complement of a finite excluded set, optionally narrowed by
//! inclusive integer bounds; `Requirements` maps each key to one `Requirement`.

use crate::labels;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use value_set::ValueSet;

mod value_set;

/// A node selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Operator {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label's value is an integer greater than the single value.
    Gt,
    /// The label's value is an integer less than the single value.
    Lt,
    /// The label's value is an integer greater than or equal to the single value.
    Gte,
    /// The label's value is an integer less than or equal to the single value.
    Lte,
}

impl Operator {
    /// The operator's name as Kubernetes spells it (`In`, `NotIn`, …, `Gte`, `Lte`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Gt => "Gt",
            Operator::Lt => "Lt",
            Operator::Gte => "Gte",
            Operator::Lte => "Lte",
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A requirement as written in a manifest (`NodeSelectorRequirement`, with Karpenter's
/// `minValues`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub operator: Operator,
    /// Values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Minimum number of distinct values the launch must keep available (Karpenter only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<u32>,
}

/// One key's requirement in Karpenter's normal form: either a finite set of allowed values or
/// the complement of a finite excluded set, optionally bounded by integers (Gt/Lt/Gte/Lte),
/// plus minValues.
///
/// Normal form (kept by every constructor and by [`Requirement::intersection`]):
/// - `In vs` is `complement = false, values = vs`; `DoesNotExist` is the empty such set.
/// - `NotIn vs` is `complement = true, values = vs`; `Exists` is the complement of ∅.
/// - `Gt n`/`Gte n`/`Lt n`/`Lte n` are `Exists` with an inclusive bound (`Gt n` is stored as
///   `gte = n + 1`, `Lt n` as `lte = n - 1`, as upstream canonicalises them); a bound that
///   overflows `i64` (`Gt i64::MAX`, `Lt i64::MIN`) admits nothing and becomes `DoesNotExist`.
/// - Only complements carry bounds: intersecting a finite set with bounds filters the set and
///   drops the bounds, and excluded values outside the bounds are dropped too.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirement {
    key: String,
    complement: bool,
    values: ValueSet,
    /// Inclusive lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gte: Option<i64>,
    /// Inclusive upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lte: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_values: Option<u32>,
}

/// A requirement that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("requirement on {key:?}: {reason}")]
pub struct RequirementError {
    /// The key.
    pub key: String,
    /// Why it is invalid (operator/value rules of the Kubernetes API).
    pub reason: String,
}

/// Whether `value` lies within the inclusive bounds; with any bound set, a value that is not a
/// base-10 `i64` is outside (as Karpenter's `withinBounds`, which uses `strconv.Atoi`).
fn within_bounds(value: &str, gte: Option<i64>, lte: Option<i64>) -> bool {
    if gte.is_none() && lte.is_none() {
        return true;
    }
    let Ok(n) = value.parse::<i64>() else {
        return false;
    };
    gte.is_none_or(|lo| n >= lo) && lte.is_none_or(|hi| n <= hi)
}

fn max_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn min_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Requirement {
    /// Builds a requirement from operator and values with the Kubernetes API's rules
    /// (In/NotIn need values, Exists/DoesNotExist take none, Gt/Lt/Gte/Lte one integer).
    ///
    /// Deprecated alias keys are rewritten to their well-known form
    /// (`failure-domain.beta.kubernetes.io/zone` → `topology.kubernetes.io/zone`, see
    /// [`labels::NORMALIZED_LABELS`]), as Karpenter does, so [`Requirement::key`] may differ
    /// from `key`. Negative integers are accepted (a pod's node affinity may use them);
    /// NodePool validation, which forbids them, belongs to the API types.
    ///
    /// # Examples
    ///
    /// ```
    /// use karpenter_scheduling::{Operator, Requirement};
    ///
    /// let generation =
    ///     Requirement::new("karpenter.k8s.aws/instance-generation", Operator::Gt, ["5"])?;
    /// assert!(generation.has("6"));
    /// assert!(!generation.has("5"));
    /// let zone = Requirement::new(
    ///     "failure-domain.beta.kubernetes.io/zone",
    ///     Operator::In,
    ///     ["us-east-1a", "us-east-1b"],
    /// )?;
    /// assert_eq!(zone.key(), "topology.kubernetes.io/zone");
    /// let not_a = Requirement::new(zone.key(), Operator::NotIn, ["us-east-1a"])?;
    /// let b = zone.intersection(&not_a);
    /// assert_eq!(b.values().collect::<Vec<_>>(), ["us-east-1b"]);
    /// // The API's rules: In needs values, Gt one integer.
    /// assert!(Requirement::new("app", Operator::In, Vec::<String>::new()).is_err());
    /// assert!(Requirement::new("app", Operator::Gt, ["five"]).is_err());
    /// # Ok::<(), karpenter_scheduling::requirements::RequirementError>(())
    /// ```
    pub fn new(
        key: impl Into<String>,
        operator: Operator,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, RequirementError> {
        let mut key: String = key.into();
        if let Some(target) = labels::normalized(&key) {
            key = target.to_owned();
        }
        let err = |key: String, reason: String| Err(RequirementError { key, reason });
        let mut values = values.into_iter().map(Into::into);
        match operator {
            Operator::In | Operator::NotIn => {
                let set: ValueSet = values.collect();
                if set.is_empty() {
                    return err(
                        key,
                        format!("operator {operator} requires at least one value"),
                    );
                }
                Ok(Self::from_parts(key, operator == Operator::NotIn, set))
            }
            Operator::Exists | Operator::DoesNotExist => {
                let extra = values.count();
                if extra != 0 {
                    return err(
                        key,
                        format!("operator {operator} takes no values, got {extra}"),
                    );
                }
                Ok(Self::from_parts(
                    key,
                    operator == Operator::Exists,
                    ValueSet::new(),
                ))
            }
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
                let (Some(value), None) = (values.next(), values.next()) else {
                    return err(
                        key,
                        format!("operator {operator} requires exactly one integer value"),
                    );
                };
                let Ok(n) = value.parse::<i64>() else {
                    return err(
                        key,
                        format!("operator {operator} requires an integer value, got {value:?}"),
                    );
                };
                let (gte, lte) = match operator {
                    Operator::Gt => (n.checked_add(1), None),
                    Operator::Gte => (Some(n), None),
                    Operator::Lt => (None, n.checked_sub(1)),
                    _ => (None, Some(n)),
                };
                // An overflowed bound (Gt i64::MAX, Lt i64::MIN) admits no integer at all.
                if gte.is_none() && lte.is_none() {
                    return Ok(Self::does_not_exist(key));
                }
                let mut r = Self::exists(key);
                r.gte = gte;
                r.lte = lte;
                Ok(r)
            }
        }
    }

    fn from_parts(key: String, complement: bool, values: ValueSet) -> Self {
        Self {
            key,
            complement,
            values,
            gte: None,
            lte: None,
            min_values: None,
        }
    }

    /// `key Exists`: any value, but the label must be present on a node. Like [`Requirement::new`],
    /// an alias key is normalised.
    pub fn exists(key: impl Into<String>) -> Self {
        let key: String = key.into();
        let key = labels::normalized(&key).map_or(key, str::to_owned);
        Self::from_parts(key, true, ValueSet::new())
    }

    /// `key DoesNotExist`: no value is allowed. Like [`Requirement::new`], an alias key is
    /// normalised.
    pub fn does_not_exist(key: impl Into<String>) -> Self {
        let key: String = key.into();
        let key = labels::normalized(&key).map_or(key, str::to_owned);
        Self::from_parts(key, false, ValueSet::new())
    }

    /// The same requirement with minValues replaced.
    pub fn with_min_values(mut self, min_values: Option<u32>) -> Self {
        self.min_values = min_values;
        self
    }

    /// From the manifest form (the rules of [`Requirement::new`], plus minValues).
    pub fn from_node_selector(r: &NodeSelectorRequirement) -> Result<Self, RequirementError> {
        Ok(Self::new(
            r.key.as_str(),
            r.operator,
            r.values.iter().map(String::as_str),
        )?
        .with_min_values(r.min_values))
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator this requirement is equivalent to (In, NotIn, Exists, DoesNotExist), as
    /// Karpenter's `Requirement.Operator` reports it: numeric bounds do not show here (a
    /// bounded requirement reports `Exists`, or `NotIn` when it also excludes values); read
    /// them with [`Requirement::bounds`].
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, false) => Operator::NotIn,
            (true, true) => Operator::Exists,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    /// Whether this is a complement (NotIn/Exists, possibly bounded) rather than a finite set.
    pub fn is_complement(&self) -> bool {
        self.complement
    }

    /// The inclusive integer bounds `(lower, upper)`; both `None` unless the requirement came
    /// from Gt/Lt/Gte/Lte (finite sets never carry bounds).
    pub fn bounds(&self) -> (Option<i64>, Option<i64>) {
        (self.gte, self.lte)
    }

    /// Whether `value` is allowed: in the set (or not excluded, for a complement) and, when
    /// bounded, an integer within the bounds.
    pub fn has(&self, value: &str) -> bool {
        self.values.contains(value) != self.complement && within_bounds(value, self.gte, self.lte)
    }

    /// The intersection of two requirements on the same key (minValues: the larger).
    ///
    /// Karpenter's rules: the result is a complement only if both are; bounds tighten to the
    /// larger lower and smaller upper bound (crossing bounds give `DoesNotExist`); values
    /// outside the bounds are dropped, and a finite result loses its bounds. The result keeps
    /// `self`'s key.
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        let complement = self.complement && other.complement;
        let gte = max_opt(self.gte, other.gte);
        let lte = min_opt(self.lte, other.lte);
        let min_values = max_opt(self.min_values, other.min_values);
        if let (Some(lo), Some(hi)) = (gte, lte)
            && lo > hi
        {
            return Self::from_parts(self.key.clone(), false, ValueSet::new())
                .with_min_values(min_values);
        }
        let keep = |v: &&String| within_bounds(v, gte, lte);
        let values: ValueSet = match (self.complement, other.complement) {
            (true, true) => self
                .values
                .union(&other.values)
                .filter(keep)
                .cloned()
                .collect(),
            (true, false) => other
                .values
                .difference(&self.values)
                .filter(keep)
                .cloned()
                .collect(),
            (false, true) => self
                .values
                .difference(&other.values)
                .filter(keep)
                .cloned()
                .collect(),
            (false, false) => self
                .values
                .intersection(&other.values)
                .filter(keep)
                .cloned()
                .collect(),
        };
        let (gte, lte) = if complement { (gte, lte) } else { (None, None) };
        Requirement {
            key: self.key.clone(),
            complement,
            values,
            gte,
            lte,
            min_values,
        }
    }

    /// Whether [`Requirement::intersection`] would allow some value, decided without building
    /// it (no allocation). Like Karpenter's `HasIntersection`, two complements always
    /// intersect unless their bounds cross.
    pub fn has_intersection(&self, other: &Requirement) -> bool {
        let gte = max_opt(self.gte, other.gte);
        let lte = min_opt(self.lte, other.lte);
        if let (Some(lo), Some(hi)) = (gte, lte)
            && lo > hi
        {
            return false;
        }
        match (self.complement, other.complement) {
            (true, true) => true,
            (true, false) => other
                .values
                .iter()
                .any(|v| !self.values.contains(v) && within_bounds(v, gte, lte)),
            (false, true) => self
                .values
                .iter()
                .any(|v| !other.values.contains(v) && within_bounds(v, gte, lte)),
            (false, false) => {
                let (small, large) = if self.values.len() <= other.values.len() {
                    (&self.values, &other.values)
                } else {
                    (&other.values, &self.values)
                };
                small
                    .iter()
                    .any(|v| large.contains(v) && within_bounds(v, gte, lte))
            }
        }
    }

    /// The number of allowed values (`usize::MAX` for a complement).
    pub fn len(&self) -> usize {
        if self.complement {
            usize::MAX
        } else {
            self.values.len()
        }
    }

    /// Whether no value is allowed (DoesNotExist, or an empty intersection).
    ///
    /// As in Karpenter, a bounded complement whose whole integer range is excluded (e.g.
    /// `Gte 2, Lte 2, NotIn [2]`) is not detected and reports `false`.
    pub fn is_empty(&self) -> bool {
        !self.complement && self.values.is_empty()
    }

    /// The allowed values of a finite requirement, sorted; for a complement, the excluded
    /// values, sorted (check [`Requirement::is_complement`]).
    pub fn values(&self) -> impl Iterator<Item = &str> + '_ {
        self.values.iter().map(String::as_str)
    }

    /// A deterministic representative allowed value (the smallest finite one), if any.
    ///
    /// `None` for DoesNotExist and for every complement (Exists, NotIn, bounded): Karpenter
    /// picks a random integer there, which a deterministic core cannot do; callers that need
    /// a concrete value for such a key must choose one themselves.
    pub fn any(&self) -> Option<&str> {
        if self.complement {
            return None;
        }
        self.values
            .iter()
            .find(|v| within_bounds(v, self.gte, self.lte))
            .map(String::as_str)
    }

    /// minValues.
    pub fn min_values(&self) -> Option<u32> {
        self.min_values
    }

    /// Back to the manifest form, as one expression.
    ///
    /// Exact whenever one expression suffices (In, NotIn, Exists, DoesNotExist, a single
    /// bound). A requirement with both bounds, or bounds and exclusions, needs several:
    /// this returns only the first of [`Requirement::to_node_selectors`] (the lower bound
    /// when there is one, as Karpenter does); use that method, or
    /// [`Requirements::to_node_selector`], for a lossless form.
    pub fn to_node_selector(&self) -> NodeSelectorRequirement {
        // `to_node_selectors` always yields at least one expression; the fallback is unreachable.
        self.to_node_selectors()
            .into_iter()
            .next()
            .unwrap_or_else(|| self.expression(Operator::Exists, Vec::new()))
    }

    /// Back to the manifest form as the expressions whose AND is exactly this requirement
    /// (one for In/NotIn/Exists/DoesNotExist, up to three for a bounded complement: lower
    /// bound, upper bound, then NotIn). Each carries minValues.
    ///
    /// Bounds are written as `Gt n-1` / `Lt n+1`, which every Kubernetes version and every
    /// Karpenter CRD accepts; `Gte`/`Lte` are used only where that would need a negative
    /// value from a non-negative bound (`Gte 0`) or would overflow, since Karpenter's CRDs
    /// reject negative bound values.
    pub fn to_node_selectors(&self) -> Vec<NodeSelectorRequirement> {
        let values = || self.values.iter().cloned().collect::<Vec<_>>();
        if !self.complement {
            return vec![if self.values.is_empty() {
                self.expression(Operator::DoesNotExist, Vec::new())
            } else {
                self.expression(Operator::In, values())
            }];
        }
        let mut out = Vec::with_capacity(1);
        if let Some(lo) = self.gte {
            out.push(match lo.checked_sub(1) {
                Some(gt) if lo != 0 => self.expression(Operator::Gt, vec![gt.to_string()]),
                _ => self.expression(Operator::Gte, vec![lo.to_string()]),
            });
        }
        if let Some(hi) = self.lte {
            out.push(match hi.checked_add(1) {
                Some(lt) => self.expression(Operator::Lt, vec![lt.to_string()]),
                None => self.expression(Operator::Lte, vec![hi.to_string()]),
            });
        }
        if !self.values.is_empty() {
            out.push(self.expression(Operator::NotIn, values()));
        } else if out.is_empty() {
            out.push(self.expression(Operator::Exists, Vec::new()));
        }
        out
    }

    fn expression(&self, operator: Operator, values: Vec<String>) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: self.key.clone(),
            operator,
            values,
            min_values: self.min_values,
        }
    }
}

/// Karpenter's `Requirement.String()`: `key Op [v1 v2 …]` (values sorted, at most five shown,
/// then `and N others`), no values for Exists/DoesNotExist, then ` >=lo`, ` <=hi` and
/// ` minValues n` when set.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = self.operator();
        write!(f, "{} {op}", self.key)?;
        if matches!(op, Operator::In | Operator::NotIn) {
            f.write_str(" [")?;
            for (i, v) in self.values.iter().take(5).enumerate() {
                if i > 0 {
                    f.write_str(" ")?;
                }
                f.write_str(v)?;
            }
            if self.values.len() > 5 {
                write!(f, " and {} others", self.values.len() - 5)?;
            }
            f.write_str("]")?;
        }
        if let Some(lo) = self.gte {
            write!(f, " >={lo}")?;
        }
        if let Some(hi) = self.lte {
            write!(f, " <={hi}")?;
        }
        if let Some(n) = self.min_values {
            write!(f, " minValues {n}")?;
        }
        Ok(())
    }
}

/// Requirements per key; a key with no entry is undefined (anything goes, including absence).
///
/// Serialises as the manifest form (a list of `{key, operator, values, minValues}`, in key
/// order) so plans and snapshots read like the YAML users write; deserialising validates
/// each entry and intersects repeated keys.
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(
    into = "Vec<NodeSelectorRequirement>",
    try_from = "Vec<NodeSelectorRequirement>"
)]
pub struct Requirements {
    /// One requirement per key, sorted by key. A node's or an instance type's 25-odd keys in
    /// one allocation: a map would allocate a node per dozen keys, and the catalogue holds
    /// thousands of these.
    map: Vec<Requirement>,
}

impl From<Requirements> for Vec<NodeSelectorRequirement> {
    fn from(r: Requirements) -> Self {
        r.to_node_selector()
    }
}

impl TryFrom<Vec<NodeSelectorRequirement>> for Requirements {
    type Error = RequirementError;
    fn try_from(reqs: Vec<NodeSelectorRequirement>) -> Result<Self, Self::Error> {
        Requirements::from_node_selector(&reqs)
    }
}

/// Why two requirement sets are incompatible, naming the key and the two sides.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Incompatible {
    /// The key that conflicts.
    pub key: String,
    /// A sentence a person can act on, like Karpenter's.
    pub message: String,
}

impl Requirements {
    /// No requirements.
    pub fn new() -> Self {
        Self::default()
    }

    /// From manifest requirements; repeated keys are intersected.
    ///
    /// # Examples
    ///
    /// A NodePool's requirements as written in its manifest, and a pod that asks for
    /// something they exclude:
    ///
    /// ```
    /// use karpenter_scheduling::Requirements;
    /// use karpenter_scheduling::requirements::NodeSelectorRequirement;
    ///
    /// let manifest: Vec<NodeSelectorRequirement> = serde_json::from_str(
    ///     r#"[
    ///         {"key": "karpenter.sh/capacity-type", "operator": "In",
    ///          "values": ["spot", "on-demand"]},
    ///         {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    ///         {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]}
    ///     ]"#,
    /// )?;
    /// let pool = Requirements::from_node_selector(&manifest)?;
    /// let capacity_type = pool.get("karpenter.sh/capacity-type").unwrap();
    /// assert_eq!(capacity_type.values().collect::<Vec<_>>(), ["on-demand"]);
    ///
    /// let pod: Requirements = serde_json::from_str(
    ///     r#"[{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]"#,
    /// )?;
    /// let conflict = pool.compatible(&pod, true).unwrap_err();
    /// assert_eq!(conflict.key, "kubernetes.io/arch");
    /// assert_eq!(
    ///     conflict.message,
    ///     concat!(
    ///         "key kubernetes.io/arch, ",
    ///         "kubernetes.io/arch In [arm64] not in kubernetes.io/arch In [amd64]"
    ///     )
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_node_selector(reqs: &[NodeSelectorRequirement]) -> Result<Self, RequirementError> {
        let mut out = Self::new();
        for r in reqs {
            out.add(Requirement::from_node_selector(r)?);
        }
        Ok(out)
    }

    /// `In [value]` for every label (alias keys normalised, so the alias and its target
    /// intersect).
    pub fn from_labels<'a, I>(labels: I) -> Self
    where
        I: IntoIterator<Item = (&'a String, &'a String)>,
    {
        let mut out = Self::new();
        for (key, value) in labels {
            let key = labels::normalized(key).map_or_else(|| key.clone(), str::to_owned);
            out.add(Requirement::from_parts(
                key,
                false,
                ValueSet::one(value.clone()),
            ));
        }
        out
    }

    /// Adds a requirement, intersecting with any existing one on the same key.
    pub fn add(&mut self, r: Requirement) {
        self.add_cow(std::borrow::Cow::Owned(r));
    }

    /// Adds every requirement of `other`.
    pub fn add_all(&mut self, other: &Requirements) {
        for r in &other.map {
            self.add_cow(std::borrow::Cow::Borrowed(r));
        }
    }

    /// [`Requirements::add`] of an owned or borrowed requirement, cloning a borrowed one
    /// only when its key is new (an existing key gets a fresh intersection either way).
    fn add_cow(&mut self, r: std::borrow::Cow<'_, Requirement>) {
        match self.position(&r.key) {
            Ok(i) => self.map[i] = r.intersection(&self.map[i]),
            Err(i) => self.map.insert(i, r.into_owned()),
        }
    }

    /// Where `key` is in the sorted list (`Err` with where it would go when undefined).
    fn position(&self, key: &str) -> Result<usize, usize> {
        self.map.binary_search_by(|r| r.key.as_str().cmp(key))
    }

    /// Removes and returns the requirement on `key`, leaving it undefined.
    pub fn remove(&mut self, key: &str) -> Option<Requirement> {
        self.position(key).ok().map(|i| self.map.remove(i))
    }

    /// The requirement on `key`, if defined.
    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.position(key).ok().map(|i| &self.map[i])
    }

    /// Whether `key` is defined.
    pub fn has(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Iterates the requirements in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Requirement> + '_ {
        self.map.iter()
    }

    /// The defined keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.map.iter().map(Requirement::key)
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key is defined.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Whether any requirement carries minValues.
    pub fn has_min_values(&self) -> bool {
        self.map.iter().any(|r| r.min_values.is_some())
    }

    /// Karpenter's `Intersects`: every key defined on both sides has a non-empty intersection.
    ///
    /// Keys defined on one side only never conflict. A key whose intersection is empty is
    /// still accepted when both sides tolerate the label's absence (each side's operator is
    /// NotIn or DoesNotExist), exactly as upstream special-cases it. The first conflicting
    /// key in key order is reported as
    /// `key K, <other's requirement> not in <self's requirement>`. Allocates only on failure.
    pub fn intersects(&self, other: &Requirements) -> Result<(), Incompatible> {
        let (small, large, self_is_small) = if self.map.len() <= other.map.len() {
            (self, other, true)
        } else {
            (other, self, false)
        };
        for a in &small.map {
            let key = &a.key;
            let Some(b) = large.get(key) else { continue };
            let (existing, incoming) = if self_is_small { (a, b) } else { (b, a) };
            if existing.has_intersection(incoming)
                || (tolerates_absence(incoming.operator())
                    && tolerates_absence(existing.operator()))
            {
                continue;
            }
            return Err(Incompatible {
                key: key.clone(),
                message: format!("key {key}, {incoming} not in {existing}"),
            });
        }
        Ok(())
    }

    /// Karpenter's `Compatible`: `other` can be met by something described by `self`. A key
    /// that `other` requires but `self` leaves undefined is allowed only for NotIn and
    /// DoesNotExist, or when the key is well-known (`allow_undefined_well_known`).
    ///
    /// The first undefined key (in key order) fails with
    /// `label "K" does not have known values`, followed by ` (typo of "W"?)` when a well-known
    /// key (only with `allow_undefined_well_known`) or a key of `self` looks like the intended
    /// one; then [`Requirements::intersects`] decides. Allocates only on failure.
    pub fn compatible(
        &self,
        other: &Requirements,
        allow_undefined_well_known: bool,
    ) -> Result<(), Incompatible> {
        for r in &other.map {
            let key = &r.key;
            if (allow_undefined_well_known && labels::is_well_known(key))
                || self.has(key)
                || tolerates_absence(r.operator())
            {
                continue;
            }
            let hint = self.typo_hint(key, allow_undefined_well_known);
            let message = match hint {
                Some(h) => format!("label {key:?} does not have known values (typo of {h:?}?)"),
                None => format!("label {key:?} does not have known values"),
            };
            return Err(Incompatible {
                key: key.clone(),
                message,
            });
        }
        self.intersects(other)
    }

    /// Upstream's `labelHint`, made deterministic: among the well-known labels (only when
    /// allowed), then `self`'s keys, each sorted, the first candidate ending with the part of
    /// `key` after its `/`, else the first containing `key`. Preferring the suffix match keeps
    /// `zone` pointing at `topology.kubernetes.io/zone` rather than `topology.k8s.aws/zone-id`.
    fn typo_hint<'a>(&'a self, key: &str, allow_undefined_well_known: bool) -> Option<&'a str> {
        let suffix = key.split_once('/').map_or(key, |(_, name)| name);
        if key.is_empty() || suffix.is_empty() {
            return None;
        }
        let well_known: &[&'static str] = if allow_undefined_well_known {
            labels::WELL_KNOWN_LABELS
        } else {
            &[]
        };
        let pick = |candidates: &mut dyn Iterator<Item = &'a str>| -> Option<&'a str> {
            let candidates: Vec<&'a str> = candidates.collect();
            candidates
                .iter()
                .find(|c| c.ends_with(suffix))
                .or_else(|| candidates.iter().find(|c| c.contains(key)))
                .copied()
        };
        pick(&mut well_known.iter().copied()).or_else(|| pick(&mut self.keys()))
    }

    /// Whether node `labels` satisfy every requirement (a missing label satisfies only NotIn
    /// and DoesNotExist), as a node selector term is evaluated against a node.
    ///
    /// A present label must be allowed by [`Requirement::has`] (so a bounded requirement needs
    /// an integer value within bounds). A missing label satisfies an unbounded NotIn and
    /// DoesNotExist; a bounded requirement needs the label, as Kubernetes evaluates `Gt`/`Lt`.
    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.map.iter().all(|r| match labels.get(&r.key) {
            Some(value) => r.has(value),
            None => r.gte.is_none() && r.lte.is_none() && tolerates_absence(r.operator()),
        })
    }

    /// The labels these requirements pin to one value (In with a single value).
    pub fn single_valued_labels(&self) -> BTreeMap<String, String> {
        self.map
            .iter()
            .filter(|r| !r.complement && r.values.len() == 1)
            .filter_map(|r| r.any().map(|v| (r.key.clone(), v.to_owned())))
            .collect()
    }

    /// Back to the manifest form, in key order; a requirement that needs several expressions
    /// (see [`Requirement::to_node_selectors`]) contributes all of them, so
    /// [`Requirements::from_node_selector`] of the result equals `self`.
    pub fn to_node_selector(&self) -> Vec<NodeSelectorRequirement> {
        self.map
            .iter()
            .flat_map(Requirement::to_node_selectors)
            .collect()
    }
}

/// Whether a requirement with this operator is met by a node without the label.
fn tolerates_absence(op: Operator) -> bool {
    matches!(op, Operator::NotIn | Operator::DoesNotExist)
}

/// Karpenter's `Requirements.String()`: the requirements in key order, comma-separated,
/// leaving out restricted keys such as `kubernetes.io/hostname`.
impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for r in self
            .map
            .iter()
            .filter(|r| !labels::RESTRICTED_LABELS.contains(&r.key()))
        {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// Shown as a map from key to requirement, in key order.
impl fmt::Debug for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Requirements")
            .field("map", &DebugMap(&self.map))
            .finish()
    }
}

/// The requirements as `{key: requirement, …}`.
struct DebugMap<'a>(&'a [Requirement]);

impl fmt::Debug for DebugMap<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|r| (&r.key, r)))
            .finish()
    }
}

impl<'a> IntoIterator for &'a Requirements {
    type Item = &'a Requirement;
    type IntoIter = std::slice::Iter<'a, Requirement>;

    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

impl FromIterator<Requirement> for Requirements {
    /// Adds each requirement in turn (repeated keys intersect, in the order they come,
    /// exactly as repeated [`Requirements::add`] calls would).
    fn from_iter<T: IntoIterator<Item = Requirement>>(iter: T) -> Self {
        // Sorting once costs a fraction of one insert per key; instance types are built this
        // way, 25-odd keys each, thousands at a time.
        let mut all: Vec<Requirement> = iter.into_iter().collect();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        let mut merged: Vec<Requirement> = Vec::with_capacity(all.len());
        for r in all {
            match merged.last_mut() {
                Some(last) if last.key == r.key => *last = r.intersection(last),
                _ => merged.push(r),
            }
        }
        merged.shrink_to_fit();
        Self { map: merged }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::{ARCH, ZONE};
    use proptest::prelude::*;

    /// Debug output reads as the key-to-requirement map it always printed (benchmark
    /// digests and logs compare it across versions).
    #[test]
    fn debug_shows_a_map_in_key_order() {
        let mut reqs = Requirements::new();
        reqs.add(Requirement::new("b", Operator::In, ["y", "x"]).unwrap());
        reqs.add(Requirement::exists("a"));
        assert_eq!(
            format!("{reqs:?}"),
            "Requirements { map: {\"a\": Requirement { key: \"a\", complement: true, \
             values: {}, gte: None, lte: None, min_values: None }, \"b\": Requirement { \
             key: \"b\", complement: false, values: {\"x\", \"y\"}, gte: None, lte: None, \
             min_values: None }} }"
        );
    }

    #[test]
    fn collecting_is_adding_in_turn_repeated_keys_included() {
        let r =
            |k: &str, op: Operator, v: &[&str]| Requirement::new(k, op, v.iter().copied()).unwrap();
        let parts = vec![
            r("b", Operator::In, &["1", "2", "3"]),
            r("a", Operator::Exists, &[]),
            r("b", Operator::NotIn, &["2"]),
            r("c", Operator::Gt, &["4"]),
            r("b", Operator::In, &["3", "1", "9"]),
            r("c", Operator::Lt, &["9"]),
            r("a", Operator::In, &["x"]),
        ];
        let mut added = Requirements::new();
        for p in parts.clone() {
            added.add(p);
        }
        let collected: Requirements = parts.into_iter().collect();
        assert_eq!(collected, added);
        let b: Vec<&str> = collected.get("b").unwrap().values().collect();
        assert_eq!(b, ["1", "3"]);
        assert_eq!(collected.iter().count(), 3);
    }

    /// Upstream's fixtures on key `key`; a `Flex` suffix adds the minValues upstream gives
    /// that fixture.
    fn fixture(name: &str) -> Requirement {
        fixture_on("key", name)
    }

    fn fixture_on(key: &str, name: &str) -> Requirement {
        use Operator::*;
        let (base, flex) = match name.strip_suffix("Flex") {
            Some(base) => (base, true),
            None => (name, false),
        };
        let (op, values, min): (Operator, &[&str], u32) = match base {
            "exists" => (Exists, &[], 1),
            "doesNotExist" => (DoesNotExist, &[], 1),
            "inA" => (In, &["A"], 1),
            "inB" => (In, &["B"], 1),
            "inAB" => (In, &["A", "B"], 2),
            "notInA" => (NotIn, &["A"], 1),
            "in1" => (In, &["1"], 1),
            "in9" => (In, &["9"], 1),
            "in19" => (In, &["1", "9"], 2),
            "notIn12" => (NotIn, &["1", "2"], 2),
            "greaterThan1" => (Gt, &["1"], 1),
            "greaterThan9" => (Gt, &["9"], 1),
            "lessThan1" => (Lt, &["1"], 1),
            "lessThan9" => (Lt, &["9"], 1),
            other => panic!("unknown fixture {other}"),
        };
        let r = Requirement::new(key, op, values.iter().copied()).expect("valid fixture");
        if flex {
            r.with_min_values(Some(min))
        } else {
            r
        }
    }

    /// A fixture name, or `raw:In|NotIn;v1,v2;gte;lte;minValues` for upstream's struct
    /// literals (empty fields are unset).
    fn expected(spec: &str) -> Requirement {
        let Some(raw) = spec.strip_prefix("raw:") else {
            return fixture(spec);
        };
        let f: Vec<&str> = raw.split(';').collect();
        let num = |s: &str| (!s.is_empty()).then(|| s.parse::<i64>().expect("number"));
        Requirement {
            key: "key".to_owned(),
            complement: f[0] == "NotIn",
            values: f[1]
                .split(',')
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
                .collect(),
            gte: num(f[2]),
            lte: num(f[3]),
            min_values: num(f[4]).map(|n| u32::try_from(n).expect("u32")),
        }
    }

    const FIXTURES: &[&str] = &[
        "exists",
        "doesNotExist",
        "inA",
        "inB",
        "inAB",
        "notInA",
        "in1",
        "in9",
        "in19",
        "notIn12",
        "greaterThan1",
        "greaterThan9",
        "lessThan1",
        "lessThan9",
    ];

    /// Upstream `requirement_test.go`: "should intersect two requirements without minValues" (196 entries).
    const INTERSECT_WITHOUT_MIN: &[(&str, &str, &str)] = &[
        ("exists", "exists", "exists"),
        ("exists", "doesNotExist", "doesNotExist"),
        ("exists", "inA", "inA"),
        ("exists", "inB", "inB"),
        ("exists", "inAB", "inAB"),
        ("exists", "notInA", "notInA"),
        ("exists", "in1", "in1"),
        ("exists", "in9", "in9"),
        ("exists", "in19", "in19"),
        ("exists", "notIn12", "notIn12"),
        ("exists", "greaterThan1", "greaterThan1"),
        ("exists", "greaterThan9", "greaterThan9"),
        ("exists", "lessThan1", "lessThan1"),
        ("exists", "lessThan9", "lessThan9"),
        ("doesNotExist", "exists", "doesNotExist"),
        ("doesNotExist", "doesNotExist", "doesNotExist"),
        ("doesNotExist", "inA", "doesNotExist"),
        ("doesNotExist", "inB", "doesNotExist"),
        ("doesNotExist", "inAB", "doesNotExist"),
        ("doesNotExist", "notInA", "doesNotExist"),
        ("doesNotExist", "in1", "doesNotExist"),
        ("doesNotExist", "in9", "doesNotExist"),
        ("doesNotExist", "in19", "doesNotExist"),
        ("doesNotExist", "notIn12", "doesNotExist"),
        ("doesNotExist", "greaterThan1", "doesNotExist"),
        ("doesNotExist", "greaterThan9", "doesNotExist"),
        ("doesNotExist", "lessThan1", "doesNotExist"),
        ("doesNotExist", "lessThan9", "doesNotExist"),
        ("inA", "exists", "inA"),
        ("inA", "doesNotExist", "doesNotExist"),
        ("inA", "inA", "inA"),
        ("inA", "inB", "doesNotExist"),
        ("inA", "inAB", "inA"),
        ("inA", "notInA", "doesNotExist"),
        ("inA", "in1", "doesNotExist"),
        ("inA", "in9", "doesNotExist"),
        ("inA", "in19", "doesNotExist"),
        ("inA", "notIn12", "inA"),
        ("inA", "greaterThan1", "doesNotExist"),
        ("inA", "greaterThan9", "doesNotExist"),
        ("inA", "lessThan1", "doesNotExist"),
        ("inA", "lessThan9", "doesNotExist"),
        ("inB", "exists", "inB"),
        ("inB", "doesNotExist", "doesNotExist"),
        ("inB", "inA", "doesNotExist"),
        ("inB", "inB", "inB"),
        ("inB", "inAB", "inB"),
        ("inB", "notInA", "inB"),
        ("inB", "in1", "doesNotExist"),
        ("inB", "in9", "doesNotExist"),
        ("inB", "in19", "doesNotExist"),
        ("inB", "notIn12", "inB"),
        ("inB", "greaterThan1", "doesNotExist"),
        ("inB", "greaterThan9", "doesNotExist"),
        ("inB", "lessThan1", "doesNotExist"),
        ("inB", "lessThan9", "doesNotExist"),
        ("inAB", "exists", "inAB"),
        ("inAB", "doesNotExist", "doesNotExist"),
        ("inAB", "inA", "inA"),
        ("inAB", "inB", "inB"),
        ("inAB", "inAB", "inAB"),
        ("inAB", "notInA", "inB"),
        ("inAB", "in1", "doesNotExist"),
        ("inAB", "in9", "doesNotExist"),
        ("inAB", "in19", "doesNotExist"),
        ("inAB", "notIn12", "inAB"),
        ("inAB", "greaterThan1", "doesNotExist"),
        ("inAB", "greaterThan9", "doesNotExist"),
        ("inAB", "lessThan1", "doesNotExist"),
        ("inAB", "lessThan9", "doesNotExist"),
        ("notInA", "exists", "notInA"),
        ("notInA", "doesNotExist", "doesNotExist"),
        ("notInA", "inA", "doesNotExist"),
        ("notInA", "inB", "inB"),
        ("notInA", "inAB", "inB"),
        ("notInA", "notInA", "notInA"),
        ("notInA", "in1", "in1"),
        ("notInA", "in9", "in9"),
        ("notInA", "in19", "in19"),
        ("notInA", "notIn12", "raw:NotIn;A,1,2;;;"),
        ("notInA", "greaterThan1", "greaterThan1"),
        ("notInA", "greaterThan9", "greaterThan9"),
        ("notInA", "lessThan1", "lessThan1"),
        ("notInA", "lessThan9", "lessThan9"),
        ("in1", "exists", "in1"),
        ("in1", "doesNotExist", "doesNotExist"),
        ("in1", "inA", "doesNotExist"),
        ("in1", "inB", "doesNotExist"),
        ("in1", "inAB", "doesNotExist"),
        ("in1", "notInA", "in1"),
        ("in1", "in1", "in1"),
        ("in1", "in9", "doesNotExist"),
        ("in1", "in19", "in1"),
        ("in1", "notIn12", "doesNotExist"),
        ("in1", "greaterThan1", "doesNotExist"),
        ("in1", "greaterThan9", "doesNotExist"),
        ("in1", "lessThan1", "doesNotExist"),
        ("in1", "lessThan9", "in1"),
        ("in9", "exists", "in9"),
        ("in9", "doesNotExist", "doesNotExist"),
        ("in9", "inA", "doesNotExist"),
        ("in9", "inB", "doesNotExist"),
        ("in9", "inAB", "doesNotExist"),
        ("in9", "notInA", "in9"),
        ("in9", "in1", "doesNotExist"),
        ("in9", "in9", "in9"),
        ("in9", "in19", "in9"),
        ("in9", "notIn12", "in9"),
        ("in9", "greaterThan1", "in9"),
        ("in9", "greaterThan9", "doesNotExist"),
        ("in9", "lessThan1", "doesNotExist"),
        ("in9", "lessThan9", "doesNotExist"),
        ("in19", "exists", "in19"),
        ("in19", "doesNotExist", "doesNotExist"),
        ("in19", "inA", "doesNotExist"),
        ("in19", "inB", "doesNotExist"),
        ("in19", "inAB", "doesNotExist"),
        ("in19", "notInA", "in19"),
        ("in19", "in1", "in1"),
        ("in19", "in9", "in9"),
        ("in19", "in19", "in19"),
        ("in19", "notIn12", "in9"),
        ("in19", "greaterThan1", "in9"),
        ("in19", "greaterThan9", "doesNotExist"),
        ("in19", "lessThan1", "doesNotExist"),
        ("in19", "lessThan9", "in1"),
        ("notIn12", "exists", "notIn12"),
        ("notIn12", "doesNotExist", "doesNotExist"),
        ("notIn12", "inA", "inA"),
        ("notIn12", "inB", "inB"),
        ("notIn12", "inAB", "inAB"),
        ("notIn12", "notInA", "raw:NotIn;A,1,2;;;"),
        ("notIn12", "in1", "doesNotExist"),
        ("notIn12", "in9", "in9"),
        ("notIn12", "in19", "in9"),
        ("notIn12", "notIn12", "notIn12"),
        ("notIn12", "greaterThan1", "raw:NotIn;2;2;;"),
        ("notIn12", "greaterThan9", "raw:NotIn;;10;;"),
        ("notIn12", "lessThan1", "raw:NotIn;;;0;"),
        ("notIn12", "lessThan9", "raw:NotIn;1,2;;8;"),
        ("greaterThan1", "exists", "greaterThan1"),
        ("greaterThan1", "doesNotExist", "doesNotExist"),
        ("greaterThan1", "inA", "doesNotExist"),
        ("greaterThan1", "inB", "doesNotExist"),
        ("greaterThan1", "inAB", "doesNotExist"),
        ("greaterThan1", "notInA", "greaterThan1"),
        ("greaterThan1", "in1", "doesNotExist"),
        ("greaterThan1", "in9", "in9"),
        ("greaterThan1", "in19", "in9"),
        ("greaterThan1", "notIn12", "raw:NotIn;2;2;;"),
        ("greaterThan1", "greaterThan1", "greaterThan1"),
        ("greaterThan1", "greaterThan9", "greaterThan9"),
        ("greaterThan1", "lessThan1", "doesNotExist"),
        ("greaterThan1", "lessThan9", "raw:NotIn;;2;8;"),
        ("greaterThan9", "exists", "greaterThan9"),
        ("greaterThan9", "doesNotExist", "doesNotExist"),
        ("greaterThan9", "inA", "doesNotExist"),
        ("greaterThan9", "inB", "doesNotExist"),
        ("greaterThan9", "inAB", "doesNotExist"),
        ("greaterThan9", "notInA", "greaterThan9"),
        ("greaterThan9", "in1", "doesNotExist"),
        ("greaterThan9", "in9", "doesNotExist"),
        ("greaterThan9", "in19", "doesNotExist"),
        ("greaterThan9", "notIn12", "greaterThan9"),
        ("greaterThan9", "greaterThan1", "greaterThan9"),
        ("greaterThan9", "greaterThan9", "greaterThan9"),
        ("greaterThan9", "lessThan1", "doesNotExist"),
        ("greaterThan9", "lessThan9", "doesNotExist"),
        ("lessThan1", "exists", "lessThan1"),
        ("lessThan1", "doesNotExist", "doesNotExist"),
        ("lessThan1", "inA", "doesNotExist"),
        ("lessThan1", "inB", "doesNotExist"),
        ("lessThan1", "inAB", "doesNotExist"),
        ("lessThan1", "notInA", "lessThan1"),
        ("lessThan1", "in1", "doesNotExist"),
        ("lessThan1", "in9", "doesNotExist"),
        ("lessThan1", "in19", "doesNotExist"),
        ("lessThan1", "notIn12", "lessThan1"),
        ("lessThan1", "greaterThan1", "doesNotExist"),
        ("lessThan1", "greaterThan9", "doesNotExist"),
        ("lessThan1", "lessThan1", "lessThan1"),
        ("lessThan1", "lessThan9", "lessThan1"),
        ("lessThan9", "exists", "lessThan9"),
        ("lessThan9", "doesNotExist", "doesNotExist"),
        ("lessThan9", "inA", "doesNotExist"),
        ("lessThan9", "inB", "doesNotExist"),
        ("lessThan9", "inAB", "doesNotExist"),
        ("lessThan9", "notInA", "lessThan9"),
        ("lessThan9", "in1", "in1"),
        ("lessThan9", "in9", "doesNotExist"),
        ("lessThan9", "in19", "in1"),
        ("lessThan9", "notIn12", "raw:NotIn;1,2;;8;"),
        ("lessThan9", "greaterThan1", "raw:NotIn;;2;8;"),
        ("lessThan9", "greaterThan9", "doesNotExist"),
        ("lessThan9", "lessThan1", "lessThan1"),
        ("lessThan9", "lessThan9", "lessThan9"),
    ];
    /// Upstream `requirement_test.go`: "should intersect requirement with minValues with a requirement without" (197 entries).
    const INTERSECT_MIXED_MIN: &[(&str, &str, &str)] = &[
        ("existsFlex", "exists", "existsFlex"),
        ("existsFlex", "doesNotExist", "doesNotExistFlex"),
        ("existsFlex", "inA", "inAFlex"),
        ("existsFlex", "inB", "inBFlex"),
        ("existsFlex", "inAB", "raw:In;A,B;;;1"),
        ("existsFlex", "notInA", "notInAFlex"),
        ("existsFlex", "in1", "in1Flex"),
        ("existsFlex", "in9", "in9Flex"),
        ("existsFlex", "in19", "raw:In;1,9;;;1"),
        ("existsFlex", "notIn12", "raw:NotIn;1,2;;;1"),
        ("existsFlex", "greaterThan1", "greaterThan1Flex"),
        ("existsFlex", "greaterThan9", "greaterThan9Flex"),
        ("existsFlex", "lessThan1", "lessThan1Flex"),
        ("existsFlex", "lessThan9", "lessThan9Flex"),
        ("existsFlex", "exists", "existsFlex"),
        ("doesNotExistFlex", "exists", "doesNotExistFlex"),
        ("doesNotExistFlex", "doesNotExist", "doesNotExistFlex"),
        ("doesNotExistFlex", "inA", "doesNotExistFlex"),
        ("doesNotExistFlex", "inB", "doesNotExistFlex"),
        ("doesNotExistFlex", "inAB", "doesNotExistFlex"),
        ("doesNotExistFlex", "notInA", "doesNotExistFlex"),
        ("doesNotExistFlex", "in1", "doesNotExistFlex"),
        ("doesNotExistFlex", "in9", "doesNotExistFlex"),
        ("doesNotExistFlex", "in19", "doesNotExistFlex"),
        ("doesNotExistFlex", "notIn12", "doesNotExistFlex"),
        ("doesNotExistFlex", "greaterThan1", "doesNotExistFlex"),
        ("doesNotExistFlex", "greaterThan9", "doesNotExistFlex"),
        ("doesNotExistFlex", "lessThan1", "doesNotExistFlex"),
        ("doesNotExistFlex", "lessThan9", "doesNotExistFlex"),
        ("inAFlex", "exists", "inAFlex"),
        ("inAFlex", "doesNotExist", "doesNotExistFlex"),
        ("inAFlex", "inA", "inAFlex"),
        ("inAFlex", "inB", "doesNotExistFlex"),
        ("inAFlex", "inAB", "inAFlex"),
        ("inAFlex", "notInA", "doesNotExistFlex"),
        ("inAFlex", "in1", "doesNotExistFlex"),
        ("inAFlex", "in9", "doesNotExistFlex"),
        ("inAFlex", "in19", "doesNotExistFlex"),
        ("inAFlex", "notIn12", "inAFlex"),
        ("inAFlex", "greaterThan1", "doesNotExistFlex"),
        ("inAFlex", "greaterThan9", "doesNotExistFlex"),
        ("inAFlex", "lessThan1", "doesNotExistFlex"),
        ("inAFlex", "lessThan9", "doesNotExistFlex"),
        ("inBFlex", "exists", "inBFlex"),
        ("inBFlex", "doesNotExist", "doesNotExistFlex"),
        ("inBFlex", "inA", "doesNotExistFlex"),
        ("inBFlex", "inB", "inBFlex"),
        ("inBFlex", "inAB", "inBFlex"),
        ("inBFlex", "notInA", "inBFlex"),
        ("inBFlex", "in1", "doesNotExistFlex"),
        ("inBFlex", "in9", "doesNotExistFlex"),
        ("inBFlex", "in19", "doesNotExistFlex"),
        ("inBFlex", "notIn12", "inBFlex"),
        ("inBFlex", "greaterThan1", "doesNotExistFlex"),
        ("inBFlex", "greaterThan9", "doesNotExistFlex"),
        ("inBFlex", "lessThan1", "doesNotExistFlex"),
        ("inBFlex", "lessThan9", "doesNotExistFlex"),
        ("inABFlex", "exists", "inABFlex"),
        ("inABFlex", "doesNotExist", "raw:In;;;;2"),
        ("inABFlex", "inA", "raw:In;A;;;2"),
        ("inABFlex", "inB", "raw:In;B;;;2"),
        ("inABFlex", "inAB", "inABFlex"),
        ("inABFlex", "notInA", "raw:In;B;;;2"),
        ("inABFlex", "in1", "raw:In;;;;2"),
        ("inABFlex", "in9", "raw:In;;;;2"),
        ("inABFlex", "in19", "raw:In;;;;2"),
        ("inABFlex", "notIn12", "raw:In;A,B;;;2"),
        ("inABFlex", "greaterThan1", "raw:In;;;;2"),
        ("inABFlex", "greaterThan9", "raw:In;;;;2"),
        ("inABFlex", "lessThan1", "raw:In;;;;2"),
        ("inABFlex", "lessThan9", "raw:In;;;;2"),
        ("notInAFlex", "exists", "notInAFlex"),
        ("notInAFlex", "doesNotExist", "doesNotExistFlex"),
        ("notInAFlex", "inA", "doesNotExistFlex"),
        ("notInAFlex", "inB", "inBFlex"),
        ("notInAFlex", "inAB", "inBFlex"),
        ("notInAFlex", "notInA", "notInAFlex"),
        ("notInAFlex", "in1", "in1Flex"),
        ("notInAFlex", "in9", "in9Flex"),
        ("notInAFlex", "in19", "raw:In;1,9;;;1"),
        ("notInAFlex", "notIn12", "raw:NotIn;A,1,2;;;1"),
        ("notInAFlex", "greaterThan1", "greaterThan1Flex"),
        ("notInAFlex", "greaterThan9", "greaterThan9Flex"),
        ("notInAFlex", "lessThan1", "lessThan1Flex"),
        ("notInAFlex", "lessThan9", "lessThan9Flex"),
        ("in1Flex", "exists", "in1Flex"),
        ("in1Flex", "doesNotExist", "doesNotExistFlex"),
        ("in1Flex", "inA", "doesNotExistFlex"),
        ("in1Flex", "inB", "doesNotExistFlex"),
        ("in1Flex", "inAB", "doesNotExistFlex"),
        ("in1Flex", "notInA", "in1Flex"),
        ("in1Flex", "in1", "in1Flex"),
        ("in1Flex", "in9", "doesNotExistFlex"),
        ("in1Flex", "in19", "in1Flex"),
        ("in1Flex", "notIn12", "doesNotExistFlex"),
        ("in1Flex", "greaterThan1", "doesNotExistFlex"),
        ("in1Flex", "greaterThan9", "doesNotExistFlex"),
        ("in1Flex", "lessThan1", "doesNotExistFlex"),
        ("in1Flex", "lessThan9", "in1Flex"),
        ("in9Flex", "exists", "in9Flex"),
        ("in9Flex", "doesNotExist", "doesNotExistFlex"),
        ("in9Flex", "inA", "doesNotExistFlex"),
        ("in9Flex", "inB", "doesNotExistFlex"),
        ("in9Flex", "inAB", "doesNotExistFlex"),
        ("in9Flex", "notInA", "in9Flex"),
        ("in9Flex", "in1", "doesNotExistFlex"),
        ("in9Flex", "in9", "in9Flex"),
        ("in9Flex", "in19", "in9Flex"),
        ("in9Flex", "notIn12", "in9Flex"),
        ("in9Flex", "greaterThan1", "in9Flex"),
        ("in9Flex", "greaterThan9", "doesNotExistFlex"),
        ("in9Flex", "lessThan1", "doesNotExistFlex"),
        ("in9Flex", "lessThan9", "doesNotExistFlex"),
        ("in19Flex", "exists", "in19Flex"),
        ("in19Flex", "doesNotExist", "raw:In;;;;2"),
        ("in19Flex", "inA", "raw:In;;;;2"),
        ("in19Flex", "inB", "raw:In;;;;2"),
        ("in19Flex", "inAB", "raw:In;;;;2"),
        ("in19Flex", "notInA", "raw:In;1,9;;;2"),
        ("in19Flex", "in1", "raw:In;1;;;2"),
        ("in19Flex", "in9", "raw:In;9;;;2"),
        ("in19Flex", "in19", "in19Flex"),
        ("in19Flex", "notIn12", "raw:In;9;;;2"),
        ("in19Flex", "greaterThan1", "raw:In;9;;;2"),
        ("in19Flex", "greaterThan9", "raw:In;;;;2"),
        ("in19Flex", "lessThan1", "raw:In;;;;2"),
        ("in19Flex", "lessThan9", "raw:In;1;;;2"),
        ("notIn12Flex", "exists", "notIn12Flex"),
        ("notIn12Flex", "doesNotExist", "raw:In;;;;2"),
        ("notIn12Flex", "inA", "raw:In;A;;;2"),
        ("notIn12Flex", "inB", "raw:In;B;;;2"),
        ("notIn12Flex", "inAB", "inABFlex"),
        ("notIn12Flex", "notInA", "raw:NotIn;A,1,2;;;2"),
        ("notIn12Flex", "in1", "raw:In;;;;2"),
        ("notIn12Flex", "in9", "raw:In;9;;;2"),
        ("notIn12Flex", "in19", "raw:In;9;;;2"),
        ("notIn12Flex", "notIn12", "notIn12Flex"),
        ("notIn12Flex", "greaterThan1", "raw:NotIn;2;2;;2"),
        ("notIn12Flex", "greaterThan9", "raw:NotIn;;10;;2"),
        ("notIn12Flex", "lessThan1", "raw:NotIn;;;0;2"),
        ("notIn12Flex", "lessThan9", "raw:NotIn;1,2;;8;2"),
        ("greaterThan1Flex", "exists", "greaterThan1Flex"),
        ("greaterThan1Flex", "doesNotExist", "doesNotExistFlex"),
        ("greaterThan1Flex", "inA", "doesNotExistFlex"),
        ("greaterThan1Flex", "inB", "doesNotExistFlex"),
        ("greaterThan1Flex", "inAB", "doesNotExistFlex"),
        ("greaterThan1Flex", "notInA", "greaterThan1Flex"),
        ("greaterThan1Flex", "in1", "doesNotExistFlex"),
        ("greaterThan1Flex", "in9", "in9Flex"),
        ("greaterThan1Flex", "in19", "in9Flex"),
        ("greaterThan1Flex", "notIn12", "raw:NotIn;2;2;;1"),
        ("greaterThan1Flex", "greaterThan1", "greaterThan1Flex"),
        ("greaterThan1Flex", "greaterThan9", "greaterThan9Flex"),
        ("greaterThan1Flex", "lessThan1", "doesNotExistFlex"),
        ("greaterThan1Flex", "lessThan9", "raw:NotIn;;2;8;1"),
        ("greaterThan9Flex", "exists", "greaterThan9Flex"),
        ("greaterThan9Flex", "doesNotExist", "doesNotExistFlex"),
        ("greaterThan9Flex", "inA", "doesNotExistFlex"),
        ("greaterThan9Flex", "inB", "doesNotExistFlex"),
        ("greaterThan9Flex", "inAB", "doesNotExistFlex"),
        ("greaterThan9Flex", "notInA", "greaterThan9Flex"),
        ("greaterThan9Flex", "in1", "doesNotExistFlex"),
        ("greaterThan9Flex", "in9", "doesNotExistFlex"),
        ("greaterThan9Flex", "in19", "doesNotExistFlex"),
        ("greaterThan9Flex", "notIn12", "greaterThan9Flex"),
        ("greaterThan9Flex", "greaterThan1", "greaterThan9Flex"),
        ("greaterThan9Flex", "greaterThan9", "greaterThan9Flex"),
        ("greaterThan9Flex", "lessThan1", "doesNotExistFlex"),
        ("greaterThan9Flex", "lessThan9", "doesNotExistFlex"),
        ("lessThan1Flex", "exists", "lessThan1Flex"),
        ("lessThan1Flex", "doesNotExist", "doesNotExistFlex"),
        ("lessThan1Flex", "inA", "doesNotExistFlex"),
        ("lessThan1Flex", "inB", "doesNotExistFlex"),
        ("lessThan1Flex", "inAB", "doesNotExistFlex"),
        ("lessThan1Flex", "notInA", "lessThan1Flex"),
        ("lessThan1Flex", "in1", "doesNotExistFlex"),
        ("lessThan1Flex", "in9", "doesNotExistFlex"),
        ("lessThan1Flex", "in19", "doesNotExistFlex"),
        ("lessThan1Flex", "notIn12", "lessThan1Flex"),
        ("lessThan1Flex", "greaterThan1", "doesNotExistFlex"),
        ("lessThan1Flex", "greaterThan9", "doesNotExistFlex"),
        ("lessThan1Flex", "lessThan1", "lessThan1Flex"),
        ("lessThan1Flex", "lessThan9", "lessThan1Flex"),
        ("lessThan9Flex", "exists", "lessThan9Flex"),
        ("lessThan9Flex", "doesNotExist", "doesNotExistFlex"),
        ("lessThan9Flex", "inA", "doesNotExistFlex"),
        ("lessThan9Flex", "inB", "doesNotExistFlex"),
        ("lessThan9Flex", "inAB", "doesNotExistFlex"),
        ("lessThan9Flex", "notInA", "lessThan9Flex"),
        ("lessThan9Flex", "in1", "in1Flex"),
        ("lessThan9Flex", "in9", "doesNotExistFlex"),
        ("lessThan9Flex", "in19", "in1Flex"),
        ("lessThan9Flex", "notIn12", "raw:NotIn;1,2;;8;1"),
        ("lessThan9Flex", "greaterThan1", "raw:NotIn;;2;8;1"),
        ("lessThan9Flex", "greaterThan9", "doesNotExistFlex"),
        ("lessThan9Flex", "lessThan1", "lessThan1Flex"),
        ("lessThan9Flex", "lessThan9", "lessThan9Flex"),
    ];
    /// Upstream `requirement_test.go`: "should intersect two requirements with minValues" (197 entries).
    const INTERSECT_BOTH_MIN: &[(&str, &str, &str)] = &[
        ("existsFlex", "existsFlex", "existsFlex"),
        ("existsFlex", "doesNotExistFlex", "doesNotExistFlex"),
        ("existsFlex", "inAFlex", "inAFlex"),
        ("existsFlex", "inBFlex", "inBFlex"),
        ("existsFlex", "inABFlex", "raw:In;A,B;;;2"),
        ("existsFlex", "notInAFlex", "notInAFlex"),
        ("existsFlex", "in1Flex", "in1Flex"),
        ("existsFlex", "in9Flex", "in9Flex"),
        ("existsFlex", "in19Flex", "raw:In;1,9;;;2"),
        ("existsFlex", "notIn12Flex", "raw:NotIn;1,2;;;2"),
        ("existsFlex", "greaterThan1Flex", "greaterThan1Flex"),
        ("existsFlex", "greaterThan9Flex", "greaterThan9Flex"),
        ("existsFlex", "lessThan1Flex", "lessThan1Flex"),
        ("existsFlex", "lessThan9Flex", "lessThan9Flex"),
        ("existsFlex", "existsFlex", "existsFlex"),
        ("doesNotExistFlex", "existsFlex", "doesNotExistFlex"),
        ("doesNotExistFlex", "doesNotExistFlex", "doesNotExistFlex"),
        ("doesNotExistFlex", "inAFlex", "doesNotExistFlex"),
        ("doesNotExistFlex", "inBFlex", "doesNotExistFlex"),
        ("doesNotExistFlex", "inABFlex", "raw:In;;;;2"),
        ("doesNotExistFlex", "notInAFlex", "doesNotExistFlex"),
        ("doesNotExistFlex", "in1Flex", "doesNotExistFlex"),
        ("doesNotExistFlex", "in9Flex", "doesNotExistFlex"),
        ("doesNotExistFlex", "in19Flex", "raw:In;;;;2"),
        ("doesNotExistFlex", "notIn12Flex", "raw:In;;;;2"),
        ("doesNotExistFlex", "greaterThan1Flex", "doesNotExistFlex"),
        ("doesNotExistFlex", "greaterThan9Flex", "doesNotExistFlex"),
        ("doesNotExistFlex", "lessThan1Flex", "doesNotExistFlex"),
        ("doesNotExistFlex", "lessThan9Flex", "doesNotExistFlex"),
        ("inAFlex", "existsFlex", "inAFlex"),
        ("inAFlex", "doesNotExistFlex", "doesNotExistFlex"),
        ("inAFlex", "inAFlex", "inAFlex"),
        ("inAFlex", "inBFlex", "doesNotExistFlex"),
        ("inAFlex", "inABFlex", "raw:In;A;;;2"),
        ("inAFlex", "notInAFlex", "doesNotExistFlex"),
        ("inAFlex", "in1Flex", "doesNotExistFlex"),
        ("inAFlex", "in9Flex", "doesNotExistFlex"),
        ("inAFlex", "in19Flex", "raw:In;;;;2"),
        ("inAFlex", "notIn12Flex", "raw:In;A;;;2"),
        ("inAFlex", "greaterThan1Flex", "doesNotExistFlex"),
        ("inAFlex", "greaterThan9Flex", "doesNotExistFlex"),
        ("inAFlex", "lessThan1Flex", "doesNotExistFlex"),
        ("inAFlex", "lessThan9Flex", "doesNotExistFlex"),
        ("inBFlex", "existsFlex", "inBFlex"),
        ("inBFlex", "doesNotExistFlex", "doesNotExistFlex"),
        ("inBFlex", "inAFlex", "doesNotExistFlex"),
        ("inBFlex", "inBFlex", "inBFlex"),
        ("inBFlex", "inABFlex", "raw:In;B;;;2"),
        ("inBFlex", "notInAFlex", "inBFlex"),
        ("inBFlex", "in1Flex", "doesNotExistFlex"),
        ("inBFlex", "in9Flex", "doesNotExistFlex"),
        ("inBFlex", "in19Flex", "raw:In;;;;2"),
        ("inBFlex", "notIn12Flex", "raw:In;B;;;2"),
        ("inBFlex", "greaterThan1Flex", "doesNotExistFlex"),
        ("inBFlex", "greaterThan9Flex", "doesNotExistFlex"),
        ("inBFlex", "lessThan1Flex", "doesNotExistFlex"),
        ("inBFlex", "lessThan9Flex", "doesNotExistFlex"),
        ("inABFlex", "existsFlex", "inABFlex"),
        ("inABFlex", "doesNotExistFlex", "raw:In;;;;2"),
        ("inABFlex", "inAFlex", "raw:In;A;;;2"),
        ("inABFlex", "inBFlex", "raw:In;B;;;2"),
        ("inABFlex", "inABFlex", "inABFlex"),
        ("inABFlex", "notInAFlex", "raw:In;B;;;2"),
        ("inABFlex", "in1Flex", "raw:In;;;;2"),
        ("inABFlex", "in9Flex", "raw:In;;;;2"),
        ("inABFlex", "in19Flex", "raw:In;;;;2"),
        ("inABFlex", "notIn12Flex", "raw:In;A,B;;;2"),
        ("inABFlex", "greaterThan1Flex", "raw:In;;;;2"),
        ("inABFlex", "greaterThan9Flex", "raw:In;;;;2"),
        ("inABFlex", "lessThan1Flex", "raw:In;;;;2"),
        ("inABFlex", "lessThan9Flex", "raw:In;;;;2"),
        ("notInAFlex", "existsFlex", "notInAFlex"),
        ("notInAFlex", "doesNotExistFlex", "doesNotExistFlex"),
        ("notInAFlex", "inAFlex", "doesNotExistFlex"),
        ("notInAFlex", "inBFlex", "inBFlex"),
        ("notInAFlex", "inABFlex", "raw:In;B;;;2"),
        ("notInAFlex", "notInAFlex", "notInAFlex"),
        ("notInAFlex", "in1Flex", "in1Flex"),
        ("notInAFlex", "in9Flex", "in9Flex"),
        ("notInAFlex", "in19Flex", "raw:In;1,9;;;2"),
        ("notInAFlex", "notIn12Flex", "raw:NotIn;A,1,2;;;2"),
        ("notInAFlex", "greaterThan1Flex", "greaterThan1Flex"),
        ("notInAFlex", "greaterThan9Flex", "greaterThan9Flex"),
        ("notInAFlex", "lessThan1Flex", "lessThan1Flex"),
        ("notInAFlex", "lessThan9Flex", "lessThan9Flex"),
        ("in1Flex", "existsFlex", "in1Flex"),
        ("in1Flex", "doesNotExistFlex", "doesNotExistFlex"),
        ("in1Flex", "inAFlex", "doesNotExistFlex"),
        ("in1Flex", "inBFlex", "doesNotExistFlex"),
        ("in1Flex", "inABFlex", "raw:In;;;;2"),
        ("in1Flex", "notInAFlex", "in1Flex"),
        ("in1Flex", "in1Flex", "in1Flex"),
        ("in1Flex", "in9Flex", "doesNotExistFlex"),
        ("in1Flex", "in19Flex", "raw:In;1;;;2"),
        ("in1Flex", "notIn12Flex", "raw:In;;;;2"),
        ("in1Flex", "greaterThan1Flex", "doesNotExistFlex"),
        ("in1Flex", "greaterThan9Flex", "doesNotExistFlex"),
        ("in1Flex", "lessThan1Flex", "doesNotExistFlex"),
        ("in1Flex", "lessThan9Flex", "in1Flex"),
        ("in9Flex", "existsFlex", "in9Flex"),
        ("in9Flex", "doesNotExistFlex", "doesNotExistFlex"),
        ("in9Flex", "inAFlex", "doesNotExistFlex"),
        ("in9Flex", "inBFlex", "doesNotExistFlex"),
        ("in9Flex", "inABFlex", "raw:In;;;;2"),
        ("in9Flex", "notInAFlex", "in9Flex"),
        ("in9Flex", "in1Flex", "doesNotExistFlex"),
        ("in9Flex", "in9Flex", "in9Flex"),
        ("in9Flex", "in19Flex", "raw:In;9;;;2"),
        ("in9Flex", "notIn12Flex", "raw:In;9;;;2"),
        ("in9Flex", "greaterThan1Flex", "in9Flex"),
        ("in9Flex", "greaterThan9Flex", "doesNotExistFlex"),
        ("in9Flex", "lessThan1Flex", "doesNotExistFlex"),
        ("in9Flex", "lessThan9Flex", "doesNotExistFlex"),
        ("in19Flex", "existsFlex", "in19Flex"),
        ("in19Flex", "doesNotExistFlex", "raw:In;;;;2"),
        ("in19Flex", "inAFlex", "raw:In;;;;2"),
        ("in19Flex", "inBFlex", "raw:In;;;;2"),
        ("in19Flex", "inABFlex", "raw:In;;;;2"),
        ("in19Flex", "notInAFlex", "raw:In;1,9;;;2"),
        ("in19Flex", "in1Flex", "raw:In;1;;;2"),
        ("in19Flex", "in9Flex", "raw:In;9;;;2"),
        ("in19Flex", "in19Flex", "in19Flex"),
        ("in19Flex", "notIn12Flex", "raw:In;9;;;2"),
        ("in19Flex", "greaterThan1Flex", "raw:In;9;;;2"),
        ("in19Flex", "greaterThan9Flex", "raw:In;;;;2"),
        ("in19Flex", "lessThan1Flex", "raw:In;;;;2"),
        ("in19Flex", "lessThan9Flex", "raw:In;1;;;2"),
        ("notIn12Flex", "existsFlex", "notIn12Flex"),
        ("notIn12Flex", "doesNotExistFlex", "raw:In;;;;2"),
        ("notIn12Flex", "inAFlex", "raw:In;A;;;2"),
        ("notIn12Flex", "inBFlex", "raw:In;B;;;2"),
        ("notIn12Flex", "inABFlex", "inABFlex"),
        ("notIn12Flex", "notInAFlex", "raw:NotIn;A,1,2;;;2"),
        ("notIn12Flex", "in1Flex", "raw:In;;;;2"),
        ("notIn12Flex", "in9Flex", "raw:In;9;;;2"),
        ("notIn12Flex", "in19Flex", "raw:In;9;;;2"),
        ("notIn12Flex", "notIn12Flex", "notIn12Flex"),
        ("notIn12Flex", "greaterThan1Flex", "raw:NotIn;2;2;;2"),
        ("notIn12Flex", "greaterThan9Flex", "raw:NotIn;;10;;2"),
        ("notIn12Flex", "lessThan1Flex", "raw:NotIn;;;0;2"),
        ("notIn12Flex", "lessThan9Flex", "raw:NotIn;1,2;;8;2"),
        ("greaterThan1Flex", "existsFlex", "greaterThan1Flex"),
        ("greaterThan1Flex", "doesNotExistFlex", "doesNotExistFlex"),
        ("greaterThan1Flex", "inAFlex", "doesNotExistFlex"),
        ("greaterThan1Flex", "inBFlex", "doesNotExistFlex"),
        ("greaterThan1Flex", "inABFlex", "raw:In;;;;2"),
        ("greaterThan1Flex", "notInAFlex", "greaterThan1Flex"),
        ("greaterThan1Flex", "in1Flex", "doesNotExistFlex"),
        ("greaterThan1Flex", "in9Flex", "in9Flex"),
        ("greaterThan1Flex", "in19Flex", "raw:In;9;;;2"),
        ("greaterThan1Flex", "notIn12Flex", "raw:NotIn;2;2;;2"),
        ("greaterThan1Flex", "greaterThan1Flex", "greaterThan1Flex"),
        ("greaterThan1Flex", "greaterThan9Flex", "greaterThan9Flex"),
        ("greaterThan1Flex", "lessThan1Flex", "doesNotExistFlex"),
        ("greaterThan1Flex", "lessThan9Flex", "raw:NotIn;;2;8;1"),
        ("greaterThan9Flex", "existsFlex", "greaterThan9Flex"),
        ("greaterThan9Flex", "doesNotExistFlex", "doesNotExistFlex"),
        ("greaterThan9Flex", "inAFlex", "doesNotExistFlex"),
        ("greaterThan9Flex", "inBFlex", "doesNotExistFlex"),
        ("greaterThan9Flex", "inABFlex", "raw:In;;;;2"),
        ("greaterThan9Flex", "notInAFlex", "greaterThan9Flex"),
        ("greaterThan9Flex", "in1Flex", "doesNotExistFlex"),
        ("greaterThan9Flex", "in9Flex", "doesNotExistFlex"),
        ("greaterThan9Flex", "in19Flex", "raw:In;;;;2"),
        ("greaterThan9Flex", "notIn12Flex", "raw:NotIn;;10;;2"),
        ("greaterThan9Flex", "greaterThan1Flex", "greaterThan9Flex"),
        ("greaterThan9Flex", "greaterThan9Flex", "greaterThan9Flex"),
        ("greaterThan9Flex", "lessThan1Flex", "doesNotExistFlex"),
        ("greaterThan9Flex", "lessThan9Flex", "doesNotExistFlex"),
        ("lessThan1Flex", "existsFlex", "lessThan1Flex"),
        ("lessThan1Flex", "doesNotExistFlex", "doesNotExistFlex"),
        ("lessThan1Flex", "inAFlex", "doesNotExistFlex"),
        ("lessThan1Flex", "inBFlex", "doesNotExistFlex"),
        ("lessThan1Flex", "inABFlex", "raw:In;;;;2"),
        ("lessThan1Flex", "notInAFlex", "lessThan1Flex"),
        ("lessThan1Flex", "in1Flex", "doesNotExistFlex"),
        ("lessThan1Flex", "in9Flex", "doesNotExistFlex"),
        ("lessThan1Flex", "in19Flex", "raw:In;;;;2"),
        ("lessThan1Flex", "notIn12Flex", "raw:NotIn;;;0;2"),
        ("lessThan1Flex", "greaterThan1Flex", "doesNotExistFlex"),
        ("lessThan1Flex", "greaterThan9Flex", "doesNotExistFlex"),
        ("lessThan1Flex", "lessThan1Flex", "lessThan1Flex"),
        ("lessThan1Flex", "lessThan9Flex", "lessThan1Flex"),
        ("lessThan9Flex", "existsFlex", "lessThan9Flex"),
        ("lessThan9Flex", "doesNotExistFlex", "doesNotExistFlex"),
        ("lessThan9Flex", "inAFlex", "doesNotExistFlex"),
        ("lessThan9Flex", "inBFlex", "doesNotExistFlex"),
        ("lessThan9Flex", "inABFlex", "raw:In;;;;2"),
        ("lessThan9Flex", "notInAFlex", "lessThan9Flex"),
        ("lessThan9Flex", "in1Flex", "in1Flex"),
        ("lessThan9Flex", "in9Flex", "doesNotExistFlex"),
        ("lessThan9Flex", "in19Flex", "raw:In;1;;;2"),
        ("lessThan9Flex", "notIn12Flex", "raw:NotIn;1,2;;8;2"),
        ("lessThan9Flex", "greaterThan1Flex", "raw:NotIn;;2;8;1"),
        ("lessThan9Flex", "greaterThan9Flex", "doesNotExistFlex"),
        ("lessThan9Flex", "lessThan1Flex", "lessThan1Flex"),
        ("lessThan9Flex", "lessThan9Flex", "lessThan9Flex"),
    ];
    /// Upstream "should have the right values".
    const HAS: &[(&str, &str, bool)] = &[
        ("exists", "A", true),
        ("doesNotExist", "A", false),
        ("inA", "A", true),
        ("inB", "A", false),
        ("inAB", "A", true),
        ("notInA", "A", false),
        ("in1", "A", false),
        ("in9", "A", false),
        ("in19", "A", false),
        ("notIn12", "A", true),
        ("greaterThan1", "A", false),
        ("greaterThan9", "A", false),
        ("lessThan1", "A", false),
        ("lessThan9", "A", false),
        ("exists", "B", true),
        ("doesNotExist", "B", false),
        ("inA", "B", false),
        ("inB", "B", true),
        ("inAB", "B", true),
        ("notInA", "B", true),
        ("in1", "B", false),
        ("in9", "B", false),
        ("in19", "B", false),
        ("notIn12", "B", true),
        ("greaterThan1", "B", false),
        ("greaterThan9", "B", false),
        ("lessThan1", "B", false),
        ("lessThan9", "B", false),
        ("exists", "1", true),
        ("doesNotExist", "1", false),
        ("inA", "1", false),
        ("inB", "1", false),
        ("inAB", "1", false),
        ("notInA", "1", true),
        ("in1", "1", true),
        ("in9", "1", false),
        ("in19", "1", true),
        ("notIn12", "1", false),
        ("greaterThan1", "1", false),
        ("greaterThan9", "1", false),
        ("lessThan1", "1", false),
        ("lessThan9", "1", true),
        ("exists", "2", true),
        ("doesNotExist", "2", false),
        ("inA", "2", false),
        ("inB", "2", false),
        ("inAB", "2", false),
        ("notInA", "2", true),
        ("in1", "2", false),
        ("in9", "2", false),
        ("in19", "2", false),
        ("notIn12", "2", false),
        ("greaterThan1", "2", true),
        ("greaterThan9", "2", false),
        ("lessThan1", "2", false),
        ("lessThan9", "2", true),
        ("exists", "9", true),
        ("doesNotExist", "9", false),
        ("inA", "9", false),
        ("inB", "9", false),
        ("inAB", "9", false),
        ("notInA", "9", true),
        ("in1", "9", false),
        ("in9", "9", true),
        ("in19", "9", true),
        ("notIn12", "9", true),
        ("greaterThan1", "9", true),
        ("greaterThan9", "9", false),
        ("lessThan1", "9", false),
        ("lessThan9", "9", false),
    ];
    /// Upstream `requirements_test.go` "should be compatible with well-known v1 labels
    /// undefined" and "should be strictly compatible" (zone key; `(self, other, allow, ok)`).
    const COMPATIBLE: &[(&str, &str, bool, bool)] = &[
        ("unconstrained", "unconstrained", true, true),
        ("unconstrained", "exists", true, true),
        ("unconstrained", "doesNotExist", true, true),
        ("unconstrained", "inA", true, true),
        ("unconstrained", "inB", true, true),
        ("unconstrained", "inAB", true, true),
        ("unconstrained", "notInA", true, true),
        ("unconstrained", "in1", true, true),
        ("unconstrained", "in9", true, true),
        ("unconstrained", "in19", true, true),
        ("unconstrained", "notIn12", true, true),
        ("unconstrained", "greaterThan1", true, true),
        ("unconstrained", "greaterThan9", true, true),
        ("unconstrained", "lessThan1", true, true),
        ("unconstrained", "lessThan9", true, true),
        ("exists", "unconstrained", true, true),
        ("exists", "exists", true, true),
        ("exists", "doesNotExist", true, false),
        ("exists", "inA", true, true),
        ("exists", "inB", true, true),
        ("exists", "inAB", true, true),
        ("exists", "notInA", true, true),
        ("exists", "in1", true, true),
        ("exists", "in9", true, true),
        ("exists", "in19", true, true),
        ("exists", "notIn12", true, true),
        ("exists", "greaterThan1", true, true),
        ("exists", "greaterThan9", true, true),
        ("exists", "lessThan1", true, true),
        ("exists", "lessThan9", true, true),
        ("doesNotExist", "unconstrained", true, true),
        ("doesNotExist", "exists", true, false),
        ("doesNotExist", "doesNotExist", true, true),
        ("doesNotExist", "inA", true, false),
        ("doesNotExist", "inB", true, false),
        ("doesNotExist", "inAB", true, false),
        ("doesNotExist", "notInA", true, true),
        ("doesNotExist", "in1", true, false),
        ("doesNotExist", "in9", true, false),
        ("doesNotExist", "in19", true, false),
        ("doesNotExist", "notIn12", true, true),
        ("doesNotExist", "greaterThan1", true, false),
        ("doesNotExist", "greaterThan9", true, false),
        ("doesNotExist", "lessThan1", true, false),
        ("doesNotExist", "lessThan9", true, false),
        ("inA", "unconstrained", true, true),
        ("inA", "exists", true, true),
        ("inA", "doesNotExist", true, false),
        ("inA", "inA", true, true),
        ("inA", "inB", true, false),
        ("inA", "inAB", true, true),
        ("inA", "notInA", true, false),
        ("inA", "in1", true, false),
        ("inA", "in9", true, false),
        ("inA", "in19", true, false),
        ("inA", "notIn12", true, true),
        ("inA", "greaterThan1", true, false),
        ("inA", "greaterThan9", true, false),
        ("inA", "lessThan1", true, false),
        ("inA", "lessThan9", true, false),
        ("inB", "unconstrained", true, true),
        ("inB", "exists", true, true),
        ("inB", "doesNotExist", true, false),
        ("inB", "inA", true, false),
        ("inB", "inB", true, true),
        ("inB", "inAB", true, true),
        ("inB", "notInA", true, true),
        ("inB", "in1", true, false),
        ("inB", "in9", true, false),
        ("inB", "in19", true, false),
        ("inB", "notIn12", true, true),
        ("inB", "greaterThan1", true, false),
        ("inB", "greaterThan9", true, false),
        ("inB", "lessThan1", true, false),
        ("inB", "lessThan9", true, false),
        ("inAB", "unconstrained", true, true),
        ("inAB", "exists", true, true),
        ("inAB", "doesNotExist", true, false),
        ("inAB", "inA", true, true),
        ("inAB", "inB", true, true),
        ("inAB", "inAB", true, true),
        ("inAB", "notInA", true, true),
        ("inAB", "in1", true, false),
        ("inAB", "in9", true, false),
        ("inAB", "in19", true, false),
        ("inAB", "notIn12", true, true),
        ("inAB", "greaterThan1", true, false),
        ("inAB", "greaterThan9", true, false),
        ("inAB", "lessThan1", true, false),
        ("inAB", "lessThan9", true, false),
        ("notInA", "unconstrained", true, true),
        ("notInA", "exists", true, true),
        ("notInA", "doesNotExist", true, true),
        ("notInA", "inA", true, false),
        ("notInA", "inB", true, true),
        ("notInA", "inAB", true, true),
        ("notInA", "notInA", true, true),
        ("notInA", "in1", true, true),
        ("notInA", "in9", true, true),
        ("notInA", "in19", true, true),
        ("notInA", "notIn12", true, true),
        ("notInA", "greaterThan1", true, true),
        ("notInA", "greaterThan9", true, true),
        ("notInA", "lessThan1", true, true),
        ("notInA", "lessThan9", true, true),
        ("in1", "unconstrained", true, true),
        ("in1", "exists", true, true),
        ("in1", "doesNotExist", true, false),
        ("in1", "inA", true, false),
        ("in1", "inB", true, false),
        ("in1", "inAB", true, false),
        ("in1", "notInA", true, true),
        ("in1", "in1", true, true),
        ("in1", "in9", true, false),
        ("in1", "in19", true, true),
        ("in1", "notIn12", true, false),
        ("in1", "greaterThan1", true, false),
        ("in1", "greaterThan9", true, false),
        ("in1", "lessThan1", true, false),
        ("in1", "lessThan9", true, true),
        ("in9", "unconstrained", true, true),
        ("in9", "exists", true, true),
        ("in9", "doesNotExist", true, false),
        ("in9", "inA", true, false),
        ("in9", "inB", true, false),
        ("in9", "inAB", true, false),
        ("in9", "notInA", true, true),
        ("in9", "in1", true, false),
        ("in9", "in9", true, true),
        ("in9", "in19", true, true),
        ("in9", "notIn12", true, true),
        ("in9", "greaterThan1", true, true),
        ("in9", "greaterThan9", true, false),
        ("in9", "lessThan1", true, false),
        ("in9", "lessThan9", true, false),
        ("in19", "unconstrained", true, true),
        ("in19", "exists", true, true),
        ("in19", "doesNotExist", true, false),
        ("in19", "inA", true, false),
        ("in19", "inB", true, false),
        ("in19", "inAB", true, false),
        ("in19", "notInA", true, true),
        ("in19", "in1", true, true),
        ("in19", "in9", true, true),
        ("in19", "in19", true, true),
        ("in19", "notIn12", true, true),
        ("in19", "greaterThan1", true, true),
        ("in19", "greaterThan9", true, false),
        ("in19", "lessThan1", true, false),
        ("in19", "lessThan9", true, true),
        ("notIn12", "unconstrained", true, true),
        ("notIn12", "exists", true, true),
        ("notIn12", "doesNotExist", true, true),
        ("notIn12", "inA", true, true),
        ("notIn12", "inB", true, true),
        ("notIn12", "inAB", true, true),
        ("notIn12", "notInA", true, true),
        ("notIn12", "in1", true, false),
        ("notIn12", "in9", true, true),
        ("notIn12", "in19", true, true),
        ("notIn12", "notIn12", true, true),
        ("notIn12", "greaterThan1", true, true),
        ("notIn12", "greaterThan9", true, true),
        ("notIn12", "lessThan1", true, true),
        ("notIn12", "lessThan9", true, true),
        ("greaterThan1", "unconstrained", true, true),
        ("greaterThan1", "exists", true, true),
        ("greaterThan1", "doesNotExist", true, false),
        ("greaterThan1", "inA", true, false),
        ("greaterThan1", "inB", true, false),
        ("greaterThan1", "inAB", true, false),
        ("greaterThan1", "notInA", true, true),
        ("greaterThan1", "in1", true, false),
        ("greaterThan1", "in9", true, true),
        ("greaterThan1", "in19", true, true),
        ("greaterThan1", "notIn12", true, true),
        ("greaterThan1", "greaterThan1", true, true),
        ("greaterThan1", "greaterThan9", true, true),
        ("greaterThan1", "lessThan1", true, false),
        ("greaterThan1", "lessThan9", true, true),
        ("greaterThan9", "unconstrained", true, true),
        ("greaterThan9", "exists", true, true),
        ("greaterThan9", "doesNotExist", true, false),
        ("greaterThan9", "inA", true, false),
        ("greaterThan9", "inB", true, false),
        ("greaterThan9", "inAB", true, false),
        ("greaterThan9", "notInA", true, true),
        ("greaterThan9", "in1", true, false),
        ("greaterThan9", "in9", true, false),
        ("greaterThan9", "in19", true, false),
        ("greaterThan9", "notIn12", true, true),
        ("greaterThan9", "greaterThan1", true, true),
        ("greaterThan9", "greaterThan9", true, true),
        ("greaterThan9", "lessThan1", true, false),
        ("greaterThan9", "lessThan9", true, false),
        ("lessThan1", "unconstrained", true, true),
        ("lessThan1", "exists", true, true),
        ("lessThan1", "doesNotExist", true, false),
        ("lessThan1", "inA", true, false),
        ("lessThan1", "inB", true, false),
        ("lessThan1", "inAB", true, false),
        ("lessThan1", "notInA", true, true),
        ("lessThan1", "in1", true, false),
        ("lessThan1", "in9", true, false),
        ("lessThan1", "in19", true, false),
        ("lessThan1", "notIn12", true, true),
        ("lessThan1", "greaterThan1", true, false),
        ("lessThan1", "greaterThan9", true, false),
        ("lessThan1", "lessThan1", true, true),
        ("lessThan1", "lessThan9", true, true),
        ("lessThan9", "unconstrained", true, true),
        ("lessThan9", "exists", true, true),
        ("lessThan9", "doesNotExist", true, false),
        ("lessThan9", "inA", true, false),
        ("lessThan9", "inB", true, false),
        ("lessThan9", "inAB", true, false),
        ("lessThan9", "notInA", true, true),
        ("lessThan9", "in1", true, true),
        ("lessThan9", "in9", true, false),
        ("lessThan9", "in19", true, true),
        ("lessThan9", "notIn12", true, true),
        ("lessThan9", "greaterThan1", true, true),
        ("lessThan9", "greaterThan9", true, false),
        ("lessThan9", "lessThan1", true, true),
        ("lessThan9", "lessThan9", true, true),
        ("unconstrained", "exists", false, false),
        ("unconstrained", "inA", false, false),
        ("unconstrained", "inB", false, false),
        ("unconstrained", "inAB", false, false),
        ("unconstrained", "in1", false, false),
        ("unconstrained", "in9", false, false),
        ("unconstrained", "in19", false, false),
        ("unconstrained", "greaterThan1", false, false),
        ("unconstrained", "greaterThan9", false, false),
        ("unconstrained", "lessThan1", false, false),
        ("unconstrained", "lessThan9", false, false),
        ("unconstrained", "unconstrained", false, true),
        ("unconstrained", "doesNotExist", false, true),
        ("unconstrained", "notInA", false, true),
        ("unconstrained", "notIn12", false, true),
        ("exists", "unconstrained", false, true),
        ("exists", "exists", false, true),
        ("exists", "doesNotExist", false, false),
        ("exists", "inA", false, true),
        ("exists", "inB", false, true),
        ("exists", "inAB", false, true),
        ("exists", "notInA", false, true),
        ("exists", "in1", false, true),
        ("exists", "in9", false, true),
        ("exists", "in19", false, true),
        ("exists", "notIn12", false, true),
        ("exists", "greaterThan1", false, true),
        ("exists", "greaterThan9", false, true),
        ("exists", "lessThan1", false, true),
        ("exists", "lessThan9", false, true),
        ("doesNotExist", "unconstrained", false, true),
        ("doesNotExist", "exists", false, false),
        ("doesNotExist", "doesNotExist", false, true),
        ("doesNotExist", "inA", false, false),
        ("doesNotExist", "inB", false, false),
        ("doesNotExist", "inAB", false, false),
        ("doesNotExist", "notInA", false, true),
        ("doesNotExist", "in1", false, false),
        ("doesNotExist", "in9", false, false),
        ("doesNotExist", "in19", false, false),
        ("doesNotExist", "notIn12", false, true),
        ("doesNotExist", "greaterThan1", false, false),
        ("doesNotExist", "greaterThan9", false, false),
        ("doesNotExist", "lessThan1", false, false),
        ("doesNotExist", "lessThan9", false, false),
        ("inA", "unconstrained", false, true),
        ("inA", "exists", false, true),
        ("inA", "doesNotExist", false, false),
        ("inA", "inA", false, true),
        ("inA", "inB", false, false),
        ("inA", "inAB", false, true),
        ("inA", "notInA", false, false),
        ("inA", "in1", false, false),
        ("inA", "in9", false, false),
        ("inA", "in19", false, false),
        ("inA", "notIn12", false, true),
        ("inA", "greaterThan1", false, false),
        ("inA", "greaterThan9", false, false),
        ("inA", "lessThan1", false, false),
        ("inA", "lessThan9", false, false),
        ("inB", "unconstrained", false, true),
        ("inB", "exists", false, true),
        ("inB", "doesNotExist", false, false),
        ("inB", "inA", false, false),
        ("inB", "inB", false, true),
        ("inB", "inAB", false, true),
        ("inB", "notInA", false, true),
        ("inB", "in1", false, false),
        ("inB", "in9", false, false),
        ("inB", "in19", false, false),
        ("inB", "notIn12", false, true),
        ("inB", "greaterThan1", false, false),
        ("inB", "greaterThan9", false, false),
        ("inB", "lessThan1", false, false),
        ("inB", "lessThan9", false, false),
        ("inAB", "unconstrained", false, true),
        ("inAB", "exists", false, true),
        ("inAB", "doesNotExist", false, false),
        ("inAB", "inA", false, true),
        ("inAB", "inB", false, true),
        ("inAB", "inAB", false, true),
        ("inAB", "notInA", false, true),
        ("inAB", "in1", false, false),
        ("inAB", "in9", false, false),
        ("inAB", "in19", false, false),
        ("inAB", "notIn12", false, true),
        ("inAB", "greaterThan1", false, false),
        ("inAB", "greaterThan9", false, false),
        ("inAB", "lessThan1", false, false),
        ("inAB", "lessThan9", false, false),
        ("notInA", "unconstrained", false, true),
        ("notInA", "exists", false, true),
        ("notInA", "doesNotExist", false, true),
        ("notInA", "inA", false, false),
        ("notInA", "inB", false, true),
        ("notInA", "inAB", false, true),
        ("notInA", "notInA", false, true),
        ("notInA", "in1", false, true),
        ("notInA", "in9", false, true),
        ("notInA", "in19", false, true),
        ("notInA", "notIn12", false, true),
        ("notInA", "greaterThan1", false, true),
        ("notInA", "greaterThan9", false, true),
        ("notInA", "lessThan1", false, true),
        ("notInA", "lessThan9", false, true),
        ("in1", "unconstrained", false, true),
        ("in1", "exists", false, true),
        ("in1", "doesNotExist", false, false),
        ("in1", "inA", false, false),
        ("in1", "inB", false, false),
        ("in1", "inAB", false, false),
        ("in1", "notInA", false, true),
        ("in1", "in1", false, true),
        ("in1", "in9", false, false),
        ("in1", "in19", false, true),
        ("in1", "notIn12", false, false),
        ("in1", "greaterThan1", false, false),
        ("in1", "greaterThan9", false, false),
        ("in1", "lessThan1", false, false),
        ("in1", "lessThan9", false, true),
        ("in9", "unconstrained", false, true),
        ("in9", "exists", false, true),
        ("in9", "doesNotExist", false, false),
        ("in9", "inA", false, false),
        ("in9", "inB", false, false),
        ("in9", "inAB", false, false),
        ("in9", "notInA", false, true),
        ("in9", "in1", false, false),
        ("in9", "in9", false, true),
        ("in9", "in19", false, true),
        ("in9", "notIn12", false, true),
        ("in9", "greaterThan1", false, true),
        ("in9", "greaterThan9", false, false),
        ("in9", "lessThan1", false, false),
        ("in9", "lessThan9", false, false),
        ("in19", "unconstrained", false, true),
        ("in19", "exists", false, true),
        ("in19", "doesNotExist", false, false),
        ("in19", "inA", false, false),
        ("in19", "inB", false, false),
        ("in19", "inAB", false, false),
        ("in19", "notInA", false, true),
        ("in19", "in1", false, true),
        ("in19", "in9", false, true),
        ("in19", "in19", false, true),
        ("in19", "notIn12", false, true),
        ("in19", "greaterThan1", false, true),
        ("in19", "greaterThan9", false, false),
        ("in19", "lessThan1", false, false),
        ("in19", "lessThan9", false, true),
        ("notIn12", "unconstrained", false, true),
        ("notIn12", "exists", false, true),
        ("notIn12", "doesNotExist", false, true),
        ("notIn12", "inA", false, true),
        ("notIn12", "inB", false, true),
        ("notIn12", "inAB", false, true),
        ("notIn12", "notInA", false, true),
        ("notIn12", "in1", false, false),
        ("notIn12", "in9", false, true),
        ("notIn12", "in19", false, true),
        ("notIn12", "notIn12", false, true),
        ("notIn12", "greaterThan1", false, true),
        ("notIn12", "greaterThan9", false, true),
        ("notIn12", "lessThan1", false, true),
        ("notIn12", "lessThan9", false, true),
        ("greaterThan1", "unconstrained", false, true),
        ("greaterThan1", "exists", false, true),
        ("greaterThan1", "doesNotExist", false, false),
        ("greaterThan1", "inA", false, false),
        ("greaterThan1", "inB", false, false),
        ("greaterThan1", "inAB", false, false),
        ("greaterThan1", "notInA", false, true),
        ("greaterThan1", "in1", false, false),
        ("greaterThan1", "in9", false, true),
        ("greaterThan1", "in19", false, true),
        ("greaterThan1", "notIn12", false, true),
        ("greaterThan1", "greaterThan1", false, true),
        ("greaterThan1", "greaterThan9", false, true),
        ("greaterThan1", "lessThan1", false, false),
        ("greaterThan1", "lessThan9", false, true),
        ("greaterThan9", "unconstrained", false, true),
        ("greaterThan9", "exists", false, true),
        ("greaterThan9", "doesNotExist", false, false),
        ("greaterThan9", "inA", false, false),
        ("greaterThan9", "inB", false, false),
        ("greaterThan9", "inAB", false, false),
        ("greaterThan9", "notInA", false, true),
        ("greaterThan9", "in1", false, false),
        ("greaterThan9", "in9", false, false),
        ("greaterThan9", "in19", false, false),
        ("greaterThan9", "notIn12", false, true),
        ("greaterThan9", "greaterThan1", false, true),
        ("greaterThan9", "greaterThan9", false, true),
        ("greaterThan9", "lessThan1", false, false),
        ("greaterThan9", "lessThan9", false, false),
        ("lessThan1", "unconstrained", false, true),
        ("lessThan1", "exists", false, true),
        ("lessThan1", "doesNotExist", false, false),
        ("lessThan1", "inA", false, false),
        ("lessThan1", "inB", false, false),
        ("lessThan1", "inAB", false, false),
        ("lessThan1", "notInA", false, true),
        ("lessThan1", "in1", false, false),
        ("lessThan1", "in9", false, false),
        ("lessThan1", "in19", false, false),
        ("lessThan1", "notIn12", false, true),
        ("lessThan1", "greaterThan1", false, false),
        ("lessThan1", "greaterThan9", false, false),
        ("lessThan1", "lessThan1", false, true),
        ("lessThan1", "lessThan9", false, true),
        ("lessThan9", "unconstrained", false, true),
        ("lessThan9", "exists", false, true),
        ("lessThan9", "doesNotExist", false, false),
        ("lessThan9", "inA", false, false),
        ("lessThan9", "inB", false, false),
        ("lessThan9", "inAB", false, false),
        ("lessThan9", "notInA", false, true),
        ("lessThan9", "in1", false, true),
        ("lessThan9", "in9", false, false),
        ("lessThan9", "in19", false, true),
        ("lessThan9", "notIn12", false, true),
        ("lessThan9", "greaterThan1", false, true),
        ("lessThan9", "greaterThan9", false, false),
        ("lessThan9", "lessThan1", false, true),
        ("lessThan9", "lessThan9", false, true),
    ];

    #[test]
    fn intersection_matches_upstream_tables() {
        let mut checked = 0;
        for table in [
            INTERSECT_WITHOUT_MIN,
            INTERSECT_MIXED_MIN,
            INTERSECT_BOTH_MIN,
        ] {
            for (a, b, want) in table {
                let (a_req, b_req) = (fixture(a), fixture(b));
                let got = a_req.intersection(&b_req);
                assert_eq!(got, expected(want), "{a} ∩ {b}");
                // HasIntersection must agree with building the intersection.
                assert_eq!(
                    a_req.has_intersection(&b_req),
                    !got.is_empty(),
                    "{a} has∩ {b}"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 590);
    }

    #[test]
    fn has_matches_upstream_table() {
        for (name, value, want) in HAS {
            assert_eq!(fixture(name).has(value), *want, "{name}.has({value})");
        }
        assert_eq!(HAS.len(), 70);
    }

    #[test]
    fn operator_len_and_display_match_upstream() {
        use Operator::*;
        let cases: &[(&str, Operator, usize, &str)] = &[
            ("exists", Exists, usize::MAX, "key Exists"),
            ("doesNotExist", DoesNotExist, 0, "key DoesNotExist"),
            ("inA", In, 1, "key In [A]"),
            ("inB", In, 1, "key In [B]"),
            ("inAB", In, 2, "key In [A B]"),
            ("notInA", NotIn, usize::MAX, "key NotIn [A]"),
            ("in1", In, 1, "key In [1]"),
            ("in9", In, 1, "key In [9]"),
            ("in19", In, 2, "key In [1 9]"),
            ("notIn12", NotIn, usize::MAX, "key NotIn [1 2]"),
            ("greaterThan1", Exists, usize::MAX, "key Exists >=2"),
            ("greaterThan9", Exists, usize::MAX, "key Exists >=10"),
            ("lessThan1", Exists, usize::MAX, "key Exists <=0"),
            ("lessThan9", Exists, usize::MAX, "key Exists <=8"),
        ];
        for (name, op, len, text) in cases {
            let r = fixture(name);
            assert_eq!(r.operator(), *op, "{name}");
            assert_eq!(r.len(), *len, "{name}");
            assert_eq!(r.to_string(), *text, "{name}");
            assert_eq!(r.is_empty(), *len == 0, "{name}");
        }
        let between = fixture("greaterThan1").intersection(&fixture("lessThan9"));
        assert_eq!(between.to_string(), "key Exists >=2 <=8");
        let crossed = fixture("greaterThan9").intersection(&fixture("lessThan1"));
        assert_eq!(crossed.to_string(), "key DoesNotExist");
        assert_eq!(fixture("inABFlex").to_string(), "key In [A B] minValues 2");
        let many =
            Requirement::new("k", Operator::In, ["a", "b", "c", "d", "e", "f", "g"]).unwrap();
        assert_eq!(many.to_string(), "k In [a b c d e and 2 others]");
    }

    #[test]
    fn any_is_smallest_allowed_or_none() {
        let cases: &[(&str, Option<&str>)] = &[
            ("exists", None),
            ("doesNotExist", None),
            ("inA", Some("A")),
            ("inB", Some("B")),
            ("inAB", Some("A")),
            ("notInA", None),
            ("in1", Some("1")),
            ("in19", Some("1")),
            ("notIn12", None),
            ("greaterThan1", None),
            ("lessThan9", None),
        ];
        for (name, want) in cases {
            assert_eq!(fixture(name).any(), *want, "{name}");
        }
    }

    #[test]
    fn new_validates_like_the_api_server() {
        use Operator::*;
        let none: [&str; 0] = [];
        let bad: Vec<(Operator, Vec<&str>, &str)> = vec![
            (In, vec![], "requires at least one value"),
            (NotIn, vec![], "requires at least one value"),
            (Exists, vec!["a"], "takes no values"),
            (DoesNotExist, vec!["a"], "takes no values"),
            (Gt, vec![], "exactly one integer value"),
            (Lt, vec!["1", "2"], "exactly one integer value"),
            (Gte, vec!["a"], "requires an integer value, got \"a\""),
            (Lte, vec!["1.5"], "requires an integer value"),
            (Gt, vec![" 1"], "requires an integer value"),
            (
                Gt,
                vec!["99999999999999999999"],
                "requires an integer value",
            ),
        ];
        for (op, values, reason) in bad {
            let err = Requirement::new("my-key", op, values.clone()).expect_err("accepted");
            assert_eq!(err.key, "my-key");
            assert!(
                err.reason.contains(reason),
                "{op} {values:?}: {}",
                err.reason
            );
            assert!(
                err.to_string().starts_with("requirement on \"my-key\": "),
                "{err}"
            );
        }
        assert!(Requirement::new("k", Exists, none).is_ok());
        assert!(
            Requirement::new("k", Gt, ["-5"]).is_ok(),
            "pod affinity may use negatives"
        );
        assert!(
            Requirement::new("k", Gt, ["+5"]).is_ok(),
            "strconv.Atoi accepts a sign"
        );
        let dup = Requirement::new("k", In, ["a", "a"]).unwrap();
        assert_eq!(dup.len(), 1);
    }

    #[test]
    fn bounds_are_inclusive_and_canonical() {
        use Operator::*;
        let gte2 = Requirement::new("key", Gte, ["2"]).unwrap();
        let gt1 = fixture("greaterThan1");
        assert_eq!(gte2, gt1, "Gte 2 and Gt 1 share one normal form");
        for (v, want) in [
            ("2", true),
            ("3", true),
            ("100", true),
            ("1", false),
            ("0", false),
        ] {
            assert_eq!(gte2.has(v), want, "Gte 2 has {v}");
        }
        let lte8 = Requirement::new("key", Lte, ["8"]).unwrap();
        assert_eq!(lte8, fixture("lessThan9"));
        for (v, want) in [
            ("8", true),
            ("7", true),
            ("0", true),
            ("-3", true),
            ("9", false),
        ] {
            assert_eq!(lte8.has(v), want, "Lte 8 has {v}");
        }
        let both = gte2.intersection(&lte8);
        assert_eq!(both.bounds(), (Some(2), Some(8)));
        for (v, want) in [
            ("2", true),
            ("5", true),
            ("8", true),
            ("1", false),
            ("9", false),
        ] {
            assert_eq!(both.has(v), want, "[2,8] has {v}");
        }
        assert!(
            !both.has("five"),
            "a non-integer fails a bounded requirement"
        );
        assert!(!both.has(""), "an empty value fails a bounded requirement");
        // The tighter bound wins, whichever operator wrote it.
        let gt4 = Requirement::new("key", Gt, ["4"]).unwrap();
        let gte5 = Requirement::new("key", Gte, ["5"]).unwrap();
        assert_eq!(gt4.intersection(&gte5).bounds(), (Some(5), None));
        let gt5 = Requirement::new("key", Gt, ["5"]).unwrap();
        assert_eq!(gt5.intersection(&gte5).bounds(), (Some(6), None));
        let lt5 = Requirement::new("key", Lt, ["5"]).unwrap();
        let lte5 = Requirement::new("key", Lte, ["5"]).unwrap();
        assert_eq!(lt5.intersection(&lte5).bounds(), (None, Some(4)));
        // Bounds at the edges of i64.
        let gt_max = Requirement::new("key", Gt, [i64::MAX.to_string()]).unwrap();
        assert_eq!(gt_max.operator(), DoesNotExist);
        assert_eq!(gt_max.len(), 0);
        let lt_min = Requirement::new("key", Lt, [i64::MIN.to_string()]).unwrap();
        assert!(lt_min.is_empty());
        let gte_min = Requirement::new("key", Gte, [i64::MIN.to_string()]).unwrap();
        assert!(gte_min.has(&i64::MIN.to_string()));
        assert!(!gte_min.has("x"));
        let lte_max = Requirement::new("key", Lte, [i64::MAX.to_string()]).unwrap();
        assert!(lte_max.has(&i64::MAX.to_string()));
        // Bounds collapse a finite set and then disappear.
        let in_set = Requirement::new("key", In, ["1", "5", "9", "x"]).unwrap();
        let collapsed = in_set.intersection(&both);
        assert_eq!(collapsed.values().collect::<Vec<_>>(), ["5"]);
        assert_eq!(collapsed.bounds(), (None, None));
        assert_eq!(collapsed.operator(), In);
    }

    #[test]
    fn keys_are_normalized() {
        let r = Requirement::new(
            "failure-domain.beta.kubernetes.io/zone",
            Operator::In,
            ["a"],
        )
        .unwrap();
        assert_eq!(r.key(), ZONE);
        assert_eq!(Requirement::exists("beta.kubernetes.io/arch").key(), ARCH);
        let labels: BTreeMap<String, String> = [
            (
                "failure-domain.beta.kubernetes.io/zone".to_owned(),
                "test".to_owned(),
            ),
            (
                "failure-domain.beta.kubernetes.io/region".to_owned(),
                "test".to_owned(),
            ),
            ("beta.kubernetes.io/arch".to_owned(), "test".to_owned()),
            ("beta.kubernetes.io/os".to_owned(), "test".to_owned()),
            (
                "beta.kubernetes.io/instance-type".to_owned(),
                "test".to_owned(),
            ),
        ]
        .into_iter()
        .collect();
        let want = [
            "kubernetes.io/arch",
            "kubernetes.io/os",
            "node.kubernetes.io/instance-type",
            "topology.kubernetes.io/region",
            "topology.kubernetes.io/zone",
        ];
        let from_labels = Requirements::from_labels(&labels);
        assert_eq!(from_labels.keys().collect::<Vec<_>>(), want);
        let exprs: Vec<NodeSelectorRequirement> = labels
            .iter()
            .map(|(k, v)| NodeSelectorRequirement {
                key: k.clone(),
                operator: Operator::In,
                values: vec![v.clone()],
                min_values: None,
            })
            .collect();
        let from_selector = Requirements::from_node_selector(&exprs).unwrap();
        assert_eq!(from_selector, from_labels);
        // An alias and its target intersect.
        let mut reqs = Requirements::from_labels(&labels);
        reqs.add(Requirement::new(ZONE, Operator::In, ["other"]).unwrap());
        assert!(reqs.get(ZONE).unwrap().is_empty());
        assert!(!reqs.has("failure-domain.beta.kubernetes.io/zone"));
    }

    fn nsr(key: &str, op: Operator, values: &[&str], min: Option<u32>) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.to_owned(),
            operator: op,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
            min_values: min,
        }
    }

    #[test]
    fn to_node_selector_forms() {
        use Operator::*;
        let cases: &[(&str, NodeSelectorRequirement)] = &[
            ("exists", nsr("key", Exists, &[], None)),
            ("doesNotExist", nsr("key", DoesNotExist, &[], None)),
            ("inAB", nsr("key", In, &["A", "B"], None)),
            ("notIn12", nsr("key", NotIn, &["1", "2"], None)),
            ("greaterThan1", nsr("key", Gt, &["1"], None)),
            ("greaterThan9", nsr("key", Gt, &["9"], None)),
            ("lessThan1", nsr("key", Lt, &["1"], None)),
            ("lessThan9", nsr("key", Lt, &["9"], None)),
            ("existsFlex", nsr("key", Exists, &[], Some(1))),
            ("in19Flex", nsr("key", In, &["1", "9"], Some(2))),
            ("greaterThan1Flex", nsr("key", Gt, &["1"], Some(1))),
        ];
        for (name, want) in cases {
            let r = fixture(name);
            assert_eq!(&r.to_node_selector(), want, "{name}");
            assert_eq!(r.to_node_selectors(), vec![want.clone()], "{name}");
        }
        // Gte 0 keeps a non-negative value (Karpenter's CRDs reject `Gt -1`).
        let gte0 = Requirement::new("key", Gte, ["0"]).unwrap();
        assert_eq!(gte0.to_node_selector(), nsr("key", Gte, &["0"], None));
        let gte_min = Requirement::new("key", Gte, [i64::MIN.to_string()]).unwrap();
        assert_eq!(gte_min.to_node_selector().operator, Gte);
        let lte_max = Requirement::new("key", Lte, [i64::MAX.to_string()]).unwrap();
        assert_eq!(lte_max.to_node_selector().operator, Lte);
        // Both bounds plus exclusions need three expressions.
        let r = fixture("notIn12Flex")
            .intersection(&fixture("greaterThan1"))
            .intersection(&fixture("lessThan9"));
        assert_eq!(
            r.to_node_selectors(),
            vec![
                nsr("key", Gt, &["1"], Some(2)),
                nsr("key", Lt, &["9"], Some(2)),
                nsr("key", NotIn, &["2"], Some(2)),
            ]
        );
        assert_eq!(r.to_node_selector(), nsr("key", Gt, &["1"], Some(2)));
    }

    #[test]
    fn requirements_to_node_selector_round_trips() {
        let reqs: Requirements = FIXTURES
            .iter()
            .map(|name| fixture_on(name, name))
            .chain(
                [fixture_on("cpu", "greaterThan1").intersection(&fixture_on("cpu", "lessThan9"))],
            )
            .collect();
        let exprs = reqs.to_node_selector();
        assert_eq!(exprs.len(), FIXTURES.len() + 2, "cpu needs two expressions");
        assert_eq!(Requirements::from_node_selector(&exprs).unwrap(), reqs);
        // Upstream: "should return both Gte and Lte requirements when both bounds exist".
        let cpu: Requirements = [
            Requirement::new("cpu", Operator::Gte, ["8"]).unwrap(),
            Requirement::new("cpu", Operator::Lte, ["8"]).unwrap(),
        ]
        .into_iter()
        .collect();
        let exprs = cpu.to_node_selector();
        assert_eq!(
            exprs,
            vec![
                nsr("cpu", Operator::Gt, &["7"], None),
                nsr("cpu", Operator::Lt, &["9"], None)
            ]
        );
        assert!(cpu.matches_labels(&labels(&[("cpu", "8")])));
        assert!(!cpu.matches_labels(&labels(&[("cpu", "9")])));
    }

    #[test]
    fn from_node_selector_intersects_repeats_and_reports_errors() {
        use Operator::*;
        let reqs = Requirements::from_node_selector(&[
            nsr("zone", In, &["a", "b", "c"], None),
            nsr("zone", NotIn, &["b"], Some(2)),
            nsr("zone", In, &["b", "c", "d"], None),
        ])
        .unwrap();
        let zone = reqs.get("zone").unwrap();
        assert_eq!(zone.values().collect::<Vec<_>>(), ["c"]);
        assert_eq!(zone.min_values(), Some(2));
        assert!(reqs.has_min_values());
        let err = Requirements::from_node_selector(&[nsr("cpu", Gt, &["x"], None)]).unwrap_err();
        assert_eq!(err.key, "cpu");
    }

    fn zone_reqs(name: &str) -> Requirements {
        if name == "unconstrained" {
            Requirements::new()
        } else {
            std::iter::once(fixture_on(ZONE, name)).collect()
        }
    }

    #[test]
    fn compatible_matches_upstream_matrix() {
        for (a, b, allow, ok) in COMPATIBLE {
            let got = zone_reqs(a).compatible(&zone_reqs(b), *allow);
            assert_eq!(
                got.is_ok(),
                *ok,
                "{a}.compatible({b}, allow={allow}): {got:?}"
            );
        }
        assert_eq!(COMPATIBLE.len(), 450);
    }

    #[test]
    fn compatible_error_messages_match_upstream() {
        let cases = [
            ("zone", "topology.kubernetes.io/zone"),
            ("region", "topology.kubernetes.io/region"),
            ("nodepool", "karpenter.sh/nodepool"),
            ("instance-type", "node.kubernetes.io/instance-type"),
            ("arch", "kubernetes.io/arch"),
            ("capacity-type", "karpenter.sh/capacity-type"),
            ("topology.kubernetesio/zone", "topology.kubernetes.io/zone"),
            ("node.io/zone", "topology.kubernetes.io/zone"),
            (
                "topology.kubernetes.io/regio",
                "topology.kubernetes.io/region",
            ),
            ("node.kubernetes.io/region", "topology.kubernetes.io/region"),
            ("karpenter/nodepool", "karpenter.sh/nodepool"),
        ];
        for (bad, hint) in cases {
            let other: Requirements = std::iter::once(Requirement::exists(bad)).collect();
            let err = Requirements::new().compatible(&other, true).unwrap_err();
            assert_eq!(err.key, bad);
            assert_eq!(
                err.message,
                format!("label {bad:?} does not have known values (typo of {hint:?}?)")
            );
        }
        let other: Requirements = std::iter::once(Requirement::exists("deployment")).collect();
        let err = Requirements::new().compatible(&other, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"label "deployment" does not have known values"#
        );
        // Without the well-known allowance, a defined key of `self` can still be the hint.
        let mine: Requirements = std::iter::once(Requirement::exists("example.com/team")).collect();
        let other: Requirements = std::iter::once(Requirement::exists("team")).collect();
        let err = mine.compatible(&other, false).unwrap_err();
        assert!(
            err.message.ends_with(r#"(typo of "example.com/team"?)"#),
            "{}",
            err.message
        );
    }

    #[test]
    fn intersects_semantics_and_message() {
        use Operator::*;
        let a: Requirements = [Requirement::new(ZONE, In, ["us-east-1a"]).unwrap()]
            .into_iter()
            .collect();
        let b: Requirements = [Requirement::new(ZONE, In, ["us-east-1b"]).unwrap()]
            .into_iter()
            .collect();
        let err = a.intersects(&b).unwrap_err();
        assert_eq!(err.key, ZONE);
        assert_eq!(
            err.message,
            "key topology.kubernetes.io/zone, topology.kubernetes.io/zone In [us-east-1b] not in \
             topology.kubernetes.io/zone In [us-east-1a]"
        );
        // Undefined keys on either side never conflict.
        let c: Requirements = [Requirement::exists("other")].into_iter().collect();
        assert!(a.intersects(&c).is_ok());
        assert!(c.intersects(&a).is_ok());
        assert!(Requirements::new().intersects(&a).is_ok());
        // Both sides tolerating absence is accepted even with no common value.
        let dne: Requirements = [Requirement::does_not_exist("k")].into_iter().collect();
        let not_in: Requirements = [Requirement::new("k", NotIn, ["x"]).unwrap()]
            .into_iter()
            .collect();
        let exists: Requirements = [Requirement::exists("k")].into_iter().collect();
        let in_x: Requirements = [Requirement::new("k", In, ["x"]).unwrap()]
            .into_iter()
            .collect();
        assert!(dne.intersects(&dne).is_ok());
        assert!(dne.intersects(&not_in).is_ok());
        assert!(not_in.intersects(&dne).is_ok());
        assert!(dne.intersects(&exists).is_err());
        assert!(exists.intersects(&dne).is_err());
        assert!(in_x.intersects(&not_in).is_err());
        assert!(in_x.intersects(&dne).is_err());
        // The first conflicting key in key order is reported, whichever side is larger.
        let mut big = Requirements::new();
        big.add(Requirement::new("a", In, ["1"]).unwrap());
        big.add(Requirement::new("b", In, ["1"]).unwrap());
        big.add(Requirement::new("c", In, ["1"]).unwrap());
        let mut small = Requirements::new();
        small.add(Requirement::new("c", In, ["2"]).unwrap());
        small.add(Requirement::new("b", In, ["2"]).unwrap());
        assert_eq!(big.intersects(&small).unwrap_err().key, "b");
        assert_eq!(small.intersects(&big).unwrap_err().key, "b");
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn matches_labels_table() {
        // (fixture, label value or None for absent, matches?)
        let cases: &[(&str, Option<&str>, bool)] = &[
            ("exists", Some("A"), true),
            ("exists", None, false),
            ("doesNotExist", Some("A"), false),
            ("doesNotExist", None, true),
            ("inA", Some("A"), true),
            ("inA", Some("B"), false),
            ("inA", None, false),
            ("notInA", Some("A"), false),
            ("notInA", Some("B"), true),
            ("notInA", None, true),
            ("greaterThan1", Some("2"), true),
            ("greaterThan1", Some("1"), false),
            ("greaterThan1", Some("x"), false),
            ("greaterThan1", None, false),
            ("lessThan9", Some("8"), true),
            ("lessThan9", Some("9"), false),
            ("lessThan9", None, false),
        ];
        for (name, value, want) in cases {
            let reqs: Requirements = std::iter::once(fixture(name)).collect();
            let node = value.map_or_else(BTreeMap::new, |v| labels(&[("key", v)]));
            assert_eq!(reqs.matches_labels(&node), *want, "{name} vs {value:?}");
        }
        // A bounded NotIn still needs the label, as `Gt` does in Kubernetes.
        let bounded: Requirements =
            std::iter::once(fixture("notIn12").intersection(&fixture("lessThan9"))).collect();
        assert!(!bounded.matches_labels(&BTreeMap::new()));
        assert!(bounded.matches_labels(&labels(&[("key", "5")])));
        // Every requirement must hold.
        let mut two = Requirements::new();
        two.add(fixture_on("a", "inA"));
        two.add(fixture_on("b", "exists"));
        assert!(two.matches_labels(&labels(&[("a", "A"), ("b", "x"), ("c", "y")])));
        assert!(!two.matches_labels(&labels(&[("a", "A")])));
        assert!(Requirements::new().matches_labels(&BTreeMap::new()));
    }

    #[test]
    fn single_valued_labels_are_in_with_one_value() {
        let reqs: Requirements = FIXTURES.iter().map(|name| fixture_on(name, name)).collect();
        let got = reqs.single_valued_labels();
        let want = labels(&[("in1", "1"), ("in9", "9"), ("inA", "A"), ("inB", "B")]);
        assert_eq!(got, want);
    }

    #[test]
    fn requirements_display_matches_upstream() {
        let reqs: Requirements = FIXTURES
            .iter()
            .map(|name| fixture_on(name, name))
            .chain([Requirement::exists(crate::labels::HOSTNAME)])
            .collect();
        assert_eq!(
            reqs.to_string(),
            "doesNotExist DoesNotExist, exists Exists, greaterThan1 Exists >=2, greaterThan9 \
             Exists >=10, in1 In [1], in19 In [1 9], in9 In [9], inA In [A], inAB In [A B], inB \
             In [B], lessThan1 Exists <=0, lessThan9 Exists <=8, notIn12 NotIn [1 2], notInA \
             NotIn [A]"
        );
    }

    #[test]
    fn add_all_intersects_and_serde_round_trips() {
        let mut a: Requirements = [fixture_on("x", "inAB"), fixture_on("y", "exists")]
            .into_iter()
            .collect();
        let b: Requirements = [fixture_on("x", "notInA"), fixture_on("z", "lessThan9Flex")]
            .into_iter()
            .collect();
        a.add_all(&b);
        assert_eq!(a.len(), 3);
        assert_eq!(a.get("x").unwrap().values().collect::<Vec<_>>(), ["B"]);
        assert_eq!(a.get("z").unwrap().min_values(), Some(1));
        let json = serde_json::to_string(&a).unwrap();
        assert!(
            json.starts_with(r#"[{"key":"x","operator":"In","values":["B"]}"#),
            "{json}"
        );
        let back: Requirements = serde_json::from_str(&json).unwrap();
        assert_eq!(back, a);
        let bad = serde_json::from_str::<Requirements>(r#"[{"key":"x","operator":"In"}]"#);
        assert!(bad.unwrap_err().to_string().contains("\"x\""));
        let manifest: NodeSelectorRequirement =
            serde_json::from_str(r#"{"key":"cpu","operator":"Gte","values":["4"],"minValues":2}"#)
                .unwrap();
        assert_eq!(manifest, nsr("cpu", Operator::Gte, &["4"], Some(2)));
        assert_eq!(a.remove("y").map(|r| r.operator()), Some(Operator::Exists));
        assert!(!a.has("y"));
    }

    const UNIVERSE: &[&str] = &["A", "B", "C", "-3", "0", "1", "2", "5", "9", "10", "x1"];

    fn arb_requirement() -> impl Strategy<Value = Requirement> {
        let values = proptest::sample::subsequence(UNIVERSE, 1..4);
        let bound = -4i64..12;
        let min = proptest::option::of(1u32..4);
        prop_oneof![
            (values.clone(), min.clone()).prop_map(|(v, m)| {
                Requirement::new("k", Operator::In, v)
                    .unwrap()
                    .with_min_values(m)
            }),
            (values, min.clone()).prop_map(|(v, m)| {
                Requirement::new("k", Operator::NotIn, v)
                    .unwrap()
                    .with_min_values(m)
            }),
            Just(Requirement::exists("k")),
            Just(Requirement::does_not_exist("k")),
            (bound.clone(), 0usize..4).prop_map(|(n, op)| {
                let op = [Operator::Gt, Operator::Lt, Operator::Gte, Operator::Lte][op];
                Requirement::new("k", op, [n.to_string()]).unwrap()
            }),
        ]
    }

    /// Up to three requirements intersected, so bounds, exclusions and sets mix.
    fn arb_combined() -> impl Strategy<Value = Requirement> {
        proptest::collection::vec(arb_requirement(), 1..4).prop_map(|rs| {
            rs.iter()
                .skip(1)
                .fold(rs[0].clone(), |acc, r| acc.intersection(r))
        })
    }

    proptest! {
        #[test]
        fn intersection_is_commutative(a in arb_combined(), b in arb_combined()) {
            prop_assert_eq!(a.intersection(&b), b.intersection(&a));
        }

        #[test]
        fn intersection_has_iff_both_have(a in arb_combined(), b in arb_combined()) {
            let both = a.intersection(&b);
            for v in UNIVERSE.iter().copied().chain(["11", "-4", "", "zz"]) {
                prop_assert_eq!(both.has(v), a.has(v) && b.has(v), "value {:?}", v);
            }
            prop_assert_eq!(a.has_intersection(&b), !both.is_empty());
            prop_assert_eq!(both.min_values(), a.min_values().max(b.min_values()));
        }

        #[test]
        fn node_selector_round_trip(r in arb_combined()) {
            let reqs: Requirements = std::iter::once(r.clone()).collect();
            let back = Requirements::from_node_selector(&reqs.to_node_selector()).unwrap();
            prop_assert_eq!(back.get("k"), Some(&r));
        }

        #[test]
        fn matches_labels_agrees_with_has(r in arb_combined(), i in 0usize..11) {
            let reqs: Requirements = std::iter::once(r.clone()).collect();
            let v = UNIVERSE[i];
            prop_assert_eq!(reqs.matches_labels(&labels(&[("k", v)])), r.has(v));
        }

        #[test]
        fn any_is_allowed(r in arb_combined()) {
            if let Some(v) = r.any() {
                prop_assert!(r.has(v));
                prop_assert_eq!(Some(v), r.values().find(|v| r.has(v)));
            } else {
                prop_assert!(r.is_complement() || r.is_empty());
            }
        }
    }
}
