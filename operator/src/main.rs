//! The `karpenter` binary.
#![forbid(unsafe_code)]

fn main() -> anyhow::Result<()> {
    Ok(())
}
