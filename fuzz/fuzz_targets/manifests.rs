#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karpenter_cluster::fuzzing::manifests(data));
