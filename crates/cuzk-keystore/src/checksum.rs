//! The checksums of the key format: XXH64, and a chunked form of it that hashes in parallel.
//!
//! XXH64 is implemented here from its specification (no dependency); the tests pin it to the
//! reference vectors, so any XXH64 tool can recompute a key file's checksums. The payload checksum
//! splits the payload into [`CHUNK_LEN`]-byte chunks (the last may be shorter), hashes every chunk with
//! XXH64 (seed 0) in parallel, and hashes the chunk digests (little-endian, in order) with XXH64 seeded
//! by the payload length. Chunk boundaries are fixed by the format, so the result does not depend on
//! how the payload is fed in or on the number of threads.

use rayon::prelude::*;

/// Bytes per independently hashed chunk of the payload checksum.
pub const CHUNK_LEN: usize = 1 << 20;

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2)).rotate_left(31).wrapping_mul(P1)
}

fn merge_round(acc: u64, val: u64) -> u64 {
    (acc ^ round(0, val)).wrapping_mul(P1).wrapping_add(P4)
}

/// XXH64 of `data` with `seed`, as specified by the xxHash project.
pub fn xxh64(data: &[u8], seed: u64) -> u64 {
    let (stripes, rest) = data.as_chunks::<32>();
    let mut h = if stripes.is_empty() {
        seed.wrapping_add(P5)
    } else {
        let mut v =
            [seed.wrapping_add(P1).wrapping_add(P2), seed.wrapping_add(P2), seed, seed.wrapping_sub(P1)];
        for stripe in stripes {
            let (words, _) = stripe.as_chunks::<8>();
            for (acc, word) in v.iter_mut().zip(words) {
                *acc = round(*acc, u64::from_le_bytes(*word));
            }
        }
        let [v1, v2, v3, v4] = v;
        let h = v1
            .rotate_left(1)
            .wrapping_add(v2.rotate_left(7))
            .wrapping_add(v3.rotate_left(12))
            .wrapping_add(v4.rotate_left(18));
        v.iter().fold(h, |h, &lane| merge_round(h, lane))
    };
    h = h.wrapping_add(data.len() as u64);

    let (words, rest) = rest.as_chunks::<8>();
    for word in words {
        h = (h ^ round(0, u64::from_le_bytes(*word))).rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
    }
    let (halves, rest) = rest.as_chunks::<4>();
    for half in halves {
        h = (h ^ u64::from(u32::from_le_bytes(*half)).wrapping_mul(P1))
            .rotate_left(23)
            .wrapping_mul(P2)
            .wrapping_add(P3);
    }
    for &byte in rest {
        h = (h ^ u64::from(byte).wrapping_mul(P5)).rotate_left(11).wrapping_mul(P1);
    }

    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

/// The payload checksum of `data` in one call (see the module docs).
pub fn payload_checksum(data: &[u8]) -> u64 {
    let mut hasher = ChunkedHasher::new();
    hasher.update(data);
    hasher.finish()
}

/// The payload checksum computed incrementally: feed the payload in pieces of any size, in order.
/// Whole chunks are hashed in parallel; a partial chunk is kept until the next piece completes it.
#[derive(Debug, Default)]
pub struct ChunkedHasher {
    pending: Vec<u8>,
    digests: Vec<u64>,
    len: u64,
}

impl ChunkedHasher {
    /// A hasher that has seen no bytes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next `data` bytes of the payload.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        if !self.pending.is_empty() {
            let (head, tail) = data.split_at(data.len().min(CHUNK_LEN - self.pending.len()));
            self.pending.extend_from_slice(head);
            data = tail;
            if self.pending.len() == CHUNK_LEN {
                self.digests.push(xxh64(&self.pending, 0));
                self.pending.clear();
            }
        }
        let (whole, tail) = data.split_at(data.len() - data.len() % CHUNK_LEN);
        self.digests.par_extend(whole.par_chunks(CHUNK_LEN).map(|chunk| xxh64(chunk, 0)));
        self.pending.extend_from_slice(tail);
    }

    /// Bytes fed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no bytes were fed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The checksum of everything fed.
    pub fn finish(mut self) -> u64 {
        if !self.pending.is_empty() {
            self.digests.push(xxh64(&self.pending, 0));
        }
        let list: Vec<u8> = self.digests.iter().flat_map(|d| d.to_le_bytes()).collect();
        xxh64(&list, self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxh64_matches_the_reference_vectors() {
        assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"", 1), 0xD5AF_BA13_36A3_BE4B);
        assert_eq!(xxh64(b"a", 0), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(xxh64(b"abc", 0), 0x44BC_2CF5_AD77_0999);
        assert_eq!(xxh64(b"Call me Ishmael.", 0), 0x6D04_390F_C9D6_1A90);
        // 39 bytes: one 32-byte stripe, then a 4-byte and three 1-byte tail steps.
        assert_eq!(xxh64(b"Nobody inspects the spammish repetition", 0), 0xFBCE_A83C_8A37_8BF1);
    }

    #[test]
    fn chunked_hash_ignores_how_the_payload_is_cut() {
        let data: Vec<u8> = (0..(2 * CHUNK_LEN + 12_345)).map(|i| (i * 31 % 251) as u8).collect();
        let whole = payload_checksum(&data);
        for cut in [97, CHUNK_LEN - 1, CHUNK_LEN, CHUNK_LEN + 1, 3 * 1000 * 1000] {
            let mut hasher = ChunkedHasher::new();
            data.chunks(cut).for_each(|piece| hasher.update(piece));
            assert_eq!(hasher.finish(), whole, "pieces of {cut} bytes");
        }
        let mut flipped = data.clone();
        if let Some(b) = flipped.get_mut(CHUNK_LEN + 5) {
            *b ^= 1;
        }
        assert_ne!(payload_checksum(&flipped), whole);
        assert_ne!(payload_checksum(&data[..data.len() - 1]), whole);
    }
}
