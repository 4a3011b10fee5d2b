//! The typed EC2 instance-type catalogue: the embedded us-east-1 data and user-supplied files
//! in the same JSON format (see the [crate documentation](crate) for the format).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// The embedded catalogue text: real EC2 instance types (moto's DescribeInstanceTypes data and
/// Karpenter's generated us-east-1 on-demand prices).
pub const EMBEDDED_CATALOGUE_JSON: &str = include_str!("../data/aws-instance-types.json");

/// Capacity types the catalogue may list under `usage_classes`. `capacity-block` is accepted
/// but never becomes an offering, as Karpenter's AWS provider skips it.
pub const KNOWN_USAGE_CLASSES: [&str; 3] = ["on-demand", "spot", "capacity-block"];

/// Architectures an entry may declare (Kubernetes `kubernetes.io/arch` spelling).
pub const KNOWN_ARCHITECTURES: [&str; 2] = ["amd64", "arm64"];

/// A catalogue that cannot be used, naming the entry and the field at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CatalogueError {
    /// The text is not JSON, or its top level is not the documented object.
    #[error("catalogue: {message}")]
    Syntax {
        /// What is wrong (serde_json's message with line and column, or the missing key).
        message: String,
    },
    /// One instance-type entry is invalid.
    #[error("catalogue entry #{index} ({name}): field {field:?}: {reason}")]
    Entry {
        /// 0-based position in `instance_types`.
        index: usize,
        /// The entry's `name`, or `<unnamed>` when the name itself is missing or invalid.
        name: String,
        /// The field at fault.
        field: String,
        /// Why it is rejected.
        reason: String,
    },
    /// A [`CatalogueOptions`](crate::CatalogueOptions) value is invalid.
    #[error("catalogue option {option}: {reason}")]
    Option {
        /// The option (`evictionHard["memory.available"]`, `vmMemoryOverheadPercent` …).
        option: String,
        /// Why it is rejected.
        reason: String,
    },
}

/// The GPUs of an instance type (one GPU model per type, as EC2 reports them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// Number of whole GPUs; 0 for fractional-GPU types (g6f), which EC2 reports that way.
    pub count: u32,
    /// Manufacturer as EC2 spells it (`NVIDIA`, `AMD`, `Habana`).
    pub manufacturer: String,
    /// Model (`T4`, `A10G`, `V100` …).
    pub name: String,
    /// Memory of ONE GPU in MiB.
    pub memory_mib: u64,
}

/// One instance type of the catalogue, as written in the JSON file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogueEntry {
    /// EC2 name (`m5.large`); unique in a catalogue.
    pub name: String,
    /// Family (`m5`); informational, labels are derived from `name` as Karpenter does.
    pub family: String,
    /// Size (`large`); informational, labels are derived from `name`.
    pub size: String,
    /// Default vCPUs, at least 1.
    pub vcpu: u32,
    /// Memory in MiB as EC2 reports it, at least 1.
    pub memory_mib: u64,
    /// `amd64` or `arm64`.
    pub architecture: String,
    /// `Intel`, `AMD`, `AWS` …; `None` when unknown.
    pub cpu_manufacturer: Option<String>,
    /// `nitro`, `xen`; `None` for bare metal.
    pub hypervisor: Option<String>,
    /// Bare-metal type.
    pub bare_metal: bool,
    /// Burstable (T family).
    pub burstable: bool,
    /// Current generation.
    pub current_generation: bool,
    /// Maximum ENIs on the default network card, at least 1.
    pub max_network_interfaces: u32,
    /// IPv4 addresses per ENI, at least 1.
    pub ipv4_per_interface: u32,
    /// Whether EFA is supported.
    pub efa_supported: bool,
    /// Maximum EFA interfaces; `None` means 1 when `efa_supported`, else 0.
    pub max_efa_interfaces: Option<u32>,
    /// Free text such as `Up to 10 Gigabit`; informational.
    pub network_performance: Option<String>,
    /// Total local instance storage in GB (0 when none).
    pub local_storage_gb: u64,
    /// GPUs, if any.
    pub gpu: Option<GpuInfo>,
    /// AWS Neuron devices (Inferentia, Trainium), 0 when none.
    pub neuron_devices: u32,
    /// Subset of [`KNOWN_USAGE_CLASSES`], non-empty.
    pub usage_classes: Vec<String>,
    /// On-demand price in USD per hour, finite and non-negative.
    pub on_demand_price_per_hour_usd: f64,
    /// Zones offering the type, non-empty.
    pub zones: Vec<String>,
}

impl CatalogueEntry {
    /// Whether the type can be bought as spot.
    pub fn supports_spot(&self) -> bool {
        self.usage_classes.iter().any(|c| c == "spot")
    }

    /// Whether the type can be bought on demand.
    pub fn supports_on_demand(&self) -> bool {
        self.usage_classes.iter().any(|c| c == "on-demand")
    }

    /// EFA interfaces exposed as `vpc.amazonaws.com/efa`.
    pub fn efa_interfaces(&self) -> u32 {
        match self.max_efa_interfaces {
            Some(n) => n,
            None => u32::from(self.efa_supported),
        }
    }
}

/// A parsed, validated catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalogue {
    /// The region the prices and zones belong to.
    pub region: String,
    /// Entries sorted by name, names unique.
    pub instance_types: Vec<CatalogueEntry>,
}

impl Catalogue {
    /// The embedded catalogue, parsed once per process.
    pub fn embedded() -> &'static Catalogue {
        static CATALOGUE: OnceLock<Catalogue> = OnceLock::new();
        CATALOGUE.get_or_init(|| {
            Catalogue::from_json(EMBEDDED_CATALOGUE_JSON)
                // The embedded file is validated by this crate's tests, so failing here is a
                // build defect, not a user error.
                .unwrap_or_else(|e| panic!("embedded catalogue is invalid: {e}"))
        })
    }

    /// Parses and validates a catalogue in the documented JSON format. Errors name the entry
    /// (index and name) and the field.
    pub fn from_json(text: &str) -> Result<Catalogue, CatalogueError> {
        // A valid file reads straight into typed entries, several times faster than field by
        // field from a `Value` (the embedded catalogue is read on every start). Anything the
        // typed read or the checks refuse is read again field by field, so that the error
        // names the entry and the field.
        if let Ok(fast) = serde_json::from_str::<TypedCatalogue>(text)
            && let Ok(catalogue) = fast.into_catalogue()
        {
            return Ok(catalogue);
        }
        read_fields(text)
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&CatalogueEntry> {
        self.instance_types
            .binary_search_by(|e| e.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.instance_types[i])
    }
}

/// [`Catalogue::from_json`]'s slow path: every field read from a `serde_json::Value`, so that
/// any error names the entry and the field.
fn read_fields(text: &str) -> Result<Catalogue, CatalogueError> {
    let top: Value = serde_json::from_str(text).map_err(|e| CatalogueError::Syntax {
        message: e.to_string(),
    })?;
    let Value::Object(top) = top else {
        return Err(syntax("the top level must be an object"));
    };
    let region = match top.get("region") {
        // Emptiness is checked with the entries, on both paths.
        Some(Value::String(r)) => r.clone(),
        Some(_) => return Err(syntax("\"region\" must be a non-empty string")),
        None => return Err(syntax("missing \"region\"")),
    };
    let items = match top.get("instance_types") {
        Some(Value::Array(items)) => items,
        Some(_) => return Err(syntax("\"instance_types\" must be an array")),
        None => return Err(syntax("missing \"instance_types\"")),
    };
    let entries = items
        .iter()
        .enumerate()
        .map(|(index, item)| read_entry(index, item))
        .collect::<Result<Vec<_>, _>>()?;
    TypedCatalogue {
        region,
        instance_types: entries,
    }
    .into_catalogue()
}

fn syntax(message: &str) -> CatalogueError {
    CatalogueError::Syntax {
        message: message.to_string(),
    }
}

const ENTRY_FIELDS: [&str; 23] = [
    "name",
    "family",
    "size",
    "vcpu",
    "memory_mib",
    "architecture",
    "cpu_manufacturer",
    "hypervisor",
    "bare_metal",
    "burstable",
    "current_generation",
    "max_network_interfaces",
    "ipv4_per_interface",
    "efa_supported",
    "max_efa_interfaces",
    "network_performance",
    "local_storage_gb",
    "gpu",
    "neuron_devices",
    "usage_classes",
    "on_demand_price_per_hour_usd",
    "zones",
    // Accepted for compatibility with catalogues that record where an entry came from.
    "source",
];

/// Reads one entry field by field so that every error can name its field, which a derived
/// `Deserialize` on the whole entry cannot do for type mismatches.
struct EntryReader<'a> {
    index: usize,
    name: String,
    obj: &'a Map<String, Value>,
}

impl EntryReader<'_> {
    fn err(&self, field: &str, reason: impl Into<String>) -> CatalogueError {
        CatalogueError::Entry {
            index: self.index,
            name: self.name.clone(),
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    /// `None` when the field is absent or null.
    fn optional<T: serde::de::DeserializeOwned>(
        &self,
        field: &str,
    ) -> Result<Option<T>, CatalogueError> {
        match self.obj.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => T::deserialize(v)
                .map(Some)
                .map_err(|e| self.err(field, e.to_string())),
        }
    }

    fn required<T: serde::de::DeserializeOwned>(&self, field: &str) -> Result<T, CatalogueError> {
        self.optional(field)?
            .ok_or_else(|| self.err(field, "required field is missing"))
    }
}

/// The documented format, typed: the fast path of [`Catalogue::from_json`], and what the
/// field-by-field reader produces before the checks both share.
#[derive(Deserialize)]
struct TypedCatalogue {
    region: String,
    instance_types: Vec<RawEntry>,
}

impl TypedCatalogue {
    /// Checks every entry and the region, fills defaults and sorts by name.
    fn into_catalogue(self) -> Result<Catalogue, CatalogueError> {
        if self.region.is_empty() {
            return Err(syntax("\"region\" must be a non-empty string"));
        }
        let mut instance_types = Vec::with_capacity(self.instance_types.len());
        let mut seen = BTreeSet::new();
        for (index, raw) in self.instance_types.into_iter().enumerate() {
            let entry = raw.check(index)?;
            if !seen.insert(entry.name.clone()) {
                return Err(CatalogueError::Entry {
                    index,
                    name: entry.name,
                    field: "name".into(),
                    reason: "duplicate instance type name".into(),
                });
            }
            instance_types.push(entry);
        }
        instance_types.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Catalogue {
            region: self.region,
            instance_types,
        })
    }
}

/// One entry as written, before its values are checked and defaults filled. Its fields are
/// [`ENTRY_FIELDS`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    name: String,
    family: Option<String>,
    size: Option<String>,
    vcpu: u32,
    memory_mib: u64,
    architecture: String,
    cpu_manufacturer: Option<String>,
    hypervisor: Option<String>,
    bare_metal: Option<bool>,
    burstable: Option<bool>,
    current_generation: Option<bool>,
    max_network_interfaces: u32,
    ipv4_per_interface: u32,
    efa_supported: Option<bool>,
    max_efa_interfaces: Option<u32>,
    network_performance: Option<String>,
    local_storage_gb: Option<u64>,
    gpu: Option<GpuInfo>,
    neuron_devices: Option<u32>,
    usage_classes: Vec<String>,
    on_demand_price_per_hour_usd: f64,
    zones: Vec<String>,
    #[serde(default, rename = "source")]
    _source: Option<serde::de::IgnoredAny>,
}

impl RawEntry {
    /// The entry at `index` with its values checked and defaults filled in.
    fn check(self, index: usize) -> Result<CatalogueEntry, CatalogueError> {
        let err = |field: &str, reason: String| CatalogueError::Entry {
            index,
            name: if self.name.is_empty() {
                "<unnamed>".to_string()
            } else {
                self.name.clone()
            },
            field: field.to_string(),
            reason,
        };
        let at_least_one = |field: &str, n: u64| {
            if n == 0 {
                Err(err(field, "must be at least 1".into()))
            } else {
                Ok(())
            }
        };
        if self.name.is_empty() {
            return Err(err("name", "must not be empty".into()));
        }
        at_least_one("vcpu", self.vcpu.into())?;
        at_least_one("memory_mib", self.memory_mib)?;
        if !KNOWN_ARCHITECTURES.contains(&self.architecture.as_str()) {
            return Err(err(
                "architecture",
                format!(
                    "{:?} is not one of {KNOWN_ARCHITECTURES:?}",
                    self.architecture
                ),
            ));
        }
        at_least_one("max_network_interfaces", self.max_network_interfaces.into())?;
        at_least_one("ipv4_per_interface", self.ipv4_per_interface.into())?;
        if self.usage_classes.is_empty() {
            return Err(err(
                "usage_classes",
                "must list at least one capacity type".into(),
            ));
        }
        if let Some(bad) = self
            .usage_classes
            .iter()
            .find(|c| !KNOWN_USAGE_CLASSES.contains(&c.as_str()))
        {
            return Err(err(
                "usage_classes",
                format!("{bad:?} is not one of {KNOWN_USAGE_CLASSES:?}"),
            ));
        }
        let price = self.on_demand_price_per_hour_usd;
        if !price.is_finite() || price < 0.0 {
            return Err(err(
                "on_demand_price_per_hour_usd",
                "must be a non-negative number".into(),
            ));
        }
        if self.zones.is_empty() {
            return Err(err("zones", "must list at least one zone".into()));
        }
        if self.zones.iter().any(String::is_empty) {
            return Err(err("zones", "zone names must not be empty".into()));
        }
        if self
            .gpu
            .as_ref()
            .is_some_and(|g| g.name.is_empty() || g.manufacturer.is_empty())
        {
            return Err(err("gpu", "name and manufacturer must not be empty".into()));
        }
        let (name_family, name_size) = match self.name.split_once('.') {
            Some((f, s)) => (f.to_string(), s.to_string()),
            None => (self.name.clone(), String::new()),
        };
        Ok(CatalogueEntry {
            family: self.family.unwrap_or(name_family),
            size: self.size.unwrap_or(name_size),
            vcpu: self.vcpu,
            memory_mib: self.memory_mib,
            architecture: self.architecture,
            cpu_manufacturer: self.cpu_manufacturer,
            hypervisor: self.hypervisor,
            bare_metal: self.bare_metal.unwrap_or(false),
            burstable: self.burstable.unwrap_or(false),
            current_generation: self.current_generation.unwrap_or(false),
            max_network_interfaces: self.max_network_interfaces,
            ipv4_per_interface: self.ipv4_per_interface,
            efa_supported: self.efa_supported.unwrap_or(false),
            max_efa_interfaces: self.max_efa_interfaces,
            network_performance: self.network_performance,
            local_storage_gb: self.local_storage_gb.unwrap_or(0),
            gpu: self.gpu,
            neuron_devices: self.neuron_devices.unwrap_or(0),
            usage_classes: self.usage_classes,
            on_demand_price_per_hour_usd: price,
            zones: self.zones,
            name: self.name,
        })
    }
}

/// Reads one entry field by field, so that a type error names its field (which a derived
/// `Deserialize` of the whole entry cannot do); its values are checked afterwards by
/// [`RawEntry::check`].
fn read_entry(index: usize, item: &Value) -> Result<RawEntry, CatalogueError> {
    let unnamed = || "<unnamed>".to_string();
    let Value::Object(obj) = item else {
        return Err(CatalogueError::Entry {
            index,
            name: unnamed(),
            field: "(entry)".into(),
            reason: "an entry must be an object".into(),
        });
    };
    let mut r = EntryReader {
        index,
        name: unnamed(),
        obj,
    };
    let name: String = r.required("name")?;
    if !name.is_empty() {
        r.name.clone_from(&name);
    }
    if let Some(unknown) = obj.keys().find(|k| !ENTRY_FIELDS.contains(&k.as_str())) {
        return Err(r.err(
            unknown,
            "unknown field (a typo would otherwise be ignored silently)",
        ));
    }
    Ok(RawEntry {
        family: r.optional("family")?,
        size: r.optional("size")?,
        vcpu: r.required("vcpu")?,
        memory_mib: r.required("memory_mib")?,
        architecture: r.required("architecture")?,
        cpu_manufacturer: r.optional("cpu_manufacturer")?,
        hypervisor: r.optional("hypervisor")?,
        bare_metal: r.optional("bare_metal")?,
        burstable: r.optional("burstable")?,
        current_generation: r.optional("current_generation")?,
        max_network_interfaces: r.required("max_network_interfaces")?,
        ipv4_per_interface: r.required("ipv4_per_interface")?,
        efa_supported: r.optional("efa_supported")?,
        max_efa_interfaces: r.optional("max_efa_interfaces")?,
        network_performance: r.optional("network_performance")?,
        local_storage_gb: r.optional("local_storage_gb")?,
        gpu: r.optional("gpu")?,
        neuron_devices: r.optional("neuron_devices")?,
        usage_classes: r.required("usage_classes")?,
        on_demand_price_per_hour_usd: r.required("on_demand_price_per_hour_usd")?,
        zones: r.required("zones")?,
        name,
        _source: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal(extra: &str) -> String {
        format!(
            r#"{{"region":"eu-west-1","instance_types":[{{"name":"x1.large","vcpu":2,
            "memory_mib":4096,"architecture":"amd64","max_network_interfaces":3,
            "ipv4_per_interface":10,"usage_classes":["on-demand"],
            "on_demand_price_per_hour_usd":0.1,"zones":["eu-west-1a"]{extra}}}]}}"#
        )
    }

    #[test]
    fn embedded_catalogue_parses_and_is_sorted() {
        let c = Catalogue::embedded();
        assert_eq!(c.region, "us-east-1");
        assert_eq!(c.instance_types.len(), 1340);
        assert!(c.instance_types.windows(2).all(|w| w[0].name < w[1].name));
        let m5 = c.get("m5.large").expect("m5.large");
        assert_eq!((m5.vcpu, m5.memory_mib), (2, 8192));
        assert_eq!(m5.on_demand_price_per_hour_usd, 0.096);
        assert!(m5.supports_spot() && m5.supports_on_demand());
        assert!(c.get("no.such").is_none());
    }

    #[test]
    fn minimal_entry_gets_defaults() {
        let c = Catalogue::from_json(&minimal("")).unwrap();
        let e = &c.instance_types[0];
        assert_eq!(c.region, "eu-west-1");
        assert_eq!((e.family.as_str(), e.size.as_str()), ("x1", "large"));
        assert_eq!(e.gpu, None);
        assert_eq!(e.efa_interfaces(), 0);
        assert!(!e.supports_spot());
    }

    #[test]
    fn typed_and_field_by_field_reads_agree() {
        // The embedded file takes the typed path; the field-by-field reader must give the
        // same catalogue, defaults included (the minimal entry omits every optional field).
        let fast = Catalogue::from_json(EMBEDDED_CATALOGUE_JSON).unwrap();
        assert!(serde_json::from_str::<TypedCatalogue>(EMBEDDED_CATALOGUE_JSON).is_ok());
        assert_eq!(read_fields(EMBEDDED_CATALOGUE_JSON).unwrap(), fast);
        let text = minimal(r#","source":"moto""#);
        assert!(serde_json::from_str::<TypedCatalogue>(&text).is_ok());
        assert_eq!(
            read_fields(&text).unwrap(),
            Catalogue::from_json(&text).unwrap()
        );
    }

    #[test]
    fn errors_name_entry_and_field() {
        let cases: [(&str, &str); 6] = [
            (r#","vcpu":"two""#, "vcpu"),
            (
                r#","gpu":{"count":1,"manufacturer":"","name":"T4","memory_mib":1}"#,
                "gpu",
            ),
            (r#","usage_classes":["reserved"]"#, "usage_classes"),
            (r#","zones":[]"#, "zones"),
            (r#","archtecture":"arm64""#, "archtecture"),
            (
                r#","on_demand_price_per_hour_usd":-1"#,
                "on_demand_price_per_hour_usd",
            ),
        ];
        for (extra, field) in cases {
            // serde_json keeps the last of two duplicate keys, so `extra` overrides.
            let err = Catalogue::from_json(&minimal(extra)).unwrap_err();
            match &err {
                CatalogueError::Entry {
                    index,
                    name,
                    field: f,
                    ..
                } => {
                    assert_eq!(
                        (*index, name.as_str(), f.as_str()),
                        (0, "x1.large", field),
                        "{err}"
                    );
                }
                other => panic!("{extra}: unexpected {other}"),
            }
        }
    }

    #[test]
    fn missing_field_and_duplicates_and_syntax() {
        let err =
            Catalogue::from_json(r#"{"region":"r","instance_types":[{"name":"a.b","vcpu":1}]}"#)
                .unwrap_err();
        assert!(
            err.to_string().contains("a.b") && err.to_string().contains("memory_mib"),
            "{err}"
        );
        let one = minimal("");
        let v: Value = serde_json::from_str(&one).unwrap();
        let entry = v["instance_types"][0].clone();
        let dup = serde_json::json!({"region": "r", "instance_types": [entry.clone(), entry]});
        let err = Catalogue::from_json(&dup.to_string()).unwrap_err();
        assert!(
            matches!(err, CatalogueError::Entry { index: 1, ref field, .. } if field == "name")
        );
        assert!(matches!(
            Catalogue::from_json("{"),
            Err(CatalogueError::Syntax { .. })
        ));
        assert!(matches!(
            Catalogue::from_json("[]"),
            Err(CatalogueError::Syntax { .. })
        ));
        // An empty region is refused by the typed read's checks and the field reader alike.
        assert!(matches!(
            Catalogue::from_json(&minimal("").replace("eu-west-1\"", "\"")),
            Err(CatalogueError::Syntax { ref message }) if message.contains("region")
        ));
        let err =
            Catalogue::from_json(r#"{"region":"r","instance_types":[{"vcpu":1}]}"#).unwrap_err();
        assert!(err.to_string().contains("<unnamed>"), "{err}");
    }
}
