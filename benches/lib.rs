//! Criterion benches across the layers of cuzk live in `benches/`; this library is empty.
#![forbid(unsafe_code)]
