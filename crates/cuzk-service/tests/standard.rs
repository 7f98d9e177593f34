//! What stock tools see: the gRPC health service (SERVING while the daemon serves, NOT_SERVING while
//! it drains), server reflection listing `cuzk.v1`, and `/metrics` in a format a Prometheus text
//! parser reads, over HTTP that answers like a web server should.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use cuzk_service::proto::{self as pb};
use cuzk_service::{Daemon, Listen, Registry};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

mod common;
use common::{cpu_daemon, temp_dir, TempDir};

fn daemon(dir: &TempDir) -> Arc<Daemon> {
    cpu_daemon(dir, Registry::default(), |c| c.partition_workers = 1)
}

async fn status(health: &mut HealthClient<tonic::transport::Channel>, service: &str) -> i32 {
    let req = HealthCheckRequest { service: service.into() };
    health.check(req).await.expect("health check").into_inner().status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_is_serving_then_not_serving_while_the_daemon_drains() {
    let dir = temp_dir("health");
    let served = cuzk_service::spawn(daemon(&dir), Listen::Tcp("127.0.0.1:0".into())).await.unwrap();
    let channel = cuzk_service::client::channel(&served.addr).await.unwrap();
    let mut health = HealthClient::new(channel.clone());
    let mut c = cuzk_service::client::connect(&served.addr).await.unwrap();
    for service in ["", "cuzk.v1.Prover"] {
        assert_eq!(status(&mut health, service).await, ServingStatus::Serving as i32, "{service:?}");
    }
    // A proof left uncollected keeps a "finish" drain going; meanwhile health says NOT_SERVING.
    let key = pb::LoadKeyRequest {
        key_id: "k".into(),
        circuit_kind: "synthetic".into(),
        params: br#"{"log_rows": 6}"#.to_vec(),
    };
    c.load_key(key).await.unwrap();
    let req = pb::SubmitRequest {
        key_id: "k".into(),
        partitions: vec![br#"{"seed": 1}"#.to_vec()],
        ..pb::SubmitRequest::default()
    };
    let job = c.submit_proof(req).await.unwrap().into_inner().job_id;
    let stopping = tokio::spawn(served.stop());
    let mut drained = false;
    for _ in 0..500 {
        if status(&mut health, "cuzk.v1.Prover").await == ServingStatus::NotServing as i32 {
            drained = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(drained, "the health service never said NOT_SERVING while draining");
    assert_eq!(status(&mut health, "").await, ServingStatus::NotServing as i32);
    // The proof can still be collected; then the drain ends.
    let proof = c.await_proof(pb::AwaitRequest { job_id: job, timeout_ms: 0 }).await.unwrap();
    assert_eq!(proof.into_inner().proofs.len(), 1);
    stopping.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_lists_the_api() {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    let dir = temp_dir("reflection");
    let served = cuzk_service::spawn(daemon(&dir), Listen::Tcp("127.0.0.1:0".into())).await.unwrap();
    let channel = cuzk_service::client::channel(&served.addr).await.unwrap();
    let mut reflection = ServerReflectionClient::new(channel);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut replies =
        reflection.server_reflection_info(tokio_stream::iter([req])).await.unwrap().into_inner();
    let reply = replies.message().await.unwrap().expect("a reply");
    let Some(MessageResponse::ListServicesResponse(list)) = reply.message_response else {
        panic!("not a list of services: {reply:?}")
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for name in ["cuzk.v1.Prover", "grpc.health.v1.Health"] {
        assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
    }
    // And the API's messages can be described, for grpcurl to build requests.
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol("cuzk.v1.SubmitRequest".into())),
    };
    let mut replies =
        reflection.server_reflection_info(tokio_stream::iter([req])).await.unwrap().into_inner();
    let reply = replies.message().await.unwrap().expect("a reply");
    assert!(matches!(reply.message_response, Some(MessageResponse::FileDescriptorResponse(_))), "{reply:?}");
    served.stop().await.unwrap();
}

/// The whole reply to a raw HTTP/1.1 request.
fn http(addr: &str, request: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_and_http_answers_by_method_and_path() {
    let dir = temp_dir("metrics");
    let d = daemon(&dir);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(cuzk_service::server::serve_metrics(Arc::clone(&d), listener, async move {
        let _ = stopped.await;
    }));
    d.load_key("k", "synthetic", br#"{"log_rows": 6}"#).unwrap();
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let (a, g) = (addr.clone(), get("/metrics"));
    let reply = tokio::task::spawn_blocking(move || http(&a, &g)).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
    let body = reply.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).expect("parses");
    let value = |name: &str| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name)
            .map(|s| s.value.clone())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert!(matches!(value("cuzk_keys_resident"), prometheus_parse::Value::Gauge(v) if v == 1.0));
    // OpenMetrics names a counter's family without its `_total`, so a Prometheus text parser reads
    // the sample itself untyped; the value is what matters.
    assert!(
        matches!(value("cuzk_proofs_submitted_total"), prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) if v == 0.0),
        "{:?}",
        value("cuzk_proofs_submitted_total")
    );
    assert!(scrape
        .samples
        .iter()
        .any(|s| s.metric == "cuzk_key_host_bytes" && s.labels.get("key") == Some("k")));
    assert!(scrape.docs.contains_key("cuzk_proof_seconds"), "{:?}", scrape.docs.keys());
    for (request, expected) in [
        (get("/metrics?format=text"), "HTTP/1.1 200"),
        ("HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_owned(), "HTTP/1.1 200"),
        (
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned(),
            "HTTP/1.1 405",
        ),
        (get("/secrets"), "HTTP/1.1 404"),
        // A head ending in a bare "\n\n" still gets an answer.
        ("GET /metrics HTTP/1.1\nHost: x\nConnection: close\n\n".to_owned(), "HTTP/1.1 200"),
    ] {
        let a = addr.clone();
        let reply = tokio::task::spawn_blocking(move || http(&a, &request)).await.unwrap();
        assert!(reply.starts_with(expected), "{expected}: {reply}");
    }
    let _ = stop.send(());
    server.await.unwrap();
}
