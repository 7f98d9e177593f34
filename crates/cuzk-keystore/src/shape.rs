//! Shape ids: the names under which keys are stored, validated so they are always a plain file name.

use std::fmt;

use crate::Error;

/// The longest shape id, in bytes.
pub const MAX_SHAPE_ID_LEN: usize = 64;

/// A validated circuit shape id: 1 to [`MAX_SHAPE_ID_LEN`] characters, each an ASCII letter, digit,
/// `.`, `_` or `-`. It names a key in a [`crate::KeyStore`] (with the [`crate::FILE_EXTENSION`]
/// appended, so even `.` and `..` name a plain file inside the store's directory) and is recorded
/// in every key file's header.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShapeId(String);

impl ShapeId {
    /// Validates `id`.
    pub fn new(id: &str) -> Result<Self, Error> {
        let problem = if id.is_empty() {
            Some("it is empty")
        } else if id.len() > MAX_SHAPE_ID_LEN {
            Some("it is longer than 64 bytes")
        } else if !id.bytes().all(is_shape_byte) {
            Some("only ASCII letters, digits, '.', '_' and '-' are allowed")
        } else {
            None
        };
        match problem {
            Some(problem) => Err(Error::InvalidShapeId { shape_id: id.escape_debug().to_string(), problem }),
            None => Ok(Self(id.to_owned())),
        }
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ShapeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ShapeId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

fn is_shape_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_names_and_refuses_the_rest() {
        for ok in ["a", "porep-32g.v1_p0", "..", &"x".repeat(64)] {
            assert!(ShapeId::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a/b", "../x", "a b", "é", "a\0", "a\\b", &"x".repeat(65)] {
            assert!(matches!(ShapeId::new(bad), Err(Error::InvalidShapeId { .. })), "{bad:?}");
        }
    }
}
