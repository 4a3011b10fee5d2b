//! Our catalogue in the format of upstream's kwok provider (`INSTANCE_TYPES_FILE_PATH`), so
//! that upstream Karpenter chooses from the same instance types, with the same allocatable
//! resources and at the same prices, as `karpenter controller --cloud-provider fake`.
//!
//! The kwok provider reads, per type, `name`, `architecture`, `operatingSystems`, `resources`
//! (its capacity) and `offerings` (`Price`, `Available`, `Requirements`). It subtracts a fixed
//! kube-reserved of 100m CPU and 10Mi memory and nothing else, so the capacity written here is
//! our allocatable plus exactly that: the peer's allocatable is then ours to the byte. It
//! has no other place for labels than an offering's requirements, which it turns into node
//! labels and matches NodePool requirements against; every single-valued label of our type
//! (`karpenter.k8s.aws/instance-category`, `-generation`, `-cpu`, region …) goes there, so a
//! NodePool written for our provider selects the same types on the peer.

use karpenter_scheduling::labels;
use karpenter_scheduling::model::InstanceType;
use serde_json::{Value, json};

/// What upstream's kwok provider reserves on every type: `100m` CPU.
pub const KWOK_RESERVED_CPU_MILLIS: i64 = 100;
/// What upstream's kwok provider reserves on every type: `10Mi` memory.
pub const KWOK_RESERVED_MEMORY_BYTES: i64 = 10 * 1024 * 1024;

/// Labels the kwok provider derives itself (from the type's name, architecture, operating
/// systems and offerings); the rest go into each offering's requirements.
const DERIVED_BY_KWOK: [&str; 5] = [
    labels::INSTANCE_TYPE,
    labels::ARCH,
    labels::OS,
    labels::ZONE,
    labels::CAPACITY_TYPE,
];

/// `types` as the kwok provider's instance-types file (a JSON array). Reserved offerings
/// are left out: the kwok provider has no capacity reservations.
pub fn kwok_instance_types(types: &[std::sync::Arc<InstanceType>]) -> Value {
    Value::Array(types.iter().map(|t| kwok_instance_type(t)).collect())
}

fn kwok_instance_type(t: &InstanceType) -> Value {
    let alloc = t.allocatable();
    let mut resources = serde_json::Map::new();
    resources.insert(
        "cpu".into(),
        json!(format!("{}m", alloc.cpu_millis + KWOK_RESERVED_CPU_MILLIS)),
    );
    resources.insert(
        "memory".into(),
        json!((alloc.memory + KWOK_RESERVED_MEMORY_BYTES).to_string()),
    );
    resources.insert("pods".into(), json!(alloc.pods.to_string()));
    resources.insert(
        "ephemeral-storage".into(),
        json!(alloc.ephemeral_storage.to_string()),
    );
    for (name, value) in &alloc.extended {
        resources.insert(name.clone(), json!(value.to_string()));
    }
    let single = t.requirements.single_valued_labels();
    let extra: Vec<Value> = single
        .iter()
        .filter(|(k, _)| !DERIVED_BY_KWOK.contains(&k.as_str()))
        .map(|(k, v)| json!({"key": k, "operator": "In", "values": [v]}))
        .collect();
    let offerings: Vec<Value> = t
        .offerings
        .iter()
        .filter(|o| o.reservation.is_none())
        .map(|o| {
            let mut reqs = vec![
                json!({"key": labels::CAPACITY_TYPE, "operator": "In", "values": [o.capacity_type]}),
                json!({"key": labels::ZONE, "operator": "In", "values": [o.zone]}),
            ];
            reqs.extend(extra.iter().cloned());
            json!({"Price": o.price, "Available": o.available, "Requirements": reqs})
        })
        .collect();
    let os: Vec<&str> = t
        .requirements
        .get(labels::OS)
        .map(|r| r.values().collect())
        .unwrap_or_else(|| vec!["linux"]);
    json!({
        "name": t.name,
        "architecture": single.get(labels::ARCH).cloned().unwrap_or_default(),
        "operatingSystems": os,
        "resources": resources,
        "offerings": offerings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_catalog::default_instance_types;
    use karpenter_scheduling::Quantity;

    fn quantity(v: &Value) -> Quantity {
        Quantity::parse(v.as_str().expect("a quantity string")).expect("a valid quantity")
    }

    /// What the kwok provider computes from the file: capacity less its fixed kube-reserved
    /// must be our allocatable, for every type and resource.
    #[test]
    fn the_peer_allocatable_is_ours_for_every_type() {
        let types = default_instance_types();
        let file = kwok_instance_types(types);
        let entries = file.as_array().expect("an array");
        assert_eq!(entries.len(), types.len());
        for (t, e) in types.iter().zip(entries) {
            let alloc = t.allocatable();
            let r = &e["resources"];
            assert_eq!(e["name"], t.name.as_str());
            assert_eq!(
                quantity(&r["cpu"]).milli_value() - KWOK_RESERVED_CPU_MILLIS,
                alloc.cpu_millis,
                "{} cpu",
                t.name
            );
            assert_eq!(
                quantity(&r["memory"]).value() - KWOK_RESERVED_MEMORY_BYTES,
                alloc.memory,
                "{} memory",
                t.name
            );
            assert_eq!(quantity(&r["pods"]).value(), alloc.pods, "{} pods", t.name);
            for (name, value) in &alloc.extended {
                assert_eq!(quantity(&r[name.as_str()]).value(), *value, "{}", t.name);
            }
        }
    }

    /// Same offerings at the same prices, and our labels on each, so NodePool requirements
    /// on `karpenter.k8s.aws/*` select the same types on both.
    #[test]
    fn offerings_carry_our_prices_and_labels() {
        let types = default_instance_types();
        let m5 = types
            .iter()
            .find(|t| t.name == "m5.large")
            .expect("m5.large");
        let e = kwok_instance_type(m5);
        let offerings = e["offerings"].as_array().expect("offerings");
        assert_eq!(offerings.len(), m5.offerings.len());
        for (o, ours) in offerings.iter().zip(&m5.offerings) {
            assert_eq!(o["Price"].as_f64(), Some(ours.price));
            let reqs = o["Requirements"].as_array().expect("requirements");
            let value = |key: &str| {
                reqs.iter()
                    .find(|r| r["key"] == key)
                    .map(|r| r["values"][0].as_str().unwrap_or_default().to_owned())
            };
            assert_eq!(value(labels::ZONE).as_deref(), Some(ours.zone.as_str()));
            assert_eq!(
                value(labels::CAPACITY_TYPE).as_deref(),
                Some(ours.capacity_type.as_str())
            );
            assert_eq!(value(labels::AWS_INSTANCE_CATEGORY).as_deref(), Some("m"));
            assert_eq!(value(labels::AWS_INSTANCE_CPU).as_deref(), Some("2"));
            assert_eq!(value(labels::INSTANCE_TYPE), None, "kwok derives it");
        }
        assert_eq!(e["architecture"], "amd64");
        assert_eq!(e["operatingSystems"], json!(["linux"]));
        // The design's spot-price test vector survives the conversion.
        let spot = offerings
            .iter()
            .find(|o| {
                o["Requirements"].as_array().is_some_and(|r| {
                    r.iter().any(|r| r["values"][0] == "spot")
                        && r.iter().any(|r| r["values"][0] == "us-east-1a")
                })
            })
            .expect("a spot offering in us-east-1a");
        let price = spot["Price"].as_f64().expect("price");
        assert!((price - 0.034_980_556_8).abs() < 1e-9, "{price}");
    }
}
