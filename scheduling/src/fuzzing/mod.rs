//! Entry points of the fuzz targets in `fuzz/` (`quantity`, `requirements`,
//! `label_selector`), shared with this crate's tests, which replay the committed corpora
//! through them on stable Rust and drive them from proptest generators. Not part of the API:
//! hidden from the documentation and free to change.
//!
//! Each function accepts any bytes and panics only when the code under test breaks one of
//! the properties it checks (or panics by itself), which is what a fuzzer reports.

mod bytes;
mod quantity;
mod requirements;
mod selector;

pub use bytes::Bytes;
pub use quantity::{check_quantity_text, quantity};
pub use requirements::{OPERATORS, check_requirements, requirements};
pub use selector::{check_label_selector, label_selector};
