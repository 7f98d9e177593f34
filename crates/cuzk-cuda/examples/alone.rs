//! A GPU MSM and an NTT over arkworks types, with `cuzk-cuda` alone; each checked against arkworks.

use ark_bls12_381::{Fr, G1Projective};
use ark_ec::{CurveGroup, VariableBaseMSM};
use ark_ff::FftField;
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use ark_std::UniformRand;
use cuzk_cuda::msm::G1;
use cuzk_cuda::CudaBackend;
use cuzk_groth16::{NttKind, PolyBackend};

/// Runs the MSM and the NTT on device 0.
pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Device 0: an error, never a panic, on a machine without a GPU.
    let gpu = CudaBackend::new(0)?;
    let mut rng = ark_std::test_rng();

    // An MSM over G1 with the bases resident on the device, against ark-ec.
    let bases: Vec<_> = (0..1000).map(|_| G1Projective::rand(&mut rng).into_affine()).collect();
    let scalars: Vec<Fr> = (0..1000).map(|_| Fr::rand(&mut rng)).collect();
    let resident = gpu.upload_bases::<G1>(&bases)?;
    let expected = G1Projective::msm(&bases, &scalars).expect("as many scalars as bases");
    assert_eq!(gpu.msm_host(&resident, &scalars)?, expected);

    // A coset NTT of 2^12 elements in ark-poly's conventions, against ark-poly.
    let values: Vec<Fr> = (0..1 << 12).map(|_| Fr::rand(&mut rng)).collect();
    let mut poly = gpu.poly_from_host(&values, values.len())?;
    gpu.ntt(&mut [&mut poly], NttKind::CosetForward)?;
    let coset = Radix2EvaluationDomain::<Fr>::new(values.len()).and_then(|d| d.get_coset(Fr::GENERATOR));
    assert_eq!(gpu.poly_to_host(&poly)?, coset.expect("a 2^12 coset").fft(&values));
    println!("the GPU's MSM and NTT agree with arkworks");
    Ok(())
}
