//! Bulk, parallel conversion between arkworks slices and device-layout slices.

use rayon::prelude::*;

use crate::{DeviceRepr, LayoutError};

/// Elements per rayon task: large enough that scheduling costs nothing next to the copies.
const CHUNK: usize = 1 << 14;

fn check_len(source_len: usize, dest_len: usize) -> Result<(), LayoutError> {
    if source_len == dest_len {
        Ok(())
    } else {
        Err(LayoutError::LengthMismatch { source_len, dest_len })
    }
}

/// Copies `src` into `dst` in device layout, in parallel. The slices must have equal lengths.
pub fn to_device<T: DeviceRepr>(src: &[T::Ark], dst: &mut [T]) -> Result<(), LayoutError> {
    check_len(src.len(), dst.len())?;
    dst.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(d, s)| {
        for (d, s) in d.iter_mut().zip(s) {
            *d = T::from_ark(s);
        }
    });
    Ok(())
}

/// Converts `src` into a new vector in device layout, in parallel.
pub fn to_device_vec<T: DeviceRepr>(src: &[T::Ark]) -> Vec<T> {
    src.par_iter().with_min_len(CHUNK).map(T::from_ark).collect()
}

/// Converts device-layout values back into `dst`, checking every element (reduced limbs, points on
/// their curve). On error `dst` may be partly written.
pub fn from_device<T: DeviceRepr>(src: &[T], dst: &mut [T::Ark]) -> Result<(), LayoutError> {
    check_len(src.len(), dst.len())?;
    dst.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).enumerate().try_for_each(|(c, (d, s))| {
        for (i, (d, s)) in d.iter_mut().zip(s).enumerate() {
            *d = s.to_ark_checked(c * CHUNK + i)?;
        }
        Ok(())
    })
}

/// Converts device-layout values back without checks; see [`DeviceRepr::to_ark_unchecked`].
pub fn from_device_unchecked<T: DeviceRepr>(src: &[T], dst: &mut [T::Ark]) -> Result<(), LayoutError> {
    check_len(src.len(), dst.len())?;
    dst.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(d, s)| {
        for (d, s) in d.iter_mut().zip(s) {
            *d = s.to_ark_unchecked();
        }
    });
    Ok(())
}

/// Converts device-layout values into a new vector, checking every element.
pub fn from_device_vec<T: DeviceRepr>(src: &[T]) -> Result<Vec<T::Ark>, LayoutError> {
    src.par_iter().enumerate().with_min_len(CHUNK).map(|(i, s)| s.to_ark_checked(i)).collect()
}
