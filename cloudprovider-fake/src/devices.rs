//! The DRA devices a fake GPU instance publishes: one device per GPU from driver
//! [`GPU_DRIVER`], named `gpu-0`, `gpu-1`, … with the attributes `model`, `manufacturer`
//! (from the instance type's GPU labels), `memory` (MiB per GPU) and `index`, and the
//! capacity `memory`. The scheduler simulates claims against these templates; the fake
//! kubelet publishes the same devices in a ResourceSlice once the node exists.

use karpenter_scheduling::devices::{Device, DeviceAttribute};
use karpenter_scheduling::labels::{
    AWS_INSTANCE_GPU_COUNT, AWS_INSTANCE_GPU_MANUFACTURER, AWS_INSTANCE_GPU_MEMORY,
    AWS_INSTANCE_GPU_NAME,
};
use karpenter_scheduling::model::InstanceType;
use karpenter_scheduling::quantity::{Quantity, QuantityFormat};
use std::collections::BTreeMap;

/// The fake GPU driver's name.
pub const GPU_DRIVER: &str = "gpu.fake.karpenter.sh";

fn single_label<'a>(it: &'a InstanceType, key: &str) -> Option<&'a str> {
    let r = it.requirements.get(key)?;
    let mut values = r.values();
    let v = values.next()?;
    values.next().is_none().then_some(v)
}

/// The devices `it` publishes: none unless it has GPUs.
pub fn gpu_devices(it: &InstanceType) -> Vec<Device> {
    devices_from(|key| single_label(it, key))
}

/// The devices a fake Node publishes, from its instance type's GPU labels (which a launched
/// Node carries): the same as [`gpu_devices`] of its type.
pub fn node_gpu_devices(labels: &BTreeMap<String, String>) -> Vec<Device> {
    devices_from(|key| labels.get(key).map(String::as_str))
}

fn devices_from<'a>(label: impl Fn(&str) -> Option<&'a str>) -> Vec<Device> {
    let count: usize = label(AWS_INSTANCE_GPU_COUNT)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let model = label(AWS_INSTANCE_GPU_NAME).unwrap_or("unknown");
    let manufacturer = label(AWS_INSTANCE_GPU_MANUFACTURER).unwrap_or("unknown");
    let memory_mib: i64 = label(AWS_INSTANCE_GPU_MEMORY)
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    (0..count)
        .map(|i| Device {
            driver: GPU_DRIVER.into(),
            pool: String::new(),
            name: format!("gpu-{i}"),
            attributes: BTreeMap::from([
                ("model".into(), DeviceAttribute::String(model.into())),
                (
                    "manufacturer".into(),
                    DeviceAttribute::String(manufacturer.into()),
                ),
                ("memory".into(), DeviceAttribute::Int(memory_mib)),
                ("index".into(), DeviceAttribute::Int(i as i64)),
            ]),
            capacity: BTreeMap::from([(
                "memory".into(),
                Quantity::from_value(memory_mib * 1024 * 1024, QuantityFormat::BinarySI),
            )]),
        })
        .collect()
}

/// `types` with each GPU type's devices filled in (a type that already lists devices keeps
/// them).
pub fn with_gpu_devices(
    types: Vec<std::sync::Arc<InstanceType>>,
) -> Vec<std::sync::Arc<InstanceType>> {
    types
        .into_iter()
        .map(|it| {
            let devices = gpu_devices(&it);
            if devices.is_empty() || !it.devices.is_empty() {
                return it;
            }
            let mut it = (*it).clone();
            it.devices = devices;
            std::sync::Arc::new(it)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_catalog::default_instance_types;

    #[test]
    fn gpu_types_publish_one_device_per_gpu() {
        let types = with_gpu_devices(default_instance_types().to_vec());
        let mut gpu_types = 0;
        for it in &types {
            let count: usize = single_label(it, AWS_INSTANCE_GPU_COUNT)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            assert_eq!(it.devices.len(), count, "{}", it.name);
            if count == 0 {
                continue;
            }
            gpu_types += 1;
            let d = it.devices.last().unwrap();
            assert_eq!(d.driver, GPU_DRIVER);
            assert_eq!(d.name, format!("gpu-{}", count - 1));
            let model = single_label(it, AWS_INSTANCE_GPU_NAME).unwrap();
            assert_eq!(
                d.attribute(GPU_DRIVER, "model"),
                Some(&DeviceAttribute::String(model.into()))
            );
            assert!(matches!(
                d.attribute(GPU_DRIVER, "memory"),
                Some(DeviceAttribute::Int(m)) if *m > 0
            ));
        }
        assert!(gpu_types > 0, "the catalogue has GPU types");
    }
}
