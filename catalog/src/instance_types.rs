//! Catalogue entries to [`InstanceType`]s, the way Karpenter's AWS provider builds them:
//! capacity and overhead from [`crate::allocatable`], labels as requirements, and one
//! offering per zone and capacity type.

use crate::allocatable::{self, EvictionSignal};
use crate::catalogue::{Catalogue, CatalogueEntry, CatalogueError};
use crate::pricing::spot_price;
use karpenter_scheduling::labels;
use karpenter_scheduling::model::{InstanceType, Offering, Overhead};
use karpenter_scheduling::quantity::Quantity;
use karpenter_scheduling::requirements::{Operator, Requirement, Requirements};
use karpenter_scheduling::resources::{self, Resources};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

/// `node.kubernetes.io/windows-build`: Linux nodes never have it.
pub const LABEL_WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
/// `nvidia.com/gpu`.
pub const RESOURCE_NVIDIA_GPU: &str = "nvidia.com/gpu";
/// `amd.com/gpu`.
pub const RESOURCE_AMD_GPU: &str = "amd.com/gpu";
/// `habana.ai/gaudi`.
pub const RESOURCE_HABANA_GAUDI: &str = "habana.ai/gaudi";
/// `aws.amazon.com/neuron`: Neuron devices.
pub const RESOURCE_AWS_NEURON: &str = "aws.amazon.com/neuron";
/// `aws.amazon.com/neuroncore`: Neuron cores (devices × cores per device).
pub const RESOURCE_AWS_NEURON_CORE: &str = "aws.amazon.com/neuroncore";
/// `vpc.amazonaws.com/efa`: EFA interfaces.
pub const RESOURCE_EFA: &str = "vpc.amazonaws.com/efa";
/// `memory.available` eviction signal.
pub const SIGNAL_MEMORY_AVAILABLE: &str = "memory.available";
/// `nodefs.available` eviction signal.
pub const SIGNAL_NODEFS_AVAILABLE: &str = "nodefs.available";

/// The settings that change instance types, mirroring what an EC2NodeClass's `kubelet`
/// block and Karpenter's operator flags override. `Default` is Karpenter's default.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogueOptions {
    /// Region label value; `None` uses the catalogue's region.
    pub region: Option<String>,
    /// Only these zones get offerings; `None` keeps every zone. Types left with no zone are
    /// dropped.
    pub zones: Option<BTreeSet<String>>,
    /// `kubelet.maxPods`: replaces the ENI-limited pod count.
    pub max_pods: Option<u32>,
    /// `kubelet.podsPerCore`: caps pods at this × vCPUs (0 or `None`: no cap).
    pub pods_per_core: Option<u32>,
    /// `--reserved-enis`: ENIs the VPC CNI may not use for pods.
    pub reserved_enis: u32,
    /// `kubelet.kubeReserved`: resource name to quantity text; each entry replaces the
    /// computed value for that resource.
    pub kube_reserved: BTreeMap<String, String>,
    /// `kubelet.systemReserved`: resource name to quantity text.
    pub system_reserved: BTreeMap<String, String>,
    /// `kubelet.evictionHard`: signal (`memory.available`, `nodefs.available`) to a quantity
    /// or a percentage (`10%`); replaces the default threshold for that resource. Other
    /// signals are accepted and ignored, as upstream ignores them for allocatable.
    pub eviction_hard: BTreeMap<String, String>,
    /// `--vm-memory-overhead-percent`, as a fraction (0.075 = 7.5 %), in [0, 1).
    pub vm_memory_overhead_percent: f64,
    /// Root volume size in bytes, which becomes ephemeral-storage capacity.
    pub root_volume_bytes: i64,
}

impl Default for CatalogueOptions {
    fn default() -> Self {
        Self {
            region: None,
            zones: None,
            max_pods: None,
            pods_per_core: None,
            reserved_enis: 0,
            kube_reserved: BTreeMap::new(),
            system_reserved: BTreeMap::new(),
            eviction_hard: BTreeMap::new(),
            vm_memory_overhead_percent: allocatable::DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
            root_volume_bytes: allocatable::DEFAULT_ROOT_VOLUME_BYTES,
        }
    }
}

/// Options with every text parsed, so building each type cannot fail on them.
#[derive(Debug, Clone)]
struct Resolved {
    kube_reserved: Vec<(String, i64)>,
    system_reserved: Resources,
    eviction_memory: Option<EvictionSignal>,
    eviction_nodefs: Option<EvictionSignal>,
}

fn option_err(option: String, reason: impl Into<String>) -> CatalogueError {
    CatalogueError::Option {
        option,
        reason: reason.into(),
    }
}

/// A resource amount in scheduler units: cpu in millicores, everything else in whole units.
fn scheduler_units(name: &str, q: &Quantity) -> i64 {
    if name == resources::CPU {
        q.milli_value()
    } else {
        q.value()
    }
}

fn parse_resource_map(
    option: &str,
    map: &BTreeMap<String, String>,
) -> Result<Vec<(String, i64)>, CatalogueError> {
    map.iter()
        .map(|(k, v)| {
            let name = || format!("{option}[{k:?}]");
            if k.is_empty() {
                return Err(option_err(name(), "resource name must not be empty"));
            }
            let q = Quantity::parse(v).map_err(|e| option_err(name(), e.to_string()))?;
            if q.nanos() < 0 {
                return Err(option_err(name(), format!("negative quantity {v:?}")));
            }
            Ok((k.clone(), scheduler_units(k, &q)))
        })
        .collect()
}

fn parse_signal(option: &str, signal: &str, text: &str) -> Result<EvictionSignal, CatalogueError> {
    let name = || format!("{option}[{signal:?}]");
    if let Some(p) = text.strip_suffix('%') {
        let p: f64 = p
            .trim()
            .parse()
            .map_err(|_| option_err(name(), format!("{text:?} is not a percentage")))?;
        if !(0.0..=100.0).contains(&p) {
            return Err(option_err(name(), format!("{text:?} is outside 0%–100%")));
        }
        return Ok(EvictionSignal::Percent(p));
    }
    let q = Quantity::parse(text).map_err(|e| option_err(name(), e.to_string()))?;
    if q.nanos() < 0 {
        return Err(option_err(name(), format!("negative quantity {text:?}")));
    }
    Ok(EvictionSignal::Bytes(q.value()))
}

impl CatalogueOptions {
    fn resolve(&self) -> Result<Resolved, CatalogueError> {
        let p = self.vm_memory_overhead_percent;
        if !p.is_finite() || !(0.0..1.0).contains(&p) {
            return Err(option_err(
                "vmMemoryOverheadPercent".into(),
                format!("{p} is not a fraction in [0, 1)"),
            ));
        }
        if self.root_volume_bytes < 0 {
            return Err(option_err("rootVolumeBytes".into(), "must not be negative"));
        }
        let kube_reserved = parse_resource_map("kubeReserved", &self.kube_reserved)?;
        let mut system_reserved = Resources::default();
        for (k, v) in parse_resource_map("systemReserved", &self.system_reserved)? {
            system_reserved.set(&k, v);
        }
        let mut eviction_memory = None;
        let mut eviction_nodefs = None;
        for (signal, text) in &self.eviction_hard {
            match signal.as_str() {
                SIGNAL_MEMORY_AVAILABLE => {
                    eviction_memory = Some(parse_signal("evictionHard", signal, text)?)
                }
                SIGNAL_NODEFS_AVAILABLE => {
                    eviction_nodefs = Some(parse_signal("evictionHard", signal, text)?)
                }
                _ => {}
            }
        }
        Ok(Resolved {
            kube_reserved,
            system_reserved,
            eviction_memory,
            eviction_nodefs,
        })
    }
}

/// Karpenter's instance category and generation: the leading lowercase letters, then
/// (after an optional `-<digits>tb` as in `u-6tb1`) the digits that follow, provided a `.`
/// comes later in the name. `m5.large` → (`m`, `5`); `u-6tb1.56xlarge` → (`u`, `1`).
pub fn category_and_generation(name: &str) -> Option<(&str, &str)> {
    let letters = name.bytes().take_while(u8::is_ascii_lowercase).count();
    if letters == 0 {
        return None;
    }
    let mut rest = &name[letters..];
    // The optional "-<digits>tb" group; when it does not match in full it is skipped.
    if let Some(after_dash) = rest.strip_prefix('-') {
        let digits = after_dash.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after_dash[digits..].starts_with("tb") {
            rest = &after_dash[digits + 2..];
        }
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || !rest[digits..].contains('.') {
        return None;
    }
    Some((&name[..letters], &rest[..digits]))
}

/// Label values as Karpenter writes them: lower case, spaces as dashes.
pub fn lower_kebab_case(s: &str) -> String {
    s.to_lowercase().replace(' ', "-")
}

/// The Neuron device model and cores per device of an instance family, when known.
/// The catalogue records the device count only; these are EC2's published values.
pub fn neuron_device(family: &str) -> Option<(&'static str, u32)> {
    match family {
        "inf1" => Some(("Inferentia", 4)),
        "inf2" => Some(("Inferentia2", 2)),
        "trn1" | "trn1n" => Some(("Trainium", 2)),
        "trn2" | "trn2n" | "trn2u" => Some(("Trainium2", 8)),
        _ => None,
    }
}

fn requirement(
    entry: &CatalogueEntry,
    key: &str,
    op: Operator,
    values: Vec<String>,
) -> Result<Requirement, CatalogueError> {
    Requirement::new(key, op, values).map_err(|e| CatalogueError::Entry {
        index: 0,
        name: entry.name.clone(),
        field: key.to_string(),
        reason: e.to_string(),
    })
}

fn zones_of<'a>(entry: &'a CatalogueEntry, options: &CatalogueOptions) -> Vec<&'a str> {
    let mut zones: Vec<&str> = entry
        .zones
        .iter()
        .map(String::as_str)
        .filter(|z| options.zones.as_ref().is_none_or(|keep| keep.contains(*z)))
        .collect();
    zones.sort_unstable();
    zones.dedup();
    zones
}

/// The offerings of an entry: for each zone (sorted, after the zone filter), on-demand at the
/// catalogue price, then spot at [`spot_price`] when the entry supports spot. All available.
pub fn offerings(entry: &CatalogueEntry, options: &CatalogueOptions) -> Vec<Offering> {
    let zones = zones_of(entry, options);
    // Sized once: the catalogue keeps these for its whole life, so growth would leave its
    // discarded buffers and spare capacity in the heap.
    let (on_demand, spot) = (entry.supports_on_demand(), entry.supports_spot());
    let per_zone = usize::from(on_demand) + usize::from(spot);
    let mut out = Vec::with_capacity(zones.len() * per_zone);
    for zone in zones {
        if on_demand {
            out.push(Offering {
                zone: zone.to_string(),
                capacity_type: labels::CAPACITY_TYPE_ON_DEMAND.to_string(),
                price: entry.on_demand_price_per_hour_usd,
                available: true,
                reservation: None,
            });
        }
        if spot {
            out.push(Offering {
                zone: zone.to_string(),
                capacity_type: labels::CAPACITY_TYPE_SPOT.to_string(),
                price: spot_price(&entry.name, zone, entry.on_demand_price_per_hour_usd),
                available: true,
                reservation: None,
            });
        }
    }
    out
}

/// Builds the instance type of one entry, or `None` when no offering is left (every zone
/// filtered out, or no on-demand/spot usage class).
pub fn build_instance_type(
    entry: &CatalogueEntry,
    region: &str,
    options: &CatalogueOptions,
) -> Result<Option<InstanceType>, CatalogueError> {
    let resolved = options.resolve()?;
    build(entry, region, options, &resolved)
}

fn build(
    entry: &CatalogueEntry,
    region: &str,
    options: &CatalogueOptions,
    resolved: &Resolved,
) -> Result<Option<InstanceType>, CatalogueError> {
    let offerings = offerings(entry, options);
    if offerings.is_empty() {
        return Ok(None);
    }
    let arm64 = entry.architecture == "arm64";
    let cpu = allocatable::cpu_capacity_millis(entry.vcpu);
    let memory = allocatable::memory_capacity_bytes(
        entry.memory_mib,
        arm64,
        options.vm_memory_overhead_percent,
    );
    let ephemeral = options.root_volume_bytes;
    let eni_pods = allocatable::eni_limited_pods(
        entry.max_network_interfaces,
        entry.ipv4_per_interface,
        options.reserved_enis,
    );
    let pods = allocatable::pods_capacity(
        eni_pods,
        options.max_pods,
        options.pods_per_core,
        entry.vcpu,
    );

    let mut extended: BTreeMap<String, i64> = BTreeMap::new();
    if let Some(gpu) = &entry.gpu {
        let resource = match gpu.manufacturer.as_str() {
            "NVIDIA" => Some(RESOURCE_NVIDIA_GPU),
            "AMD" => Some(RESOURCE_AMD_GPU),
            "Habana" => Some(RESOURCE_HABANA_GAUDI),
            _ => None,
        };
        if let Some(r) = resource {
            *extended.entry(r.to_string()).or_default() += i64::from(gpu.count);
        }
    }
    let neuron = neuron_device(&entry.family);
    if entry.neuron_devices > 0 {
        extended.insert(RESOURCE_AWS_NEURON.into(), i64::from(entry.neuron_devices));
        if let Some((_, cores)) = neuron {
            extended.insert(
                RESOURCE_AWS_NEURON_CORE.into(),
                i64::from(entry.neuron_devices) * i64::from(cores),
            );
        }
    }
    if entry.efa_interfaces() > 0 {
        extended.insert(RESOURCE_EFA.into(), i64::from(entry.efa_interfaces()));
    }
    let capacity = Resources {
        cpu_millis: cpu,
        memory,
        ephemeral_storage: ephemeral,
        pods,
        extended: extended.into_iter().filter(|(_, v)| *v != 0).collect(),
    };

    // The default AMI family (AL2023) sizes kube-reserved memory on ENI-limited pods without
    // reserved ENIs, whatever maxPods says.
    let reserved_pods =
        allocatable::eni_limited_pods(entry.max_network_interfaces, entry.ipv4_per_interface, 0);
    let mut kube_reserved = Resources {
        cpu_millis: allocatable::kube_reserved_cpu_millis(cpu),
        memory: allocatable::kube_reserved_memory_bytes(reserved_pods),
        ephemeral_storage: allocatable::KUBE_RESERVED_EPHEMERAL_STORAGE_BYTES,
        pods: 0,
        extended: Vec::new(),
    };
    for (name, value) in &resolved.kube_reserved {
        kube_reserved.set(name, *value);
    }
    let eviction_threshold = Resources {
        memory: resolved
            .eviction_memory
            .map_or(allocatable::EVICTION_MEMORY_BYTES, |s| {
                s.threshold_bytes(memory)
            }),
        ephemeral_storage: resolved.eviction_nodefs.map_or_else(
            || allocatable::eviction_ephemeral_storage_bytes(ephemeral),
            |s| s.threshold_bytes(ephemeral),
        ),
        ..Resources::default()
    };
    let overhead = Overhead {
        kube_reserved,
        system_reserved: resolved.system_reserved.clone(),
        eviction_threshold,
    };

    let requirements = requirements(entry, region, &offerings, neuron.map(|(name, _)| name))?;
    Ok(Some(InstanceType {
        devices: Vec::new(),
        name: entry.name.clone(),
        requirements,
        capacity,
        overhead,
        offerings,
    }))
}

fn requirements(
    entry: &CatalogueEntry,
    region: &str,
    offerings: &[Offering],
    neuron_name: Option<&str>,
) -> Result<Requirements, CatalogueError> {
    use Operator::{DoesNotExist, In};
    let zones: BTreeSet<String> = offerings.iter().map(|o| o.zone.clone()).collect();
    let capacity_types: BTreeSet<String> =
        offerings.iter().map(|o| o.capacity_type.clone()).collect();
    let one = |v: String| vec![v];
    let opt = |v: Option<String>| match v {
        Some(v) => (In, vec![v]),
        None => (DoesNotExist, Vec::new()),
    };
    let (family, size) = match entry.name.split_once('.') {
        Some((f, s)) if !s.contains('.') => (Some(f.to_string()), Some(s.to_string())),
        _ => (None, None),
    };
    let cat_gen = category_and_generation(&entry.name);
    let gpu = entry.gpu.as_ref();
    let neuron = entry.neuron_devices > 0;

    let mut specs: Vec<(&str, Operator, Vec<String>)> = vec![
        (labels::INSTANCE_TYPE, In, one(entry.name.clone())),
        (labels::ARCH, In, one(entry.architecture.clone())),
        (labels::OS, In, one("linux".into())),
        (labels::ZONE, In, zones.into_iter().collect()),
        (labels::REGION, In, one(region.to_string())),
        (LABEL_WINDOWS_BUILD, DoesNotExist, Vec::new()),
        (
            labels::CAPACITY_TYPE,
            In,
            capacity_types.into_iter().collect(),
        ),
        (labels::AWS_INSTANCE_CPU, In, one(entry.vcpu.to_string())),
        (
            labels::AWS_INSTANCE_MEMORY,
            In,
            one(entry.memory_mib.to_string()),
        ),
        // Not in the catalogue: undefined values are left DoesNotExist, as upstream does
        // when EC2 does not report them.
        (labels::AWS_INSTANCE_EBS_BANDWIDTH, DoesNotExist, Vec::new()),
        (
            labels::AWS_INSTANCE_NETWORK_BANDWIDTH,
            DoesNotExist,
            Vec::new(),
        ),
        // Bare metal has no hypervisor; upstream then writes the empty value.
        (
            labels::AWS_INSTANCE_HYPERVISOR,
            In,
            one(entry.hypervisor.clone().unwrap_or_default()),
        ),
    ];
    let mut push =
        |key: &'static str, (op, values): (Operator, Vec<String>)| specs.push((key, op, values));
    push(
        labels::AWS_INSTANCE_CPU_MANUFACTURER,
        opt(entry.cpu_manufacturer.as_deref().map(lower_kebab_case)),
    );
    push(
        labels::AWS_INSTANCE_CATEGORY,
        opt(cat_gen.map(|(c, _)| c.to_string())),
    );
    push(
        labels::AWS_INSTANCE_GENERATION,
        opt(cat_gen.map(|(_, g)| g.to_string())),
    );
    push(labels::AWS_INSTANCE_FAMILY, opt(family));
    push(labels::AWS_INSTANCE_SIZE, opt(size));
    push(
        labels::AWS_INSTANCE_LOCAL_NVME,
        opt((entry.local_storage_gb > 0).then(|| entry.local_storage_gb.to_string())),
    );
    push(
        labels::AWS_INSTANCE_GPU_NAME,
        opt(gpu.map(|g| lower_kebab_case(&g.name))),
    );
    push(
        labels::AWS_INSTANCE_GPU_MANUFACTURER,
        opt(gpu.map(|g| lower_kebab_case(&g.manufacturer))),
    );
    push(
        labels::AWS_INSTANCE_GPU_COUNT,
        opt(gpu.map(|g| g.count.to_string())),
    );
    push(
        labels::AWS_INSTANCE_GPU_MEMORY,
        opt(gpu.map(|g| g.memory_mib.to_string())),
    );
    push(
        labels::AWS_INSTANCE_ACCELERATOR_NAME,
        opt(neuron
            .then_some(neuron_name)
            .flatten()
            .map(lower_kebab_case)),
    );
    push(
        labels::AWS_INSTANCE_ACCELERATOR_MANUFACTURER,
        opt(neuron.then(|| "aws".to_string())),
    );
    push(
        labels::AWS_INSTANCE_ACCELERATOR_COUNT,
        opt(neuron.then(|| entry.neuron_devices.to_string())),
    );

    specs
        .into_iter()
        .map(|(key, op, values)| requirement(entry, key, op, values))
        .collect()
}

impl Catalogue {
    /// Every entry as an instance type with `options`, in name order; entries with no
    /// offering left are skipped. Fails only on invalid options.
    pub fn instance_types(
        &self,
        options: &CatalogueOptions,
    ) -> Result<Vec<Arc<InstanceType>>, CatalogueError> {
        let resolved = options.resolve()?;
        let region = options.region.as_deref().unwrap_or(&self.region);
        let entries = &self.instance_types;
        // Every `karpenter plan` and simulation waits for this (about 30 ms for the embedded
        // catalogue on one core), so large catalogues are built in parts on scoped threads.
        // The parts are joined in order and each stops at its own first error, so the result
        // (and which error is reported) does not depend on the split.
        let parts = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, MAX_BUILD_THREADS)
            .min(entries.len().div_ceil(MIN_ENTRIES_PER_THREAD).max(1));
        let chunk = entries.len().div_ceil(parts).max(1);
        let build_part =
            |start: usize| build_range(entries, start, chunk, region, options, &resolved);
        // The first part is built on this thread; with one part nothing is spawned.
        let results: Vec<Result<Vec<Arc<InstanceType>>, CatalogueError>> =
            std::thread::scope(|scope| {
                let handles: Vec<_> = (1..parts)
                    .map(|p| scope.spawn(move || build_part(p * chunk)))
                    .collect();
                let mut results = vec![build_part(0)];
                results.extend(handles.into_iter().map(|h| {
                    h.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                }));
                results
            });
        let mut out = Vec::with_capacity(entries.len());
        for part in results {
            out.extend(part?);
        }
        Ok(out)
    }
}

/// The most threads [`Catalogue::instance_types`] builds on.
const MAX_BUILD_THREADS: usize = 4;

/// Fewer entries than this per thread are not worth a thread.
const MIN_ENTRIES_PER_THREAD: usize = 256;

/// The instance types of `entries[start..start + len]` (clamped), skipping entries with no
/// offering; an entry's error names its index in the whole catalogue.
fn build_range(
    entries: &[CatalogueEntry],
    start: usize,
    len: usize,
    region: &str,
    options: &CatalogueOptions,
    resolved: &Resolved,
) -> Result<Vec<Arc<InstanceType>>, CatalogueError> {
    let end = start.saturating_add(len).min(entries.len());
    let mut out = Vec::with_capacity(end.saturating_sub(start));
    for (index, entry) in entries.iter().enumerate().take(end).skip(start) {
        match build(entry, region, options, resolved) {
            Ok(Some(it)) => out.push(Arc::new(it)),
            Ok(None) => {}
            Err(CatalogueError::Entry {
                name,
                field,
                reason,
                ..
            }) => {
                return Err(CatalogueError::Entry {
                    index,
                    name,
                    field,
                    reason,
                });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The embedded catalogue's instance types with default options, built once per process
/// (benchmarks and simulations share them).
pub fn default_instance_types() -> &'static [Arc<InstanceType>] {
    static TYPES: OnceLock<Vec<Arc<InstanceType>>> = OnceLock::new();
    TYPES.get_or_init(|| {
        Catalogue::embedded()
            .instance_types(&CatalogueOptions::default())
            // Default options cannot be invalid and the embedded data is tested.
            .unwrap_or_else(|e| panic!("embedded catalogue does not build: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocatable::{GIB, MIB};

    fn default_type(name: &str) -> Arc<InstanceType> {
        default_instance_types()
            .iter()
            .find(|it| it.name == name)
            .unwrap_or_else(|| panic!("{name} not in the catalogue"))
            .clone()
    }

    fn label_values(it: &InstanceType, key: &str) -> Vec<String> {
        let r = it
            .requirements
            .get(key)
            .unwrap_or_else(|| panic!("{}: {key} undefined", it.name));
        r.values().map(str::to_string).collect()
    }

    fn label(it: &InstanceType, key: &str) -> String {
        let v = label_values(it, key);
        assert_eq!(v.len(), 1, "{}: {key} = {v:?}", it.name);
        v[0].clone()
    }

    fn assert_does_not_exist(it: &InstanceType, key: &str) {
        let r = it
            .requirements
            .get(key)
            .unwrap_or_else(|| panic!("{}: {key} undefined", it.name));
        assert_eq!(r.operator(), Operator::DoesNotExist, "{}: {key}", it.name);
    }

    fn resources(cpu_millis: i64, memory: i64, ephemeral_storage: i64, pods: i64) -> Resources {
        Resources {
            cpu_millis,
            memory,
            ephemeral_storage,
            pods,
            extended: Vec::new(),
        }
    }

    /// p3.8xlarge is not in the embedded catalogue; a user catalogue supplies EC2's shape.
    const P3_8XLARGE: &str = r#"{"region": "us-west-2", "instance_types": [{
        "name": "p3.8xlarge", "vcpu": 32, "memory_mib": 249856, "architecture": "amd64",
        "cpu_manufacturer": "Intel", "hypervisor": "xen",
        "max_network_interfaces": 8, "ipv4_per_interface": 30,
        "gpu": {"count": 4, "manufacturer": "NVIDIA", "name": "V100", "memory_mib": 16384},
        "usage_classes": ["on-demand", "spot"], "on_demand_price_per_hour_usd": 12.24,
        "zones": ["us-west-2b", "us-west-2a"]}]}"#;

    #[test]
    fn m5_large_capacity_overhead_allocatable() {
        let it = default_type("m5.large");
        // memory: 8192 MiB − ⌈8192 × 0.075 = 614.4⌉ = 615 MiB VM overhead = 7577 MiB
        // pods: 3 ENIs × (10 − 1) + 2 = 29
        assert_eq!(it.capacity, resources(2000, 7577 * MIB, 20 * GIB, 29));
        // cpu: 6 % of 1000 m + 1 % of 1000 m = 60 + 10 = 70 m
        // memory: 11 MiB × 29 + 255 MiB = 574 MiB; ephemeral-storage 1 GiB
        assert_eq!(it.overhead.kube_reserved, resources(70, 574 * MIB, GIB, 0));
        assert_eq!(it.overhead.system_reserved, Resources::default());
        // memory 100 MiB; ephemeral-storage 10 % of 20 GiB = 2 GiB
        assert_eq!(
            it.overhead.eviction_threshold,
            resources(0, 100 * MIB, 2 * GIB, 0)
        );
        // cpu 2000 − 70 = 1930 m; memory 7577 − 574 − 100 = 6903 MiB; storage 20 − 1 − 2 GiB
        assert_eq!(it.allocatable(), resources(1930, 6903 * MIB, 17 * GIB, 29));
    }

    #[test]
    fn c6g_xlarge_arm64_loses_64mib_before_vm_overhead() {
        let it = default_type("c6g.xlarge");
        // memory: 8192 − 64 = 8128 MiB; ⌈8128 × 0.075 = 609.6⌉ = 610 → 7518 MiB
        // pods: 4 × (15 − 1) + 2 = 58
        assert_eq!(it.capacity, resources(4000, 7518 * MIB, 20 * GIB, 58));
        // cpu: 60 + 10 + 0.5 % × 2000 = 80 m; memory: 11 × 58 + 255 = 893 MiB
        assert_eq!(it.overhead.kube_reserved, resources(80, 893 * MIB, GIB, 0));
        // cpu 4000 − 80 = 3920 m; memory 7518 − 893 − 100 = 6525 MiB
        assert_eq!(it.allocatable(), resources(3920, 6525 * MIB, 17 * GIB, 58));
        assert_eq!(label(&it, labels::ARCH), "arm64");
        assert_eq!(label(&it, labels::AWS_INSTANCE_CPU_MANUFACTURER), "aws");
    }

    #[test]
    fn p3_8xlarge_from_user_catalogue_with_gpus() {
        let catalogue = Catalogue::from_json(P3_8XLARGE).unwrap();
        let types = catalogue
            .instance_types(&CatalogueOptions::default())
            .unwrap();
        let it = &types[0];
        // memory: ⌈249856 × 0.075 = 18739.2⌉ = 18740 → 231116 MiB
        // pods: 8 × (30 − 1) + 2 = 234
        let mut capacity = resources(32_000, 231_116 * MIB, 20 * GIB, 234);
        capacity.extended = vec![(RESOURCE_NVIDIA_GPU.to_string(), 4)];
        assert_eq!(it.capacity, capacity);
        // cpu: 60 + 10 + 10 + 0.25 % × 28000 = 150 m; memory: 11 × 234 + 255 = 2829 MiB
        assert_eq!(
            it.overhead.kube_reserved,
            resources(150, 2829 * MIB, GIB, 0)
        );
        // cpu 31850 m; memory 231116 − 2829 − 100 = 228187 MiB; 4 GPUs
        let mut allocatable = resources(31_850, 228_187 * MIB, 17 * GIB, 234);
        allocatable.extended = vec![(RESOURCE_NVIDIA_GPU.to_string(), 4)];
        assert_eq!(it.allocatable(), allocatable);
        assert_eq!(label(it, labels::AWS_INSTANCE_GPU_NAME), "v100");
        assert_eq!(label(it, labels::AWS_INSTANCE_GPU_MANUFACTURER), "nvidia");
        assert_eq!(label(it, labels::AWS_INSTANCE_GPU_COUNT), "4");
        assert_eq!(label(it, labels::AWS_INSTANCE_GPU_MEMORY), "16384");
        assert_eq!(label(it, labels::REGION), "us-west-2");
        assert_eq!(label_values(it, labels::ZONE), ["us-west-2a", "us-west-2b"]);
        assert_does_not_exist(it, labels::AWS_INSTANCE_ACCELERATOR_NAME);
    }

    #[test]
    fn m5_large_labels() {
        let it = default_type("m5.large");
        for (key, want) in [
            (labels::INSTANCE_TYPE, "m5.large"),
            (labels::ARCH, "amd64"),
            (labels::OS, "linux"),
            (labels::REGION, "us-east-1"),
            (labels::AWS_INSTANCE_FAMILY, "m5"),
            (labels::AWS_INSTANCE_CATEGORY, "m"),
            (labels::AWS_INSTANCE_GENERATION, "5"),
            (labels::AWS_INSTANCE_SIZE, "large"),
            (labels::AWS_INSTANCE_CPU, "2"),
            (labels::AWS_INSTANCE_MEMORY, "8192"),
            (labels::AWS_INSTANCE_HYPERVISOR, "nitro"),
            (labels::AWS_INSTANCE_CPU_MANUFACTURER, "intel"),
        ] {
            assert_eq!(label(&it, key), want, "{key}");
        }
        assert_eq!(
            label_values(&it, labels::ZONE),
            [
                "us-east-1a",
                "us-east-1b",
                "us-east-1c",
                "us-east-1d",
                "us-east-1f"
            ]
        );
        assert_eq!(
            label_values(&it, labels::CAPACITY_TYPE),
            ["on-demand", "spot"]
        );
        for key in [
            labels::AWS_INSTANCE_GPU_NAME,
            labels::AWS_INSTANCE_GPU_COUNT,
            labels::AWS_INSTANCE_LOCAL_NVME,
            labels::AWS_INSTANCE_ACCELERATOR_COUNT,
            LABEL_WINDOWS_BUILD,
        ] {
            assert_does_not_exist(&it, key);
        }
    }

    #[test]
    fn accelerators_efa_and_local_storage() {
        let inf1 = default_type("inf1.xlarge");
        assert_eq!(inf1.capacity.get(RESOURCE_AWS_NEURON), 1);
        assert_eq!(inf1.capacity.get(RESOURCE_AWS_NEURON_CORE), 4);
        assert_eq!(
            label(&inf1, labels::AWS_INSTANCE_ACCELERATOR_NAME),
            "inferentia"
        );
        assert_eq!(
            label(&inf1, labels::AWS_INSTANCE_ACCELERATOR_MANUFACTURER),
            "aws"
        );
        assert_eq!(label(&inf1, labels::AWS_INSTANCE_ACCELERATOR_COUNT), "1");
        let trn1 = default_type("trn1.2xlarge");
        assert_eq!(trn1.capacity.get(RESOURCE_AWS_NEURON_CORE), 2);
        assert_eq!(label(&trn1, labels::AWS_INSTANCE_LOCAL_NVME), "474");
        let g4 = default_type("g4dn.12xlarge");
        assert_eq!(g4.capacity.get(RESOURCE_NVIDIA_GPU), 4);
        assert_eq!(g4.capacity.get(RESOURCE_EFA), 1);
        assert_eq!(label(&g4, labels::AWS_INSTANCE_GPU_NAME), "t4");
        // Fractional GPU (g6f): EC2 reports 0 whole GPUs, so no resource but the labels stay.
        let g6f = default_type("g6f.large");
        assert_eq!(g6f.capacity.get(RESOURCE_NVIDIA_GPU), 0);
        assert_eq!(label(&g6f, labels::AWS_INSTANCE_GPU_COUNT), "0");
        assert_eq!(label(&g6f, labels::AWS_INSTANCE_GPU_NAME), "l4");
        // Bare metal: no hypervisor, written as the empty value like upstream.
        assert_eq!(
            label(&default_type("a1.metal"), labels::AWS_INSTANCE_HYPERVISOR),
            ""
        );
    }

    #[test]
    fn category_generation_table() {
        for (name, want) in [
            ("m5.large", Some(("m", "5"))),
            ("x2iedn.xlarge", Some(("x", "2"))),
            ("u-6tb1.56xlarge", Some(("u", "1"))),
            ("u7i-12tb.224xlarge", Some(("u", "7"))),
            ("p6-b200.48xlarge", Some(("p", "6"))),
            ("mac2-m2.metal", Some(("mac", "2"))),
            ("m5", None),
            ("5m.large", None),
            ("fake-it-1", None),
        ] {
            assert_eq!(category_and_generation(name), want, "{name}");
        }
        let u = default_type("u-6tb1.56xlarge");
        assert_eq!(label(&u, labels::AWS_INSTANCE_FAMILY), "u-6tb1");
        assert_eq!(label(&u, labels::AWS_INSTANCE_GENERATION), "1");
        assert_eq!(lower_kebab_case("RTX PRO 4500"), "rtx-pro-4500");
    }

    #[test]
    fn offerings_on_demand_and_spot_per_zone() {
        let it = default_type("m5.large");
        assert_eq!(it.offerings.len(), 10);
        let od: Vec<_> = it
            .offerings
            .iter()
            .filter(|o| o.capacity_type == "on-demand")
            .collect();
        assert_eq!(od.len(), 5);
        assert!(od.iter().all(|o| o.price == 0.096 && o.available));
        let spot_1a = it
            .offerings
            .iter()
            .find(|o| o.capacity_type == "spot" && o.zone == "us-east-1a")
            .unwrap();
        assert!((spot_1a.price - 0.034_980_556_8).abs() < 1e-12);
        // On-demand only: no spot offering, no spot label value.
        let t2 = default_type("t2.nano");
        assert!(t2.offerings.iter().all(|o| o.capacity_type == "on-demand"));
        assert_eq!(label_values(&t2, labels::CAPACITY_TYPE), ["on-demand"]);
        // capacity-block never becomes an offering.
        let p5 = default_type("p5.48xlarge");
        assert!(
            p5.offerings
                .iter()
                .all(|o| o.capacity_type != "capacity-block")
        );
        assert_eq!(
            label_values(&p5, labels::CAPACITY_TYPE),
            ["on-demand", "spot"]
        );
    }

    #[test]
    fn the_split_build_is_the_entry_by_entry_build_in_catalogue_order() {
        let catalogue = Catalogue::embedded();
        let options = CatalogueOptions::default();
        let one_by_one: Vec<InstanceType> = catalogue
            .instance_types
            .iter()
            .filter_map(|e| build_instance_type(e, &catalogue.region, &options).unwrap())
            .collect();
        let split = default_instance_types();
        assert_eq!(split.len(), one_by_one.len());
        for (a, b) in split.iter().zip(&one_by_one) {
            assert_eq!(**a, *b, "{}", b.name);
        }
        // A small catalogue stays on one thread and gives the same types.
        let few = Catalogue {
            instance_types: catalogue.instance_types[..3].to_vec(),
            ..catalogue.clone()
        };
        let built = few.instance_types(&options).unwrap();
        assert_eq!(built.len(), 3);
        assert!(built.iter().zip(&one_by_one).all(|(a, b)| **a == *b));
    }

    #[test]
    fn every_embedded_type_builds_with_sane_allocatable() {
        let types = default_instance_types();
        assert_eq!(types.len(), 1340);
        for it in types {
            let a = it.allocatable();
            assert!(
                a.cpu_millis > 0 && a.memory > 0 && a.pods > 0,
                "{}: {a:?}",
                it.name
            );
            assert!(!it.offerings.is_empty(), "{}", it.name);
        }
        // Built once: the same allocation is returned again.
        assert!(std::ptr::eq(types, default_instance_types()));
    }

    #[test]
    fn kubelet_options_override() {
        let entry = Catalogue::embedded().get("m5.large").unwrap();
        let build =
            |o: &CatalogueOptions| build_instance_type(entry, "us-east-1", o).unwrap().unwrap();
        let it = build(&CatalogueOptions {
            max_pods: Some(110),
            ..Default::default()
        });
        assert_eq!(it.capacity.pods, 110);
        // kube-reserved memory still follows the 29 ENI-limited pods (AL2023 behaviour).
        assert_eq!(it.overhead.kube_reserved.memory, 574 * MIB);
        // min(29, 4 × 2 vCPU) = 8
        assert_eq!(
            build(&CatalogueOptions {
                pods_per_core: Some(4),
                ..Default::default()
            })
            .capacity
            .pods,
            8
        );
        // 2 usable ENIs: 2 × 9 + 2 = 20 pods; kube-reserved memory keeps 29 pods.
        let it = build(&CatalogueOptions {
            reserved_enis: 1,
            ..Default::default()
        });
        assert_eq!(
            (it.capacity.pods, it.overhead.kube_reserved.memory),
            (20, 574 * MIB)
        );
        let it = build(&CatalogueOptions {
            kube_reserved: [("cpu".to_string(), "200m".to_string())].into(),
            system_reserved: [("memory".to_string(), "1Gi".to_string())].into(),
            eviction_hard: [
                ("memory.available".to_string(), "5%".to_string()),
                ("nodefs.available".to_string(), "1Gi".to_string()),
                ("imagefs.available".to_string(), "15%".to_string()),
            ]
            .into(),
            ..Default::default()
        });
        assert_eq!(it.overhead.kube_reserved, resources(200, 574 * MIB, GIB, 0));
        assert_eq!(it.overhead.system_reserved, resources(0, GIB, 0, 0));
        // ⌈7577 MiB × 5 % = 397253017.6⌉ bytes
        assert_eq!(
            it.overhead.eviction_threshold,
            resources(0, 397_253_018, GIB, 0)
        );
        // No VM overhead: the full 8192 MiB.
        let it = build(&CatalogueOptions {
            vm_memory_overhead_percent: 0.0,
            ..Default::default()
        });
        assert_eq!(it.capacity.memory, 8192 * MIB);
    }

    #[test]
    fn zone_filter_and_region() {
        let opts = CatalogueOptions {
            zones: Some(["us-east-1c".to_string()].into()),
            region: Some("elsewhere".into()),
            ..Default::default()
        };
        let types = Catalogue::embedded().instance_types(&opts).unwrap();
        assert_eq!(types.len(), 1335);
        assert!(
            types
                .iter()
                .all(|it| it.offerings.iter().all(|o| o.zone == "us-east-1c"))
        );
        assert_eq!(label(&types[0], labels::REGION), "elsewhere");
        let none = CatalogueOptions {
            zones: Some(["mars-1a".to_string()].into()),
            ..Default::default()
        };
        assert!(
            Catalogue::embedded()
                .instance_types(&none)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn invalid_options_are_named() {
        let c = Catalogue::embedded();
        let cases = [
            (
                CatalogueOptions {
                    vm_memory_overhead_percent: 1.5,
                    ..Default::default()
                },
                "vmMemoryOverheadPercent",
            ),
            (
                CatalogueOptions {
                    eviction_hard: [("memory.available".to_string(), "lots%".to_string())].into(),
                    ..Default::default()
                },
                "evictionHard[\"memory.available\"]",
            ),
            (
                CatalogueOptions {
                    kube_reserved: [("cpu".to_string(), "1x".to_string())].into(),
                    ..Default::default()
                },
                "kubeReserved[\"cpu\"]",
            ),
            (
                CatalogueOptions {
                    system_reserved: [("memory".to_string(), "-1".to_string())].into(),
                    ..Default::default()
                },
                "systemReserved[\"memory\"]",
            ),
        ];
        for (opts, want) in cases {
            match c.instance_types(&opts) {
                Err(CatalogueError::Option { option, .. }) => assert_eq!(option, want),
                other => panic!("{want}: {other:?}"),
            }
        }
    }
}
