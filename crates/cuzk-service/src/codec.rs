//! The API's gRPC codec: prost's, except for who is to blame when a message does not decode.
//!
//! prost's decoder calls every undecodable message (bad wire data, a string field that is not UTF-8)
//! an INTERNAL error. A request that does not decode is the client's mistake, so the daemon answers
//! INVALID_ARGUMENT; a reply that does not decode (in this crate's client) stays INTERNAL.

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{BufferSettings, DecodeBuf, Decoder};
use tonic::Status;
use tonic_prost::{ProstDecoder, ProstEncoder};

use crate::proto as pb;

/// Which side of a call a message travels on.
pub trait Direction {
    /// The client sends it.
    const REQUEST: bool;
}

macro_rules! direction {
    ($request:literal: $($message:ident),* $(,)?) => {
        $(impl Direction for pb::$message {
            const REQUEST: bool = $request;
        })*
    };
}

direction!(true: SubmitRequest, AwaitRequest, CancelRequest, StatusRequest, MetricsRequest, LoadKeyRequest, EvictKeyRequest);
direction!(false: SubmitReply, ProofReply, CancelReply, StatusReply, MetricsReply, LoadKeyReply, EvictKeyReply);

/// The codec the generated server and client use (`codec_path` in `build.rs`).
#[derive(Debug)]
pub struct Codec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for Codec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<T, U> tonic::codec::Codec for Codec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Direction + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = BlameDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        BlameDecoder(tonic_prost::ProstCodec::<T, U>::raw_decoder(BufferSettings::default()))
    }
}

/// prost's decoder, with a request that does not decode blamed on its sender.
#[derive(Debug)]
pub struct BlameDecoder<U>(ProstDecoder<U>);

impl<U: Message + Default + Direction> Decoder for BlameDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|s| {
            if U::REQUEST {
                Status::invalid_argument(format!("the request is not a valid message: {}", s.message()))
            } else {
                s
            }
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
