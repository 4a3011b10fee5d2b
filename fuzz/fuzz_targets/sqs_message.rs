#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karpenter_aws_interruption::fuzzing::sqs_message(data));
