//! What the engine does less well than it was asked to because the hardware could not do better: each
//! is logged as a warning when it happens and can be asked for ([`crate::Key::degradations`],
//! [`crate::Pipeline::degradations`]), so an operator sees it rather than only a slower engine.

/// One degradation of a key or a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Degradation {
    /// Some of the key's bases did not fit in GPU `device`'s memory beside the others: the MSMs over
    /// them read their points from pinned host memory on every proof.
    StreamedBases {
        /// The GPU's ordinal.
        device: usize,
        /// The MSMs whose bases are streamed (`"a"`, `"b_g1"`, `"l"`, `"h"`, `"b_g2"`).
        msms: Vec<&'static str>,
    },
    /// GPU `device` has memory for `slots` partitions beside the key, fewer than its `workers` GPU
    /// workers: a partition's upload then overlaps the previous one's kernels less, or not at all.
    FewerSlots {
        /// The GPU's ordinal.
        device: usize,
        /// Partition slots that fit.
        slots: usize,
        /// GPU workers configured per device.
        workers: usize,
    },
    /// The key's recorded R1CS shape could not be made resident on GPU `device`: witness-only
    /// partitions evaluate `a`, `b`, `c` on the host and upload them in full.
    HostEvaluation {
        /// The GPU's ordinal.
        device: usize,
        /// Why the shape is not on the device.
        reason: String,
    },
}

impl Degradation {
    /// A short name of the kind, for metrics labels: `"streamed_bases"` or `"fewer_slots"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Degradation::StreamedBases { .. } => "streamed_bases",
            Degradation::FewerSlots { .. } => "fewer_slots",
            Degradation::HostEvaluation { .. } => "host_evaluation",
        }
    }

    /// The GPU it concerns.
    pub fn device(&self) -> usize {
        match self {
            Degradation::StreamedBases { device, .. }
            | Degradation::FewerSlots { device, .. }
            | Degradation::HostEvaluation { device, .. } => *device,
        }
    }
}

impl std::fmt::Display for Degradation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Degradation::StreamedBases { device, msms } => write!(
                f,
                "GPU {device}: the bases of msm {} do not fit in device memory and are streamed from host \
                 memory on every proof",
                msms.join(", ")
            ),
            Degradation::FewerSlots { device, slots, workers } => write!(
                f,
                "GPU {device}: device memory holds {slots} partition slot(s) beside the key, fewer than the \
                 {workers} GPU workers, so uploads overlap kernels less"
            ),
            Degradation::HostEvaluation { device, reason } => write!(
                f,
                "GPU {device}: the key's R1CS matrices are not resident ({reason}), so a, b and c are \
                 evaluated on the host and uploaded in full"
            ),
        }
    }
}

/// Logs each degradation as a warning.
pub(crate) fn warn(degradations: &[Degradation]) {
    for d in degradations {
        tracing::warn!(kind = d.kind(), device = d.device(), "{d}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_degradation_names_its_gpu_and_what_it_costs() {
        let streamed = Degradation::StreamedBases { device: 3, msms: vec!["h", "b_g2"] };
        assert_eq!((streamed.kind(), streamed.device()), ("streamed_bases", 3));
        let text = streamed.to_string();
        assert!(
            text.starts_with("GPU 3:") && text.contains("msm h, b_g2") && text.contains("host memory"),
            "{text}"
        );
        let fewer = Degradation::FewerSlots { device: 1, slots: 1, workers: 2 };
        assert_eq!((fewer.kind(), fewer.device()), ("fewer_slots", 1));
        let text = fewer.to_string();
        assert!(text.contains("1 partition slot(s)") && text.contains("2 GPU workers"), "{text}");
    }
}
