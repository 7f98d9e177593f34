//! Lets stock gRPC clients call over a Unix socket.
//!
//! grpc-core clients (grpc-python, grpc-go's C-core cousins) send the socket's path, percent-encoded,
//! as the `:authority` of every call (`tmp%2Fcuzk.sock`). That is no valid URI authority, and the
//! HTTP/2 server under tonic resets every such stream, so the client sees INTERNAL. On a Unix socket
//! the authority names nothing, so [`Rewrite`] sits in front of each Unix connection: it follows the
//! client's HTTP/2 frames, decodes each header block (HPACK, RFC 7541), replaces an `:authority`
//! that is not a valid authority by `localhost`, and hands the block on re-encoded as plain literals
//! (which keep no table state, so the server's decoder stays in step). Every other frame passes
//! unchanged. A connection that does not start with the HTTP/2 preface passes untouched.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What replaces an authority that is not one.
pub const STAND_IN: &str = "localhost";

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The dynamic table size the server allows its clients (HTTP/2's default; tonic does not change it).
const TABLE_SIZE: usize = 4096;
/// The largest header block accepted (the server's own limit on a header list is lower).
const MAX_BLOCK: usize = 1 << 20;
/// Frames are written at most this long (the least maximum frame size HTTP/2 allows).
const FRAME: usize = 16384;

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// A header block, or the frames around it, that cannot be right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed HTTP/2 headers from the client: {0}")]
pub struct Malformed(&'static str);

/// The static table (RFC 7541, appendix A).
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Code lengths of the Huffman code (RFC 7541, appendix B), symbols 0 to 255 and EOS (256). The
/// code is canonical: codes of one length are consecutive, in symbol order, after those of shorter
/// lengths, so the lengths are all it takes.
const CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28,
    28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6,
    6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7,
    8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7,
    15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24,
    23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23,
    23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26,
    26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20,
    21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27,
    27, 27, 26, 30,
];

const MAX_CODE: usize = 30;

/// The canonical decoding tables: per length, the first code, and where its symbols start in
/// `symbols` (sorted by length, then value).
struct Huffman {
    first: [u32; MAX_CODE + 1],
    count: [u32; MAX_CODE + 1],
    start: [u32; MAX_CODE + 1],
    symbols: [u16; 257],
}

fn huffman() -> &'static Huffman {
    static TABLE: std::sync::OnceLock<Huffman> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut h = Huffman {
            first: [0; MAX_CODE + 1],
            count: [0; MAX_CODE + 1],
            start: [0; MAX_CODE + 1],
            symbols: [0; 257],
        };
        for &l in &CODE_LENGTHS {
            h.count[l as usize] += 1;
        }
        let (mut code, mut index) = (0u32, 0u32);
        for l in 1..=MAX_CODE {
            code = (code + h.count[l - 1]) << 1;
            h.first[l] = code;
            h.start[l] = index;
            index += h.count[l];
        }
        let mut next = h.start;
        for (symbol, &l) in CODE_LENGTHS.iter().enumerate() {
            h.symbols[next[l as usize] as usize] = symbol as u16;
            next[l as usize] += 1;
        }
        h
    })
}

/// Decodes a Huffman-coded string.
fn huffman_decode(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), Malformed> {
    let h = huffman();
    let (mut code, mut len) = (0u32, 0usize);
    for &byte in bytes {
        for bit in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> bit) & 1);
            len += 1;
            let offset = code.wrapping_sub(h.first[len]);
            if code >= h.first[len] && offset < h.count[len] {
                let symbol = h.symbols[(h.start[len] + offset) as usize];
                if symbol == 256 {
                    return Err(Malformed("a Huffman string holds EOS"));
                }
                out.push(symbol as u8);
                code = 0;
                len = 0;
            } else if len == MAX_CODE {
                return Err(Malformed("an invalid Huffman code"));
            }
        }
    }
    // What is left must be padding: fewer than 8 bits, all ones (a prefix of EOS).
    if len > 7 || code != (1 << len) - 1 {
        return Err(Malformed("bad Huffman padding"));
    }
    Ok(())
}

/// Reads an integer with an `n`-bit prefix (RFC 7541, 5.1) at `*at`.
fn integer(block: &[u8], at: &mut usize, n: u32) -> Result<usize, Malformed> {
    let truncated = Malformed("a truncated integer");
    let mask = (1usize << n) - 1;
    let mut value = usize::from(*block.get(*at).ok_or(truncated.clone())?) & mask;
    *at += 1;
    if value < mask {
        return Ok(value);
    }
    let mut shift = 0;
    loop {
        let b = *block.get(*at).ok_or(truncated.clone())?;
        *at += 1;
        if shift > 21 {
            return Err(Malformed("an integer too large"));
        }
        value += usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// Reads a string literal (RFC 7541, 5.2) at `*at`.
fn string(block: &[u8], at: &mut usize) -> Result<Vec<u8>, Malformed> {
    let coded = block.get(*at).is_some_and(|b| b & 0x80 != 0);
    let len = integer(block, at, 7)?;
    let end = at.checked_add(len).filter(|&e| e <= block.len()).ok_or(Malformed("a truncated string"))?;
    let raw = &block[*at..end];
    *at = end;
    if coded {
        let mut out = Vec::with_capacity(len * 8 / 5);
        huffman_decode(raw, &mut out)?;
        Ok(out)
    } else {
        Ok(raw.to_vec())
    }
}

/// A header: name and value.
pub type Header = (Vec<u8>, Vec<u8>);

/// An HPACK decoder with its dynamic table.
#[derive(Debug)]
pub struct Decoder {
    table: VecDeque<Header>,
    size: usize,
    max: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Self { table: VecDeque::new(), size: 0, max: TABLE_SIZE }
    }
}

fn entry_size(h: &Header) -> usize {
    h.0.len() + h.1.len() + 32
}

impl Decoder {
    fn get(&self, index: usize) -> Result<Header, Malformed> {
        match index {
            0 => Err(Malformed("header index 0")),
            1..=61 => {
                let (n, v) = STATIC[index - 1];
                Ok((n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            }
            i => self.table.get(i - 62).cloned().ok_or(Malformed("a header index past the table")),
        }
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            match self.table.pop_back() {
                Some(e) => self.size -= entry_size(&e),
                None => break,
            }
        }
    }

    fn insert(&mut self, h: Header) {
        let size = entry_size(&h);
        if size > self.max {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max - size);
        self.size += size;
        self.table.push_front(h);
    }

    /// Decodes one whole header block.
    pub fn decode(&mut self, block: &[u8]) -> Result<Vec<Header>, Malformed> {
        let mut at = 0;
        let mut headers = Vec::new();
        while at < block.len() {
            let b = block[at];
            if b & 0x80 != 0 {
                let i = integer(block, &mut at, 7)?;
                headers.push(self.get(i)?);
            } else if b & 0xe0 == 0x20 {
                let size = integer(block, &mut at, 5)?;
                if size > TABLE_SIZE {
                    return Err(Malformed("a dynamic table larger than the server allows"));
                }
                self.max = size;
                self.evict_to(size);
            } else {
                // Literals: with incremental indexing (01), without (0000) or never indexed (0001).
                let (prefix, index) = if b & 0xc0 == 0x40 { (6, true) } else { (4, false) };
                let i = integer(block, &mut at, prefix)?;
                let name = if i == 0 { string(block, &mut at)? } else { self.get(i)?.0 };
                let value = string(block, &mut at)?;
                let h = (name, value);
                if index {
                    self.insert(h.clone());
                }
                headers.push(h);
            }
        }
        Ok(headers)
    }
}

fn put_integer(out: &mut Vec<u8>, first: u8, n: u32, mut value: usize) {
    let mask = (1usize << n) - 1;
    if value < mask {
        out.push(first | value as u8);
        return;
    }
    out.push(first | mask as u8);
    value -= mask;
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Encodes `headers` as literals without indexing, with new names and raw strings: a block any
/// decoder reads without touching its table.
pub fn encode_plain(headers: &[Header], out: &mut Vec<u8>) {
    for (name, value) in headers {
        out.push(0);
        for s in [name, value] {
            put_integer(out, 0, 7, s.len());
            out.extend_from_slice(s);
        }
    }
}

/// Replaces an `:authority` that is not a valid URI authority by [`STAND_IN`]; true if it did.
fn fix_authority(headers: &mut [Header]) -> bool {
    let mut fixed = false;
    for (name, value) in headers.iter_mut() {
        if name == b":authority" && tonic::codegen::http::uri::Authority::try_from(value.as_slice()).is_err()
        {
            *value = STAND_IN.as_bytes().to_vec();
            fixed = true;
        }
    }
    fixed
}

/// A header block waiting for its CONTINUATION frames.
struct Pending {
    stream: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
    block: Vec<u8>,
}

/// Where the client's byte stream is.
enum State {
    /// Checking the preface; holds how much of it has matched.
    Preface(usize),
    /// Between frames, or inside one.
    Frames,
    /// Not HTTP/2 with prior knowledge: everything passes.
    Through,
}

/// The client-to-server half of a connection's HTTP/2, rewritten as the module says.
pub struct Frames {
    state: State,
    buf: Vec<u8>,
    /// Bytes of a passing frame's payload still to copy through.
    passing: usize,
    pending: Option<Pending>,
    decoder: Decoder,
}

impl Default for Frames {
    fn default() -> Self {
        Self {
            state: State::Preface(0),
            buf: Vec::new(),
            passing: 0,
            pending: None,
            decoder: Decoder::default(),
        }
    }
}

impl Frames {
    /// Takes bytes from the client and appends what the server should read to `out`.
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), Malformed> {
        if let State::Preface(matched) = self.state {
            let n = input.len().min(PREFACE.len() - matched);
            if input[..n] != PREFACE[matched..matched + n] {
                self.state = State::Through;
            } else {
                out.extend_from_slice(&input[..n]);
                input = &input[n..];
                self.state =
                    if matched + n == PREFACE.len() { State::Frames } else { State::Preface(matched + n) };
            }
        }
        match self.state {
            State::Through => {
                out.extend_from_slice(input);
                return Ok(());
            }
            State::Preface(_) => return Ok(()),
            State::Frames => {}
        }
        loop {
            if self.passing > 0 {
                let n = self.passing.min(input.len());
                out.extend_from_slice(&input[..n]);
                input = &input[n..];
                self.passing -= n;
                if self.passing > 0 {
                    return Ok(());
                }
            }
            // The next frame's header, which may arrive in pieces.
            let n = 9usize.saturating_sub(self.buf.len()).min(input.len());
            self.buf.extend_from_slice(&input[..n]);
            input = &input[n..];
            if self.buf.len() < 9 {
                return Ok(());
            }
            let len =
                usize::from(self.buf[0]) << 16 | usize::from(self.buf[1]) << 8 | usize::from(self.buf[2]);
            if self.buf[3] != HEADERS && self.buf[3] != CONTINUATION {
                // Any other frame passes as it comes.
                out.extend_from_slice(&self.buf);
                self.buf.clear();
                self.passing = len;
                continue;
            }
            if len > MAX_BLOCK {
                return Err(Malformed("a header frame too long"));
            }
            let n = (9 + len - self.buf.len()).min(input.len());
            self.buf.extend_from_slice(&input[..n]);
            input = &input[n..];
            if self.buf.len() < 9 + len {
                return Ok(());
            }
            let frame = std::mem::take(&mut self.buf);
            self.header_frame(&frame, out)?;
        }
    }

    /// A whole HEADERS or CONTINUATION frame.
    fn header_frame(&mut self, frame: &[u8], out: &mut Vec<u8>) -> Result<(), Malformed> {
        let (kind, flags) = (frame[3], frame[4]);
        let stream = u32::from_be_bytes([frame[5] & 0x7f, frame[6], frame[7], frame[8]]);
        let payload = &frame[9..];
        let fragment = if kind == HEADERS {
            if self.pending.is_some() {
                return Err(Malformed("HEADERS while a header block is open"));
            }
            let mut at = 0;
            let pad = if flags & PADDED != 0 {
                at = 1;
                usize::from(*payload.first().ok_or(Malformed("a HEADERS frame too short"))?)
            } else {
                0
            };
            let priority = if flags & PRIORITY != 0 {
                let p: [u8; 5] = payload
                    .get(at..at + 5)
                    .and_then(|p| p.try_into().ok())
                    .ok_or(Malformed("a HEADERS frame too short"))?;
                at += 5;
                Some(p)
            } else {
                None
            };
            let end = payload.len().checked_sub(pad).filter(|&e| e >= at).ok_or(Malformed("bad padding"))?;
            self.pending =
                Some(Pending { stream, end_stream: flags & END_STREAM != 0, priority, block: Vec::new() });
            &payload[at..end]
        } else {
            match &self.pending {
                Some(p) if p.stream == stream => payload,
                _ => return Err(Malformed("CONTINUATION without its HEADERS")),
            }
        };
        let Some(pending) = self.pending.as_mut() else { return Err(Malformed("no open header block")) };
        if pending.block.len() + fragment.len() > MAX_BLOCK {
            return Err(Malformed("a header block too long"));
        }
        pending.block.extend_from_slice(fragment);
        if flags & END_HEADERS == 0 {
            return Ok(());
        }
        let Some(p) = self.pending.take() else { return Err(Malformed("no open header block")) };
        let mut headers = self.decoder.decode(&p.block)?;
        fix_authority(&mut headers);
        let mut block = Vec::with_capacity(p.block.len() * 2);
        encode_plain(&headers, &mut block);
        write_headers(p.stream, p.end_stream, p.priority, &block, out);
        Ok(())
    }
}

fn frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// Writes a header block as a HEADERS frame and as many CONTINUATION frames as it needs.
fn write_headers(stream: u32, end_stream: bool, priority: Option<[u8; 5]>, block: &[u8], out: &mut Vec<u8>) {
    let room = FRAME - if priority.is_some() { 5 } else { 0 };
    let (first, mut rest) = block.split_at(block.len().min(room));
    let mut flags = if end_stream { END_STREAM } else { 0 } | if rest.is_empty() { END_HEADERS } else { 0 };
    if priority.is_some() {
        flags |= PRIORITY;
    }
    frame_header(out, first.len() + priority.map_or(0, |_| 5), HEADERS, flags, stream);
    if let Some(p) = priority {
        out.extend_from_slice(&p);
    }
    out.extend_from_slice(first);
    while !rest.is_empty() {
        let (chunk, more) = rest.split_at(rest.len().min(FRAME));
        frame_header(out, chunk.len(), CONTINUATION, if more.is_empty() { END_HEADERS } else { 0 }, stream);
        out.extend_from_slice(chunk);
        rest = more;
    }
}

/// A connection whose client-to-server bytes pass through [`Frames`].
pub struct Rewrite<S> {
    io: S,
    frames: Frames,
    read: Vec<u8>,
    out: Vec<u8>,
    sent: usize,
}

impl<S> Rewrite<S> {
    /// Puts the rewriting in front of `io`.
    pub fn new(io: S) -> Self {
        Self { io, frames: Frames::default(), read: vec![0; FRAME], out: Vec::new(), sent: 0 }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewrite<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.sent < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.sent);
                buf.put_slice(&this.out[this.sent..this.sent + n]);
                this.sent += n;
                return Poll::Ready(Ok(()));
            }
            let mut raw = ReadBuf::new(&mut this.read);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut raw))?;
            if raw.filled().is_empty() {
                return Poll::Ready(Ok(()));
            }
            this.out.clear();
            this.sent = 0;
            let filled = raw.filled().to_vec();
            this.frames
                .feed(&filled, &mut this.out)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewrite<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<S: tonic::transport::server::Connected> tonic::transport::server::Connected for Rewrite<S> {
    type ConnectInfo = S::ConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn pairs(headers: &[Header]) -> Vec<(String, String)> {
        headers
            .iter()
            .map(|(n, v)| (String::from_utf8(n.clone()).unwrap(), String::from_utf8(v.clone()).unwrap()))
            .collect()
    }

    fn h(n: &str, v: &str) -> (String, String) {
        (n.into(), v.into())
    }

    #[test]
    fn the_rfc_request_examples_decode_with_one_dynamic_table() {
        // RFC 7541, C.4: three requests with Huffman-coded strings, sharing the dynamic table.
        let mut d = Decoder::default();
        let first = d.decode(&hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff")).unwrap();
        let base = vec![
            h(":method", "GET"),
            h(":scheme", "http"),
            h(":path", "/"),
            h(":authority", "www.example.com"),
        ];
        assert_eq!(pairs(&first), base);
        assert_eq!(d.size, 57);
        let second = d.decode(&hex("8286 84be 5886 a8eb 1064 9cbf")).unwrap();
        let mut expected = base.clone();
        expected.push(h("cache-control", "no-cache"));
        assert_eq!(pairs(&second), expected);
        let third = d.decode(&hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf")).unwrap();
        assert_eq!(
            pairs(&third),
            vec![
                h(":method", "GET"),
                h(":scheme", "https"),
                h(":path", "/index.html"),
                h(":authority", "www.example.com"),
                h("custom-key", "custom-value"),
            ]
        );
        assert_eq!(d.size, 164);
    }

    #[test]
    fn bad_blocks_are_errors_not_panics() {
        for block in [
            &[0x3f][..], // a size update cut short
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            &[0x80],                   // index 0
            &[0xc0 | 0x3f, 0x10],      // past the table
            &[0x40, 0x85, 0xff],       // a string cut short
            &[0x00, 0x81, 0xff, 0x00], // bad Huffman padding
            &[0x3f, 0xe2, 0x1f],       // a table of 4097 bytes, one more than allowed
        ] {
            assert!(Decoder::default().decode(block).is_err(), "{block:02x?}");
        }
    }

    #[test]
    fn plain_blocks_round_trip() {
        let headers = vec![
            (b":authority".to_vec(), b"tmp%2Fcuzk.sock".to_vec()),
            (b"x-long".to_vec(), vec![b'a'; 300]),
        ];
        let mut block = Vec::new();
        encode_plain(&headers, &mut block);
        let mut d = Decoder::default();
        assert_eq!(d.decode(&block).unwrap(), headers);
        assert!(d.table.is_empty(), "plain literals leave the table alone");
    }

    /// Splits a client's byte stream into its frames: (type, flags, stream, payload).
    fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let len = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
            let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
            out.push((bytes[3], bytes[4], stream, bytes[9..9 + len].to_vec()));
            bytes = &bytes[9 + len..];
        }
        out
    }

    #[test]
    fn a_percent_encoded_authority_is_replaced_and_everything_else_kept() {
        let mut encoded = Vec::new();
        // The authority with incremental indexing, as grpc-core sends it, then a reference to it.
        encoded.push(0x41);
        put_integer(&mut encoded, 0, 7, 15);
        encoded.extend_from_slice(b"tmp%2Fcuzk.sock");
        encoded.extend_from_slice(&[0x83, 0x86]); // :method POST, :scheme http
        let mut client = PREFACE.to_vec();
        frame_header(&mut client, 0, 0x4, 0, 0); // SETTINGS
                                                 // HEADERS, padded and with a priority, whose block continues in a CONTINUATION frame.
        let (a, b) = encoded.split_at(5);
        frame_header(&mut client, 1 + 5 + a.len() + 2, HEADERS, PADDED | PRIORITY, 1);
        client.push(2);
        client.extend_from_slice(&[0, 0, 0, 0, 15]);
        client.extend_from_slice(a);
        client.extend_from_slice(&[0, 0]);
        frame_header(&mut client, b.len(), CONTINUATION, END_HEADERS, 1);
        client.extend_from_slice(b);
        frame_header(&mut client, 3, 0x0, END_STREAM, 1); // DATA
        client.extend_from_slice(b"abc");
        // The second request refers to the authority by its table index (62).
        frame_header(&mut client, 3, HEADERS, END_HEADERS | END_STREAM, 3);
        client.extend_from_slice(&[0xbe, 0x82, 0x86]);
        // Byte by byte, as a slow socket would deliver it.
        let mut f = Frames::default();
        let mut server = Vec::new();
        for byte in &client {
            f.feed(std::slice::from_ref(byte), &mut server).unwrap();
        }
        assert!(server.starts_with(PREFACE));
        let got = frames(&server[PREFACE.len()..]);
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!((got[0].0, got[0].3.len()), (0x4, 0));
        let (kind, flags, stream, payload) = &got[1];
        assert_eq!((*kind, *flags, *stream), (HEADERS, PRIORITY | END_HEADERS, 1));
        assert_eq!(&payload[..5], &[0, 0, 0, 0, 15]);
        let mut d = Decoder::default();
        let first = pairs(&d.decode(&payload[5..]).unwrap());
        assert_eq!(first, vec![h(":authority", STAND_IN), h(":method", "POST"), h(":scheme", "http")]);
        assert_eq!(got[2], (0x0, END_STREAM, 1, b"abc".to_vec()));
        let second = pairs(&d.decode(&got[3].3).unwrap());
        assert_eq!(second, vec![h(":authority", STAND_IN), h(":method", "GET"), h(":scheme", "http")]);
        assert_eq!(got[3].1, END_HEADERS | END_STREAM);
    }

    #[test]
    fn a_valid_authority_and_a_stream_that_is_not_http2_are_left_alone() {
        let mut block = Vec::new();
        encode_plain(&[(b":authority".to_vec(), b"localhost:9820".to_vec())], &mut block);
        let mut client = PREFACE.to_vec();
        frame_header(&mut client, block.len(), HEADERS, END_HEADERS, 1);
        client.extend_from_slice(&block);
        let mut server = Vec::new();
        Frames::default().feed(&client, &mut server).unwrap();
        assert_eq!(server, client);
        let http1 = b"GET /metrics HTTP/1.1\r\n\r\n";
        let mut server = Vec::new();
        Frames::default().feed(http1, &mut server).unwrap();
        assert_eq!(server, http1);
    }

    #[test]
    fn long_blocks_are_split_into_frames_the_server_accepts() {
        let headers = vec![(b":authority".to_vec(), b"%".to_vec()), (b"x-big".to_vec(), vec![b'z'; 40_000])];
        let mut block = Vec::new();
        encode_plain(&headers, &mut block);
        let mut client = PREFACE.to_vec();
        let (a, rest) = block.split_at(FRAME);
        frame_header(&mut client, a.len(), HEADERS, 0, 5);
        client.extend_from_slice(a);
        for (i, chunk) in rest.chunks(FRAME).enumerate() {
            let last = (i + 1) * FRAME >= rest.len();
            frame_header(&mut client, chunk.len(), CONTINUATION, if last { END_HEADERS } else { 0 }, 5);
            client.extend_from_slice(chunk);
        }
        let mut server = Vec::new();
        Frames::default().feed(&client, &mut server).unwrap();
        let got = frames(&server[PREFACE.len()..]);
        assert!(got.iter().all(|f| f.3.len() <= FRAME && f.2 == 5));
        assert_eq!(got[0].0, HEADERS);
        assert!(got[1..].iter().all(|f| f.0 == CONTINUATION));
        assert_eq!(got.iter().filter(|f| f.1 & END_HEADERS != 0).count(), 1);
        let joined: Vec<u8> = got.iter().flat_map(|f| f.3.clone()).collect();
        let decoded = Decoder::default().decode(&joined).unwrap();
        assert_eq!(decoded[0], (b":authority".to_vec(), STAND_IN.as_bytes().to_vec()));
        assert_eq!(decoded[1], headers[1]);
    }
}
