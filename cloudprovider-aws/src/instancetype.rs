//! Instance types from EC2: DescribeInstanceTypes (every page) and
//! DescribeInstanceTypeOfferings (zones per type), both cached, turned into
//! [`InstanceType`]s by the catalogue crate's shared rules ([`Catalogue::instance_types`]) so the
//! simulator and the real provider compute identical capacity and overhead. Offerings are
//! limited to the NodeClass's subnet zones, priced from [`PricingProvider`] and marked
//! unavailable while the insufficient-capacity cache holds them.

use crate::cache::{Clock, TtlCache, UnavailableOfferings};
use crate::discovery::kube_architecture;
use crate::error::AwsError;
use crate::kubelet::ParsedKubelet;
use crate::kubelet_resolve::{KubeletResolver, TypeKubelet};
use crate::nodeclass::EC2NodeClass;
use crate::pricing::PricingProvider;
use crate::settings::AwsSettings;
use aws_sdk_ec2::types::{InstanceTypeInfo, LocationType, SupportedAdditionalProcessorFeature};
use karpenter_catalog::allocatable::DEFAULT_ROOT_VOLUME_BYTES;
use karpenter_catalog::{Catalogue, CatalogueEntry, CatalogueOptions, GpuInfo};
use karpenter_scheduling::labels;
use karpenter_scheduling::model::InstanceType;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// One DescribeInstanceTypes entry as a catalogue entry (price and zones left empty; they
/// come from the pricing provider and the offerings). `None` for types Karpenter does not
/// launch: no HVM support, no amd64/arm64 architecture, or missing vCPU/memory/ENI data.
pub fn entry_from_info(info: &InstanceTypeInfo) -> Option<CatalogueEntry> {
    let name = info.instance_type()?.as_str().to_string();
    if !info
        .supported_virtualization_types()
        .iter()
        .any(|v| v.as_str() == "hvm")
    {
        return None;
    }
    let processor = info.processor_info()?;
    let architecture = processor
        .supported_architectures()
        .iter()
        .find_map(|a| kube_architecture(a.as_str()))?;
    let vcpu = u32::try_from(info.v_cpu_info()?.default_v_cpus()?).ok()?;
    let memory_mib = u64::try_from(info.memory_info()?.size_in_mib()?).ok()?;
    let network = info.network_info()?;
    let default_card = network.default_network_card_index().unwrap_or(0);
    let enis = network
        .network_cards()
        .iter()
        .find(|c| c.network_card_index() == Some(default_card))
        .and_then(|c| c.maximum_network_interfaces())
        .or(network.maximum_network_interfaces())?;
    let gpu = info.gpu_info().and_then(|g| {
        let first = g.gpus().first()?;
        Some(GpuInfo {
            count: g
                .gpus()
                .iter()
                .filter_map(|d| d.count())
                .map(|c| u32::try_from(c).unwrap_or(0))
                .sum(),
            manufacturer: first.manufacturer().unwrap_or_default().to_string(),
            name: first.name().unwrap_or_default().to_string(),
            memory_mib: first
                .memory_info()
                .and_then(|m| m.size_in_mib())
                .map_or(0, |m| u64::try_from(m).unwrap_or(0)),
        })
    });
    let neuron_devices = info.neuron_info().map_or(0, |n| {
        n.neuron_devices()
            .iter()
            .filter_map(|d| d.count())
            .map(|c| u32::try_from(c).unwrap_or(0))
            .sum()
    });
    let (family, size) = name
        .split_once('.')
        .map(|(f, s)| (f.to_string(), s.to_string()))
        .unwrap_or_else(|| (name.clone(), String::new()));
    Some(CatalogueEntry {
        family,
        size,
        vcpu,
        memory_mib,
        architecture: architecture.to_string(),
        cpu_manufacturer: processor.manufacturer().map(str::to_string),
        hypervisor: info.hypervisor().map(|h| h.as_str().to_string()),
        bare_metal: info.bare_metal().unwrap_or(false),
        burstable: info.burstable_performance_supported().unwrap_or(false),
        current_generation: info.current_generation().unwrap_or(false),
        max_network_interfaces: u32::try_from(enis).ok()?,
        ipv4_per_interface: u32::try_from(network.ipv4_addresses_per_interface()?).ok()?,
        efa_supported: network.efa_supported().unwrap_or(false),
        max_efa_interfaces: network
            .efa_info()
            .and_then(|e| e.maximum_efa_interfaces())
            .and_then(|n| u32::try_from(n).ok()),
        network_performance: network.network_performance().map(str::to_string),
        local_storage_gb: info
            .instance_storage_info()
            .and_then(|s| s.total_size_in_gb())
            .map_or(0, |g| u64::try_from(g).unwrap_or(0)),
        gpu,
        neuron_devices,
        usage_classes: info
            .supported_usage_classes()
            .iter()
            .map(|u| u.as_str().to_string())
            .collect(),
        on_demand_price_per_hour_usd: 0.0,
        zones: Vec::new(),
        name,
    })
}

/// The kubelet values of `node_class` for each instance type (its expressions compiled when
/// the `NodeClassCEL` gate is on).
pub fn kubelet_resolver(
    node_class: &EC2NodeClass,
    settings: &AwsSettings,
) -> Result<KubeletResolver, AwsError> {
    let invalid = |message: String| AwsError::Invalid {
        what: format!("EC2NodeClass {:?} spec.kubelet", node_class.name()),
        message,
    };
    let parsed = match &node_class.spec.kubelet {
        Some(k) => k.parse().map_err(invalid)?,
        None => ParsedKubelet::default(),
    };
    KubeletResolver::new(parsed, settings.node_class_cel, settings.reserved_enis).map_err(invalid)
}

/// The allocatable options an EC2NodeClass implies: its kubelet block (the values every
/// instance type shares; see [`kubelet_resolver`] for those computed per type), the root
/// volume (a `rootVolume` mapping, else the family's 20 GiB default), and the provider flags.
pub fn catalogue_options(
    node_class: &EC2NodeClass,
    settings: &AwsSettings,
) -> Result<CatalogueOptions, AwsError> {
    let resolver = kubelet_resolver(node_class, settings)?;
    let parsed = resolver.parsed();
    let shared = resolver.shared();
    let pods_per_core = parsed
        .pods_per_core
        .map(|v| {
            u32::try_from(v).map_err(|_| AwsError::Invalid {
                what: format!(
                    "EC2NodeClass {:?} spec.kubelet.podsPerCore",
                    node_class.name()
                ),
                message: format!("{v} is negative"),
            })
        })
        .transpose()?;
    // Bottlerocket's data volume and AL2023's root volume both default to 20 GiB, so one
    // default serves every family.
    Ok(CatalogueOptions {
        region: Some(settings.region.clone()),
        zones: None,
        max_pods: shared.max_pods,
        pods_per_core,
        reserved_enis: settings.reserved_enis,
        kube_reserved: shared.kube_reserved,
        system_reserved: shared.system_reserved,
        eviction_hard: parsed.eviction_hard.clone(),
        vm_memory_overhead_percent: settings.vm_memory_overhead_percent,
        root_volume_bytes: node_class
            .root_volume_bytes()
            .unwrap_or(DEFAULT_ROOT_VOLUME_BYTES),
    })
}

/// The instance types of `catalogue`, each with its class's kubelet values: types whose
/// expressions give the same values are built together, and a type an expression fails for
/// fails the whole listing, as upstream's resolution does.
///
/// # Errors
/// The failure, as text.
pub fn build_types(
    catalogue: Catalogue,
    options: &CatalogueOptions,
    resolver: &KubeletResolver,
) -> Result<Vec<Arc<InstanceType>>, String> {
    if !resolver.per_type() {
        return catalogue.instance_types(options).map_err(|e| e.to_string());
    }
    let mut groups: BTreeMap<TypeKubelet, Vec<CatalogueEntry>> = BTreeMap::new();
    for entry in catalogue.instance_types {
        let values = resolver.for_type(&entry)?;
        groups.entry(values).or_default().push(entry);
    }
    let mut types = Vec::new();
    for (values, entries) in groups {
        let options = CatalogueOptions {
            max_pods: values.max_pods,
            kube_reserved: values.kube_reserved,
            system_reserved: values.system_reserved,
            ..options.clone()
        };
        let group = Catalogue {
            region: catalogue.region.clone(),
            instance_types: entries,
        };
        types.extend(group.instance_types(&options).map_err(|e| e.to_string())?);
    }
    types.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(types)
}

/// Instance types and their offerings.
#[derive(Debug)]
pub struct InstanceTypeProvider {
    ec2: aws_sdk_ec2::Client,
    settings: AwsSettings,
    pricing: Arc<PricingProvider>,
    unavailable: Arc<UnavailableOfferings>,
    infos: TtlCache<(), Arc<Vec<CatalogueEntry>>>,
    /// The types that support optional features, from the same answers as `infos`.
    capable: TtlCache<(), Arc<FeatureSupport>>,
    offerings: TtlCache<(), Arc<BTreeMap<String, BTreeSet<String>>>>,
    built: std::sync::Mutex<Vec<Built>>,
    clock: Arc<dyn Clock>,
}

/// The types EC2 describes as supporting each optional feature a class can require.
#[derive(Debug, Default)]
struct FeatureSupport {
    /// `NitroEnclavesSupport: supported` (upstream's nitroEnclavesCompatibility).
    enclaves: BTreeSet<String>,
    /// `nested-virtualization` in `ProcessorInfo.SupportedFeatures` (upstream's
    /// nestedVirtualizationCompatibility).
    nested_virtualization: BTreeSet<String>,
}

/// A NodeClass's catalogue built from one generation of EC2's answers: rebuilding it
/// takes far longer than a launch's other preparation, and concurrent launches must reach
/// the CreateFleet batcher within its idle window to share a fleet.
#[derive(Debug)]
struct Built {
    entries: Arc<Vec<CatalogueEntry>>,
    offered: Arc<BTreeMap<String, BTreeSet<String>>>,
    on_demand: crate::pricing::OnDemandPrices,
    zones: BTreeSet<String>,
    options: karpenter_catalog::CatalogueOptions,
    /// The class's kubelet configuration, CEL gate and required features: its expressions
    /// make values differ from type to type beyond `options`, and features narrow the types.
    kubelet: String,
    types: Vec<Arc<InstanceType>>,
    /// `types` with spot prices and unavailable offerings applied: for this unavailable
    /// sequence number and spot answer, at most [`ADJUSTED_FOR`] old (so an expired
    /// unavailable mark shows within that time).
    adjusted: Option<(
        u64,
        crate::pricing::SpotPrices,
        SystemTime,
        Vec<Arc<InstanceType>>,
    )>,
}

/// How long an adjusted catalogue is reused.
const ADJUSTED_FOR: Duration = Duration::from_secs(1);

impl Built {
    fn is_for(
        &self,
        entries: &Arc<Vec<CatalogueEntry>>,
        offered: &Arc<BTreeMap<String, BTreeSet<String>>>,
        on_demand: &crate::pricing::OnDemandPrices,
        zones: &BTreeSet<String>,
        options: &karpenter_catalog::CatalogueOptions,
        kubelet: &str,
    ) -> bool {
        Arc::ptr_eq(&self.entries, entries)
            && Arc::ptr_eq(&self.offered, offered)
            && Arc::ptr_eq(&self.on_demand, on_demand)
            && self.zones == *zones
            && self.options == *options
            && self.kubelet == kubelet
    }
}

/// EC2's answers a catalogue is built from.
#[derive(Clone, Copy)]
struct Described<'a> {
    entries: &'a [CatalogueEntry],
    offered: &'a BTreeMap<String, BTreeSet<String>>,
    on_demand: &'a crate::pricing::OnDemandPrices,
    /// The class's required features: a type must be in every set.
    required: &'a [&'a BTreeSet<String>],
    /// Only Nitro types (connection tracking needs them: upstream's
    /// connectionTrackingCompatibility).
    nitro_only: bool,
}

/// How many built catalogues are kept (one per distinct NodeClass shape in use).
const BUILT_KEPT: usize = 16;

impl InstanceTypeProvider {
    /// The catalogue of `node_class` from EC2's answers, before spot prices and
    /// unavailable offerings are applied.
    fn build(
        &self,
        node_class: &EC2NodeClass,
        ec2: &Described<'_>,
        zones: &BTreeSet<String>,
        options: &karpenter_catalog::CatalogueOptions,
        resolver: &KubeletResolver,
    ) -> Result<Vec<Arc<InstanceType>>, AwsError> {
        let Described {
            entries,
            offered,
            on_demand,
            required,
            nitro_only,
        } = *ec2;
        let mut catalogue = Catalogue {
            region: self.settings.region.clone(),
            instance_types: Vec::with_capacity(entries.len()),
        };
        for e in entries.iter() {
            let mut entry = e.clone();
            entry.zones = offered
                .get(&entry.name)
                .map(|z| z.intersection(zones).cloned().collect())
                .unwrap_or_default();
            if entry.zones.is_empty() {
                continue;
            }
            // Only the types that support every feature the class turns on (upstream's
            // compatibility checks: Nitro Enclaves, nested virtualization).
            if required.iter().any(|set| !set.contains(&entry.name)) {
                continue;
            }
            if nitro_only && entry.hypervisor.as_deref() != Some("nitro") {
                continue;
            }
            match on_demand.get(&entry.name) {
                Some(p) => entry.on_demand_price_per_hour_usd = *p,
                // Without a price the optimiser cannot rank on-demand; upstream drops the
                // offering too.
                None => entry
                    .usage_classes
                    .retain(|u| u != labels::CAPACITY_TYPE_ON_DEMAND),
            }
            if !entry.supports_on_demand() && !entry.supports_spot() {
                continue;
            }
            catalogue.instance_types.push(entry);
        }
        build_types(catalogue, options, resolver).map_err(|message| AwsError::Invalid {
            what: format!("EC2NodeClass {:?} kubelet settings", node_class.name()),
            message,
        })
    }

    /// Upstream's `ValidateKubeletExpressions`: `node_class`'s kubelet expressions evaluated
    /// for every instance type EC2 describes; the first failure, naming the type.
    ///
    /// # Errors
    /// EC2 could not be asked (the check is then not decided).
    pub async fn kubelet_expression_failure(
        &self,
        node_class: &EC2NodeClass,
    ) -> Result<Option<String>, AwsError> {
        let resolver = match kubelet_resolver(node_class, &self.settings) {
            Ok(r) => r,
            Err(e) => return Ok(Some(e.to_string())),
        };
        if !resolver.per_type() {
            return Ok(None);
        }
        let entries = self.entries().await?;
        Ok(entries.iter().find_map(|e| resolver.for_type(e).err()))
    }

    /// A provider caching EC2's answers for `settings.instance_types_ttl` on `clock`.
    pub fn new(
        ec2: aws_sdk_ec2::Client,
        settings: AwsSettings,
        pricing: Arc<PricingProvider>,
        unavailable: Arc<UnavailableOfferings>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let ttl = settings.instance_types_ttl;
        Self {
            ec2,
            settings,
            pricing,
            unavailable,
            infos: TtlCache::new(clock.clone(), ttl),
            capable: TtlCache::new(clock.clone(), ttl),
            offerings: TtlCache::new(clock.clone(), ttl),
            clock,
            built: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Every launchable type EC2 describes (all pages), cached.
    pub async fn entries(&self) -> Result<Arc<Vec<CatalogueEntry>>, AwsError> {
        if let Some(hit) = self.infos.get(&()) {
            return Ok(hit);
        }
        let mut entries = Vec::new();
        let mut capable = FeatureSupport::default();
        let mut token = None;
        loop {
            let page = self
                .ec2
                .describe_instance_types()
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::api("DescribeInstanceTypes", e))?;
            entries.extend(page.instance_types().iter().filter_map(entry_from_info));
            for info in page.instance_types() {
                let Some(name) = info.instance_type().map(|t| t.as_str()) else {
                    continue;
                };
                if info
                    .nitro_enclaves_support()
                    .is_some_and(|s| s.as_str() == "supported")
                {
                    capable.enclaves.insert(name.to_owned());
                }
                if info.processor_info().is_some_and(|p| {
                    p.supported_features()
                        .contains(&SupportedAdditionalProcessorFeature::NestedVirtualization)
                }) {
                    capable.nested_virtualization.insert(name.to_owned());
                }
            }
            token = page
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries.dedup_by(|a, b| a.name == b.name);
        let entries = Arc::new(entries);
        self.infos.insert((), entries.clone());
        self.capable.insert((), Arc::new(capable));
        Ok(entries)
    }

    /// The types that support each optional feature, as EC2 last described them.
    async fn capable(&self) -> Result<Arc<FeatureSupport>, AwsError> {
        if let Some(hit) = self.capable.get(&()) {
            return Ok(hit);
        }
        self.infos.clear();
        self.entries().await?;
        Ok(self.capable.get(&()).unwrap_or_default())
    }

    /// The zones offering each type (all pages), cached.
    pub async fn zone_offerings(
        &self,
    ) -> Result<Arc<BTreeMap<String, BTreeSet<String>>>, AwsError> {
        if let Some(hit) = self.offerings.get(&()) {
            return Ok(hit);
        }
        let mut zones: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut token = None;
        loop {
            let page = self
                .ec2
                .describe_instance_type_offerings()
                .location_type(LocationType::AvailabilityZone)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::api("DescribeInstanceTypeOfferings", e))?;
            for o in page.instance_type_offerings() {
                if let (Some(it), Some(zone)) = (o.instance_type(), o.location()) {
                    zones
                        .entry(it.as_str().to_string())
                        .or_default()
                        .insert(zone.to_string());
                }
            }
            token = page
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        let zones = Arc::new(zones);
        self.offerings.insert((), zones.clone());
        Ok(zones)
    }

    /// The instance types `node_class` can launch: offered in one of its subnets' zones,
    /// priced, with allocatable from its kubelet settings and unavailable offerings marked.
    pub async fn list(
        &self,
        node_class: &EC2NodeClass,
    ) -> Result<Vec<Arc<InstanceType>>, AwsError> {
        let status = node_class.status_or_default();
        let subnet_zones = crate::discovery::zones(&status.subnets);
        let entries = self.entries().await?;
        let offered = self.zone_offerings().await?;
        let on_demand = self.pricing.on_demand().await;
        let spot = match self.pricing.spot().await {
            Ok(s) => s,
            Err(e) => {
                // Spot offerings keep the shared rule's prices rather than vanishing.
                tracing::warn!(error = %e, "spot price history unavailable");
                Arc::new(BTreeMap::new())
            }
        };
        let options = catalogue_options(node_class, &self.settings)?;
        let resolver = kubelet_resolver(node_class, &self.settings)?;
        let (enclaves, nested) = (
            node_class.enclaves_enabled(),
            node_class.nested_virtualization_enabled(),
        );
        let capable = match enclaves || nested {
            true => self.capable().await?,
            false => Arc::default(),
        };
        let mut required = Vec::new();
        if enclaves {
            required.push(&capable.enclaves);
        }
        if nested {
            required.push(&capable.nested_virtualization);
        }
        let nitro_only = node_class.spec.connection_tracking.is_some();
        let kubelet = format!(
            "{}|{}|{}|{}|{}",
            node_class
                .spec
                .kubelet
                .as_ref()
                .map_or_else(|| "null".to_owned(), |k| k.canonical_json()),
            self.settings.node_class_cel,
            enclaves,
            nested,
            nitro_only
        );
        let (seq, now) = (self.unavailable.seq_num(), self.clock.now());
        let fresh = |(s, sp, at, _): &&(u64, crate::pricing::SpotPrices, SystemTime, _)| {
            *s == seq
                && Arc::ptr_eq(sp, &spot)
                && now.duration_since(*at).is_ok_and(|d| d < ADJUSTED_FOR)
        };
        let hit = {
            let built = self
                .built
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut found = built.iter();
            let found = found.find(|b| {
                b.is_for(
                    &entries,
                    &offered,
                    &on_demand,
                    &subnet_zones,
                    &options,
                    &kubelet,
                )
            });
            if let Some((_, _, _, adjusted)) = found.and_then(|b| b.adjusted.as_ref()).filter(fresh)
            {
                return Ok(adjusted.clone());
            }
            found.map(|b| b.types.clone())
        };
        let types = match hit {
            Some(types) => types,
            None => {
                let described = Described {
                    entries: &entries,
                    offered: &offered,
                    on_demand: &on_demand,
                    required: &required,
                    nitro_only,
                };
                let types =
                    self.build(node_class, &described, &subnet_zones, &options, &resolver)?;
                let mut built = self
                    .built
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if built.len() >= BUILT_KEPT {
                    built.remove(0);
                }
                built.push(Built {
                    entries: entries.clone(),
                    offered: offered.clone(),
                    on_demand: on_demand.clone(),
                    zones: subnet_zones.clone(),
                    options: options.clone(),
                    kubelet: kubelet.clone(),
                    types: types.clone(),
                    adjusted: None,
                });
                types
            }
        };
        let adjusted: Vec<Arc<InstanceType>> = types
            .into_iter()
            .map(|it| {
                let mut it = InstanceType::clone(&it);
                for o in &mut it.offerings {
                    if o.capacity_type == labels::CAPACITY_TYPE_SPOT
                        && let Some(p) = spot.get(&(it.name.clone(), o.zone.clone()))
                    {
                        o.price = *p;
                    }
                    if self
                        .unavailable
                        .is_unavailable(&it.name, &o.zone, &o.capacity_type)
                    {
                        o.available = false;
                    }
                }
                Arc::new(it)
            })
            .collect();
        let mut built = self
            .built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut found = built.iter_mut();
        if let Some(b) = found.find(|b| {
            b.is_for(
                &entries,
                &offered,
                &on_demand,
                &subnet_zones,
                &options,
                &kubelet,
            )
        }) {
            b.adjusted = Some((seq, spot.clone(), now, adjusted.clone()));
        }
        Ok(adjusted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{
        ArchitectureType, GpuDeviceInfo, GpuDeviceMemoryInfo, InstanceType as Ec2Type, MemoryInfo,
        NetworkCardInfo, NetworkInfo, ProcessorInfo, UsageClassType, VCpuInfo, VirtualizationType,
    };

    fn info(name: &str, arch: ArchitectureType) -> InstanceTypeInfo {
        InstanceTypeInfo::builder()
            .instance_type(Ec2Type::from(name))
            .supported_virtualization_types(VirtualizationType::Hvm)
            .processor_info(
                ProcessorInfo::builder()
                    .supported_architectures(arch)
                    .manufacturer("Intel")
                    .build(),
            )
            .v_cpu_info(VCpuInfo::builder().default_v_cpus(2).build())
            .memory_info(MemoryInfo::builder().size_in_mib(8192).build())
            .network_info(
                NetworkInfo::builder()
                    .maximum_network_interfaces(3)
                    .ipv4_addresses_per_interface(10)
                    .default_network_card_index(0)
                    .network_cards(
                        NetworkCardInfo::builder()
                            .network_card_index(0)
                            .maximum_network_interfaces(3)
                            .build(),
                    )
                    .build(),
            )
            .supported_usage_classes(UsageClassType::OnDemand)
            .supported_usage_classes(UsageClassType::Spot)
            .current_generation(true)
            .build()
    }

    #[test]
    fn converts_describe_instance_types_entries() {
        let e = entry_from_info(&info("m5.large", ArchitectureType::X8664)).expect("entry");
        assert_eq!(e.name, "m5.large");
        assert_eq!((e.family.as_str(), e.size.as_str()), ("m5", "large"));
        assert_eq!(e.architecture, "amd64");
        assert_eq!((e.vcpu, e.memory_mib), (2, 8192));
        assert_eq!((e.max_network_interfaces, e.ipv4_per_interface), (3, 10));
        assert_eq!(e.usage_classes, vec!["on-demand", "spot"]);
        assert_eq!(e.cpu_manufacturer.as_deref(), Some("Intel"));
        assert!(entry_from_info(&info("m1.small", ArchitectureType::I386)).is_none());
        let gpu = InstanceTypeInfo::builder()
            .gpu_info(
                aws_sdk_ec2::types::GpuInfo::builder()
                    .gpus(
                        GpuDeviceInfo::builder()
                            .name("T4")
                            .manufacturer("NVIDIA")
                            .count(1)
                            .memory_info(GpuDeviceMemoryInfo::builder().size_in_mib(16384).build())
                            .build(),
                    )
                    .build(),
            )
            .build();
        let mut with_gpu = info("g4dn.xlarge", ArchitectureType::X8664);
        with_gpu.gpu_info = gpu.gpu_info;
        let e = entry_from_info(&with_gpu).expect("entry");
        let g = e.gpu.expect("gpu");
        assert_eq!((g.count, g.name.as_str(), g.memory_mib), (1, "T4", 16384));
    }

    #[test]
    fn allocatable_uses_the_shared_rules_and_kubelet_overrides() {
        // The same entry built through the catalogue crate with and without the NodeClass's
        // kubelet block: maxPods replaces the ENI-limited count (29) and kubeReserved
        // replaces the computed cpu reservation.
        let mut entry = entry_from_info(&info("m5.large", ArchitectureType::X8664)).expect("entry");
        entry.zones = vec!["us-east-1a".into()];
        entry.on_demand_price_per_hour_usd = 0.096;
        let settings = AwsSettings::new("demo", "us-east-1");
        let mut nc: EC2NodeClass = crate::nodeclass::from_yaml(
            "metadata: {name: default}\nspec: {amiSelectorTerms: [{alias: al2023@latest}]}",
        )
        .expect("parses");
        let plain = karpenter_catalog::build_instance_type(
            &entry,
            "us-east-1",
            &catalogue_options(&nc, &settings).expect("options"),
        )
        .expect("builds")
        .expect("has offerings");
        assert_eq!(plain.capacity.pods, 29);
        assert_eq!(plain.overhead.kube_reserved.cpu_millis, 70);
        nc.spec.kubelet = Some(
            serde_json::from_value(serde_json::json!({
                "maxPods": 110, "kubeReserved": {"cpu": "200m"}
            }))
            .unwrap(),
        );
        let tuned = karpenter_catalog::build_instance_type(
            &entry,
            "us-east-1",
            &catalogue_options(&nc, &settings).expect("options"),
        )
        .expect("builds")
        .expect("has offerings");
        assert_eq!(tuned.capacity.pods, 110);
        assert_eq!(tuned.overhead.kube_reserved.cpu_millis, 200);
        // The identical entry in the embedded catalogue builds to the same capacity.
        let embedded = karpenter_catalog::default_instance_types()
            .iter()
            .find(|it| it.name == "m5.large")
            .expect("m5.large in catalogue");
        assert_eq!(embedded.capacity, plain.capacity);
        assert_eq!(embedded.overhead, plain.overhead);
    }

    #[test]
    fn kubelet_expressions_set_each_types_allocatable_with_the_gate_on() {
        let entry = |name: &str| {
            let mut e = entry_from_info(&info(name, ArchitectureType::X8664)).expect("entry");
            e.zones = vec!["us-east-1a".into()];
            e.on_demand_price_per_hour_usd = 0.1;
            e
        };
        let (mut large, mut xlarge) = (entry("m5.large"), entry("m5.xlarge"));
        (xlarge.vcpu, xlarge.memory_mib) = (4, 16384);
        (large.max_network_interfaces, large.ipv4_per_interface) = (3, 10);
        let mut nc: EC2NodeClass = crate::nodeclass::from_yaml(
            "metadata: {name: default}\nspec: {amiSelectorTerms: [{alias: al2023@latest}]}",
        )
        .expect("parses");
        nc.spec.kubelet = Some(
            serde_json::from_value(serde_json::json!({
                "maxPods": "vcpus * 10", "kubeReserved": {"cpu": "vcpus * 100"}
            }))
            .unwrap(),
        );
        let build = |cel: bool| {
            let mut settings = AwsSettings::new("demo", "us-east-1");
            settings.node_class_cel = cel;
            let catalogue = Catalogue {
                region: "us-east-1".into(),
                instance_types: vec![xlarge.clone(), large.clone()],
            };
            let options = catalogue_options(&nc, &settings).expect("options");
            let resolver = kubelet_resolver(&nc, &settings).expect("resolver");
            build_types(catalogue, &options, &resolver).expect("builds")
        };
        let types = build(true);
        let names: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["m5.large", "m5.xlarge"]);
        assert_eq!((types[0].capacity.pods, types[1].capacity.pods), (20, 40));
        assert_eq!(types[0].overhead.kube_reserved.cpu_millis, 200);
        assert_eq!(types[1].overhead.kube_reserved.cpu_millis, 400);
        // Gate off: the default count and the computed reservation.
        let types = build(false);
        let large = types
            .iter()
            .find(|t| t.name == "m5.large")
            .expect("m5.large");
        assert_eq!(large.capacity.pods, 29);
        assert_eq!(large.overhead.kube_reserved.cpu_millis, 70);
    }
}
