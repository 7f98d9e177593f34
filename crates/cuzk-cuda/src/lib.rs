#![doc = include_str!("../README.md")]

pub mod arena;
mod backend;
pub mod clock;
mod gpu;
pub mod kernels;
mod modules;
pub mod msm;
pub mod ntt;
pub mod profile;
mod r1cs;
pub mod scratch;
mod tables;
mod types;

pub use backend::{CudaBackend, GpuPoly};
pub use gpu::{DeviceInfo, Gpu, Timer};
pub use msm::{GpuBases, MsmConfig, Residency, Table};
pub use r1cs::{GpuShape, RowSplit};
pub use tables::{
    BatchReport, TableReport, PARTIAL_TABLE_CHOICES, PARTIAL_TABLE_MIN_POINTS, TABLE_CHOICES,
    TABLE_MIN_POINTS, WITNESS_SORT,
};
pub use types::{GpuAffine, GpuFq, GpuFq2, GpuFr, GpuG1Affine, GpuG2Affine, Xyzz};

/// What can go wrong on the GPU.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// The CUDA driver library (libcuda) could not be loaded.
    #[error("no CUDA driver: libcuda could not be loaded on this machine")]
    NoDriver,
    /// The driver loaded but reports no device.
    #[error("no CUDA device: the driver reports {0} devices")]
    NoDevice(i32),
    /// A device ordinal that does not exist.
    #[error("CUDA device {ordinal} does not exist ({count} devices)")]
    BadOrdinal {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// A driver call failed.
    #[error("CUDA driver call failed during {op}: {source}")]
    Driver {
        /// What was being done.
        op: &'static str,
        /// The driver's error.
        #[source]
        source: cudarc::driver::DriverError,
    },
    /// A buffer of the wrong length was passed to a kernel wrapper.
    #[error("{op}: buffer of {got} elements where {expected} are required")]
    Length {
        /// The wrapper.
        op: &'static str,
        /// Required length.
        expected: usize,
        /// Given length.
        got: usize,
    },
    /// A size the kernels do not support.
    #[error("{op}: unsupported size {size}: {reason}")]
    Size {
        /// The wrapper.
        op: &'static str,
        /// The size.
        size: usize,
        /// Why.
        reason: &'static str,
    },
    /// A kernel module failed to load earlier; every later use reports it.
    #[error("kernel module failed to load: {0}")]
    KernelLoad(String),
    /// Data that came back from the device is not valid (unreduced limbs, a point off its curve).
    #[error("invalid data from the device: {0}")]
    Layout(#[from] cuzk_field::LayoutError),
    /// Device memory too small for what was asked.
    #[error(
        "{what} needs {need} bytes of device memory and {free} are free (after the key's bases and a \
         reserve for the MSMs): use a smaller partition size or a larger device"
    )]
    OutOfMemory {
        /// What was being placed.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes free for it.
        free: usize,
    },
    /// A device self-check found a wrong result: the kernels cannot be trusted on this device.
    #[error("{op}: self-check failed: {what}")]
    SelfCheck {
        /// The operation.
        op: &'static str,
        /// What was wrong.
        what: &'static str,
    },
    /// A failure injected by `CudaBackend::inject_fault_after` (the `fault-injection` feature, for
    /// testing error paths).
    #[cfg(feature = "fault-injection")]
    #[error("injected CUDA failure in {op}")]
    Injected {
        /// The operation that failed.
        op: &'static str,
    },
}

impl CudaError {
    /// Whether device memory ran out: a placement that does not fit ([`CudaError::OutOfMemory`]) or
    /// an allocation the driver refused for want of memory.
    pub fn is_out_of_memory(&self) -> bool {
        use cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY;
        match self {
            CudaError::OutOfMemory { .. } => true,
            CudaError::Driver { source, .. } => source.0 == CUDA_ERROR_OUT_OF_MEMORY,
            _ => false,
        }
    }
}

/// Attaches the operation's name to a driver error.
pub(crate) trait DriverContext<T> {
    fn during(self, op: &'static str) -> Result<T, CudaError>;
}

impl<T> DriverContext<T> for Result<T, cudarc::driver::DriverError> {
    fn during(self, op: &'static str) -> Result<T, CudaError> {
        self.map_err(|source| CudaError::Driver { op, source })
    }
}
