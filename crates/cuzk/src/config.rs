//! Engine configuration.

use std::fmt;
use std::str::FromStr;

pub use cuzk_cuda::kernels::{MulUnits, UnknownMulUnits};

/// Which backend proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BackendKind {
    /// The best backend available: CUDA when a usable GPU and the kernels are present, else the CPU.
    #[default]
    Auto,
    /// The CPU reference backend.
    Cpu,
    /// The CUDA backend; engine creation fails when it is not available.
    Cuda,
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
        })
    }
}

impl FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda),
            other => Err(format!("unknown backend `{other}`: expected cpu, cuda or auto")),
        }
    }
}

/// How an [`crate::Engine`] proves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The backend.
    pub backend: BackendKind,
    /// Check that each witness satisfies its constraints before proving, naming the first one that does
    /// not (on by default). Turning it off saves one pass over the constraints; an unsatisfied witness is
    /// then still caught by `verify_proofs`.
    pub check_witness: bool,
    /// Verify every proof against the key's verifying key before returning it (on by default).
    pub verify_proofs: bool,
    /// Synthesize witness-only when the key carries a recorded R1CS shape (on by default): the circuit
    /// only assigns its variables and `a`, `b`, `c` come from the shape's matrices, which always
    /// includes the satisfaction check. Off, every partition builds its own matrices (full synthesis).
    /// Keys without a shape are synthesized in full either way.
    pub witness_only: bool,
    /// With witness-only synthesis on a GPU, evaluate `a`, `b`, `c` on the device (on by default): the
    /// key's recorded shape is made resident beside its bases, a partition crosses the bus as its
    /// compact assignment (bitmaps of its zeros and ones, the other values packed), and the device
    /// checks every constraint. Off, or where the shape does not fit on a GPU (a
    /// [`crate::Degradation::HostEvaluation`]), the host computes and uploads `a`, `b`, `c`.
    pub evaluate_on_device: bool,
    /// The CUDA devices to prove on, by ordinal; `None` (the default) for every device. Keys are made
    /// resident on each of them, and a pipeline runs its GPU workers on each.
    pub cuda_devices: Option<Vec<usize>>,
    /// Give a key's MSMs tables of precomputed multiples of their bases on each GPU, in the memory
    /// left beside the key, its recorded shape and room for a few partitions (off by default): the
    /// windows of a scalar then share one set of buckets, so wider windows pay (H200, 2^24 random
    /// scalars: G1 132 -> 112 ms, G2 414 -> 349 ms). A table takes 13 times its bases' memory and
    /// seconds to build at key load, and it takes what later keys would need: turn it on where one key
    /// has a device to itself. [`crate::Key::msm_tables`] says which MSMs got one. The memory left
    /// after the tables then gives MSMs fewer, larger batches than the backend's (G1 2^27 random on
    /// the H200: one batch at 20-bit windows 719 ms against 840 in batches of 2^24);
    /// [`crate::Key::msm_batches`] says which. What is left after that gives H a partial table (a
    /// few multiples a point, from 2^24 points a batch), listed with the others, and last more
    /// chains a thread in its batched round where its batches are the longest (listed with the
    /// batches).
    pub msm_tables: bool,
    /// Which units the GPU's NTT passes and G1's batched MSM round multiply on: the integer
    /// multiply-adds (the default), the FP64 units, or both, alternating warp by warp on each
    /// scheduler. Every choice gives the same proofs; which is fastest is a measurement
    /// (docs/benchmarks/cuda-field-ntt.md).
    pub mul_units: MulUnits,
}

impl Default for Config {
    /// The best backend available, with every check on.
    fn default() -> Self {
        Self {
            backend: BackendKind::Auto,
            check_witness: true,
            verify_proofs: true,
            witness_only: true,
            evaluate_on_device: true,
            msm_tables: false,
            cuda_devices: None,
            mul_units: MulUnits::Integer,
        }
    }
}

impl Config {
    /// The CPU backend, with every check on.
    pub fn cpu() -> Self {
        Self { backend: BackendKind::Cpu, ..Self::default() }
    }

    /// The CUDA backend, with every check on.
    pub fn cuda() -> Self {
        Self { backend: BackendKind::Cuda, ..Self::default() }
    }

    /// This configuration with another backend.
    pub fn with_backend(mut self, backend: BackendKind) -> Self {
        self.backend = backend;
        self
    }
}
