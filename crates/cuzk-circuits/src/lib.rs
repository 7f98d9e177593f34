#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod synthetic;

pub use synthetic::Synthetic;
