#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karpenter_scheduling::fuzzing::requirements(data));
