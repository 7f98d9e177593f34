//! A stock gRPC client over the Unix socket: grpc-core sends the socket's path, percent-encoded, as
//! the `:authority`, which no HTTP/2 server takes as it is. This speaks HTTP/2 by hand, as such a
//! client does, and checks that the call is answered rather than reset.

use std::sync::Arc;
use std::time::Duration;

use cuzk_service::authority::{encode_plain, Decoder};
use cuzk_service::{Listen, Registry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;
use common::{cpu_daemon, temp_dir};

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_with_the_socket_path_as_authority_is_answered() {
    let dir = temp_dir("unix-authority");
    let daemon = cpu_daemon(&dir, Registry::default(), |_| {});
    let socket = dir.join("cuzk.sock");
    let served = cuzk_service::spawn(Arc::clone(&daemon), Listen::Unix(socket.clone())).await.unwrap();
    let mut io = tokio::net::UnixStream::connect(&socket).await.unwrap();
    let authority = socket.display().to_string().trim_start_matches('/').replace('/', "%2F");
    let headers: Vec<(Vec<u8>, Vec<u8>)> = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/cuzk.v1.Prover/GetStatus"),
        (":authority", authority.as_str()),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    .iter()
    .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect();
    let mut block = Vec::new();
    encode_plain(&headers, &mut block);
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    frame(&mut out, 0x4, 0, 0, &[]); // SETTINGS
    frame(&mut out, 0x1, 0x4, 1, &block); // HEADERS, END_HEADERS
    frame(&mut out, 0x0, 0x1, 1, &[0, 0, 0, 0, 0]); // an empty StatusRequest, END_STREAM
    io.write_all(&out).await.unwrap();

    // Read the server's frames until stream 1 ends: reset (the bug) or trailers with grpc-status.
    let mut decoder = Decoder::default();
    let mut seen = Vec::new();
    let outcome = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let mut head = [0u8; 9];
            io.read_exact(&mut head).await.expect("a frame");
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let mut payload = vec![0; len];
            io.read_exact(&mut payload).await.unwrap();
            let stream = u32::from_be_bytes([head[5] & 0x7f, head[6], head[7], head[8]]);
            match (head[3], stream) {
                (0x3, 1) => return Err(format!("stream reset, error code {payload:?}")),
                (0x1, 1) => {
                    let h = decoder.decode(&payload).expect("the server's headers decode");
                    seen.extend(h.iter().map(|(n, v)| {
                        (String::from_utf8_lossy(n).into_owned(), String::from_utf8_lossy(v).into_owned())
                    }));
                    if head[4] & 0x1 != 0 {
                        return Ok(());
                    }
                }
                (0x7, _) => return Err(format!("GOAWAY {payload:?}")),
                _ => {}
            }
        }
    })
    .await
    .expect("the server answers");
    assert_eq!(outcome, Ok(()), "{seen:?}");
    assert!(seen.contains(&(":status".into(), "200".into())), "{seen:?}");
    assert!(seen.contains(&("grpc-status".into(), "0".into())), "{seen:?}");
    // Hung up first: a graceful stop waits for open connections to close.
    drop(io);
    served.stop().await.unwrap();
}
