//! The Open Inference Protocol over gRPC (`inference.GRPCInferenceService`, proto/grpc_predict_v2.proto) on its
//! own port (`jig up --grpc-listen`): the same models, readiness, metadata and errors as over HTTP, and Triton's
//! model configuration, statistics, repository index and model control, for Triton's and KServe's gRPC clients
//! (and perf_analyzer's gRPC mode). Tensors come as `raw_input_contents` (each input's
//! little-endian bytes, as the clients send them) or typed `contents`, and go back as `raw_output_contents`.
//!
//! Metadata carries what HTTP headers do: `authorization: Bearer TOKEN` (the gateway's `invoke_token`), the
//! deadline (gRPC's own `grpc-timeout`, or `jig-timeout-ms`) and `jig-class`. A refusal's kind sets its status
//! code (404 NOT_FOUND, 400 INVALID_ARGUMENT, 401 UNAUTHENTICATED, 429 RESOURCE_EXHAUSTED, 503 UNAVAILABLE,
//! 504 DEADLINE_EXCEEDED, 500 INTERNAL) and its message is the HTTP error's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use jig_api::ErrorKind;
use jig_api::oip::{DecodeError, GivenData, GivenInput, take_inputs};
use jig_model_host::{DType, Tensor};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use super::{Refusal, declared};
use crate::Gateway;

#[allow(missing_docs, clippy::all)]
mod proto {
    tonic::include_proto!("inference");
}

use proto::grpc_inference_service_server::{GrpcInferenceService, GrpcInferenceServiceServer};
use proto::model_infer_request::InferInputTensor;
use proto::model_infer_response::InferOutputTensor;
use proto::model_metadata_response::TensorMetadata;
use proto::*;

impl Gateway {
    /// Serve the Open Inference Protocol over gRPC on `listener` until `shutdown`.
    pub async fn serve_grpc(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> anyhow::Result<()> {
        let limit = usize::try_from(self.config.max_request_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        let service = GrpcInferenceServiceServer::new(Grpc(self.clone()))
            .max_decoding_message_size(limit)
            .max_encoding_message_size(usize::MAX);
        // Each connection within the gateway's caps (HTTP's and gRPC's together), holding its place while open,
        // and closed unless its client's preface comes within the header timeout.
        let preface_within = Duration::from_secs_f64(self.config.header_timeout_s.clamp(0.1, 3600.0));
        let incoming = futures_util::stream::unfold((self.clone(), listener), move |(gateway, listener)| async move {
            let (stream, _, hold) = gateway.connections.accept(&listener).await;
            let preface_by = Some(Box::pin(tokio::time::sleep(preface_within)));
            Some((Ok::<_, std::io::Error>(Held { stream, preface_by, read: 0, _hold: hold }), (gateway, listener)))
        });
        tonic::transport::Server::builder()
            // A connection that stops answering pings is closed; a call never runs past the gateway's longest
            // deadline.
            .http2_keepalive_interval(Some(Duration::from_secs(30)))
            .http2_keepalive_timeout(Some(Duration::from_secs(10)))
            // One client's connection holds at most this many calls at once (HTTP/2 streams).
            .max_concurrent_streams(Some(128))
            .timeout(self.max_timeout() + Duration::from_secs(1))
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await?;
        Ok(())
    }
}

/// A connection the gRPC server serves, with its place in the gateway's connection caps.
struct Held {
    stream: tokio::net::TcpStream,
    /// Until the client's HTTP/2 preface has come: when the connection is closed unless it has, so that a client
    /// that connects and sends nothing does not keep its place.
    preface_by: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    /// Bytes read so far, counted until the preface.
    read: usize,
    _hold: crate::connections::Hold,
}

/// The client's preface of an HTTP/2 connection: `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`.
const PREFACE_BYTES: usize = 24;

impl tonic::transport::server::Connected for Held {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl tokio::io::AsyncRead for Held {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::future::Future;
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.stream).poll_read(cx, buf);
        let this = &mut *self;
        if let Some(deadline) = this.preface_by.as_mut() {
            this.read += buf.filled().len() - before;
            if this.read >= PREFACE_BYTES {
                this.preface_by = None;
            } else if polled.is_pending() && deadline.as_mut().poll(cx).is_ready() {
                let late =
                    std::io::Error::new(std::io::ErrorKind::TimedOut, "no HTTP/2 preface within the header timeout");
                return std::task::Poll::Ready(Err(late));
            }
        }
        polled
    }
}

impl tokio::io::AsyncWrite for Held {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The service, over the gateway.
struct Grpc(Arc<Gateway>);

impl From<Refusal> for Status {
    fn from(refusal: Refusal) -> Status {
        // By the HTTP status the kind sets, so that both transports answer alike.
        let code = match refusal.kind.status() {
            400 | 413 => tonic::Code::InvalidArgument,
            401 => tonic::Code::Unauthenticated,
            404 => tonic::Code::NotFound,
            408 | 504 => tonic::Code::DeadlineExceeded,
            429 => tonic::Code::ResourceExhausted,
            503 => tonic::Code::Unavailable,
            _ => tonic::Code::Internal,
        };
        Status::new(code, refusal.message)
    }
}

impl Grpc {
    /// The 401 of a call without the gateway's `invoke_token`, when it has one.
    fn authorize(&self, metadata: &MetadataMap) -> Result<(), Status> {
        let given = metadata.get("authorization").and_then(|v| v.to_str().ok());
        match crate::http::unauthorized(given, self.0.config.invoke_token.as_deref()) {
            None => Ok(()),
            Some(why) => Err(Status::unauthenticated(why)),
        }
    }

    /// The 401 of a model control call without the gateway's control `token`, when it has one.
    fn control(&self, metadata: &MetadataMap) -> Result<(), Status> {
        let given = metadata.get("authorization").and_then(|v| v.to_str().ok());
        match crate::http::unauthorized(given, self.0.config.token.as_deref()) {
            None => Ok(()),
            Some(why) => Err(Status::unauthenticated(why)),
        }
    }

    async fn infer(&self, metadata: &MetadataMap, request: ModelInferRequest) -> Result<ModelInferResponse, Refusal> {
        let gateway = &self.0;
        let arrived = Instant::now();
        let name = request.model_name.clone();
        let model = gateway.v2_model(&name)?;
        let _in_flight = gateway.v2_started(&model);
        let answer = self.infer_model(&model, &name, arrived, metadata, request).await;
        let code = answer.as_ref().map_or_else(|r| r.kind.status(), |_| 200);
        gateway.v2_counted(&model, code, arrived.elapsed());
        answer
    }

    async fn infer_model(
        &self,
        model: &super::Model,
        name: &str,
        arrived: Instant,
        metadata: &MetadataMap,
        request: ModelInferRequest,
    ) -> Result<ModelInferResponse, Refusal> {
        let gateway = &self.0;
        let timeout = deadline_of(metadata, gateway.max_timeout())?;
        let class = metadata.get(jig_api::CLASS_HEADER).and_then(|v| v.to_str().ok()).map(str::trim);
        let deadline = model.app().deadline(arrived, timeout, class);
        let signature = gateway.v2_signature(model, name)?;
        let inputs = inputs(name, &declared(&signature.inputs), &request)
            .map_err(|e| Refusal::new(ErrorKind::InvalidRequest, e.to_string()))?;
        let outputs = gateway.v2_execute(model, name, inputs, deadline, class).await?;
        let mut answer = ModelInferResponse {
            model_name: name.to_string(),
            model_version: jig_api::oip::VERSION.to_string(),
            id: request.id.clone(),
            ..Default::default()
        };
        let wanted: Vec<&str> = match request.outputs.is_empty() {
            true => signature.outputs.iter().map(|(name, _)| name.as_str()).collect(),
            false => request.outputs.iter().map(|o| o.name.as_str()).collect(),
        };
        for output in wanted {
            let Some(index) = signature.outputs.iter().position(|(name, _)| name == output) else {
                let has: Vec<&str> = signature.outputs.iter().map(|(name, _)| name.as_str()).collect();
                let message = format!("model `{name}` has no output `{output}` (it has: {})", has.join(", "));
                return Err(Refusal::new(ErrorKind::InvalidRequest, message));
            };
            let tensor = &outputs[index];
            answer.outputs.push(InferOutputTensor {
                name: output.to_string(),
                datatype: tensor.dtype().oip_name().to_string(),
                shape: tensor.shape().iter().map(|&d| d as i64).collect(),
                ..Default::default()
            });
            answer.raw_output_contents.push(tensor.bytes().clone());
        }
        Ok(answer)
    }
}

/// The call's deadline: gRPC's `grpc-timeout`, else `jig-timeout-ms`, cut to `max`; `None` for the app's SLO.
fn deadline_of(metadata: &MetadataMap, max: Duration) -> Result<Option<Duration>, Refusal> {
    if let Some(value) = metadata.get("grpc-timeout").and_then(|v| v.to_str().ok()) {
        // An integer and a unit: Hours, Minutes, Seconds, milliseconds, microseconds, nanoseconds.
        let (digits, unit) = value.split_at(value.len().saturating_sub(1));
        let n: u64 = digits.parse().map_err(|_| Refusal::new(ErrorKind::InvalidRequest, "a malformed grpc-timeout"))?;
        let timeout = match unit {
            "H" => Duration::from_secs(n.saturating_mul(3600)),
            "M" => Duration::from_secs(n.saturating_mul(60)),
            "S" => Duration::from_secs(n),
            "m" => Duration::from_millis(n),
            "u" => Duration::from_micros(n),
            "n" => Duration::from_nanos(n),
            _ => return Err(Refusal::new(ErrorKind::InvalidRequest, "a malformed grpc-timeout")),
        };
        return Ok(Some(timeout.min(max)));
    }
    match metadata.get(jig_api::TIMEOUT_HEADER).map(|v| v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok())) {
        None => Ok(None),
        Some(Some(ms)) if ms > 0 => Ok(Some(Duration::from_millis(ms).min(max))),
        Some(_) => Err(Refusal::new(
            ErrorKind::InvalidRequest,
            format!("`{}` must be a positive number of milliseconds", jig_api::TIMEOUT_HEADER),
        )),
    }
}

/// The request's inputs as tensors, in the order of `specs`: raw contents are taken as they are (no copy),
/// typed contents as little-endian bytes.
fn inputs(
    model: &str,
    specs: &[jig_api::oip::Declared<'_>],
    request: &ModelInferRequest,
) -> Result<Vec<Tensor>, String> {
    let raw = &request.raw_input_contents;
    if !raw.is_empty() && raw.len() != request.inputs.len() {
        return Err(format!(
            "`raw_input_contents` has {} entries for {} inputs: give each input's bytes, in order",
            raw.len(),
            request.inputs.len()
        ));
    }
    let mut shapes = Vec::with_capacity(request.inputs.len());
    for input in &request.inputs {
        let shape: Result<Vec<u64>, _> = input.shape.iter().map(|&d| u64::try_from(d)).collect();
        shapes.push(
            shape.map_err(|_| format!("input `{}`: shape {:?} has a negative dimension", input.name, input.shape))?,
        );
    }
    let mut given = Vec::with_capacity(request.inputs.len());
    for (index, (input, shape)) in request.inputs.iter().zip(&shapes).enumerate() {
        let data = match (raw.get(index), &input.contents) {
            (Some(bytes), _) => GivenData::Raw(bytes.clone()),
            (None, Some(contents)) => GivenData::Raw(typed(input, contents)?),
            (None, None) => GivenData::Missing,
        };
        given.push(GivenInput { name: &input.name, datatype: &input.datatype, shape, data });
    }
    take_inputs(model, specs, given).map_err(|e: DecodeError| e.to_string())
}

/// Typed `contents` as the little-endian bytes of the input's datatype.
fn typed(input: &InferInputTensor, contents: &InferTensorContents) -> Result<Bytes, String> {
    let Some(dtype) = DType::from_oip_name(&input.datatype) else {
        return Err(format!("input `{}`: datatype {} is not served", input.name, input.datatype));
    };
    let out_of_range =
        |value: &dyn std::fmt::Display| format!("input `{}`: {value} is not a {} element", input.name, input.datatype);
    let mut out = BytesMut::new();
    let ints = |out: &mut BytesMut, lo: i64, hi: i64, put: fn(&mut BytesMut, i64)| -> Result<(), String> {
        for &v in &contents.int_contents {
            let v = i64::from(v);
            if !(lo..=hi).contains(&v) {
                return Err(out_of_range(&v));
            }
            put(out, v);
        }
        Ok(())
    };
    let uints = |out: &mut BytesMut, hi: u64, put: fn(&mut BytesMut, u64)| -> Result<(), String> {
        for &v in &contents.uint_contents {
            if u64::from(v) > hi {
                return Err(out_of_range(&v));
            }
            put(out, v.into());
        }
        Ok(())
    };
    match dtype {
        DType::F32 => contents.fp32_contents.iter().for_each(|v| out.put_f32_le(*v)),
        DType::F64 => contents.fp64_contents.iter().for_each(|v| out.put_f64_le(*v)),
        DType::I64 => contents.int64_contents.iter().for_each(|v| out.put_i64_le(*v)),
        DType::Bool => contents.bool_contents.iter().for_each(|v| out.put_u8(u8::from(*v))),
        DType::I32 => ints(&mut out, i32::MIN.into(), i32::MAX.into(), |o, v| o.put_i32_le(v as i32))?,
        DType::I16 => ints(&mut out, i16::MIN.into(), i16::MAX.into(), |o, v| o.put_i16_le(v as i16))?,
        DType::I8 => ints(&mut out, i8::MIN.into(), i8::MAX.into(), |o, v| o.put_i8(v as i8))?,
        DType::U16 => uints(&mut out, u16::MAX.into(), |o, v| o.put_u16_le(v as u16))?,
        DType::U8 => uints(&mut out, u8::MAX.into(), |o, v| o.put_u8(v as u8))?,
        DType::F16 => return Err(format!("input `{}`: FP16 travels in `raw_input_contents` only", input.name)),
    }
    Ok(out.freeze())
}

#[tonic::async_trait]
impl GrpcInferenceService for Grpc {
    async fn server_live(&self, _: Request<ServerLiveRequest>) -> Result<Response<ServerLiveResponse>, Status> {
        Ok(Response::new(ServerLiveResponse { live: true }))
    }

    async fn server_ready(&self, _: Request<ServerReadyRequest>) -> Result<Response<ServerReadyResponse>, Status> {
        Ok(Response::new(ServerReadyResponse { ready: self.0.unready().is_empty() }))
    }

    async fn model_ready(&self, request: Request<ModelReadyRequest>) -> Result<Response<ModelReadyResponse>, Status> {
        self.authorize(request.metadata())?;
        match self.0.v2_ready(&request.get_ref().name) {
            Ok(()) => Ok(Response::new(ModelReadyResponse { ready: true })),
            Err(refusal) if refusal.kind == ErrorKind::NotFound => Err(refusal.into()),
            Err(_) => Ok(Response::new(ModelReadyResponse { ready: false })),
        }
    }

    async fn server_metadata(
        &self,
        _: Request<ServerMetadataRequest>,
    ) -> Result<Response<ServerMetadataResponse>, Status> {
        let metadata = super::http::server_metadata();
        Ok(Response::new(ServerMetadataResponse {
            name: metadata.name,
            version: metadata.version,
            extensions: metadata.extensions,
        }))
    }

    async fn model_metadata(
        &self,
        request: Request<ModelMetadataRequest>,
    ) -> Result<Response<ModelMetadataResponse>, Status> {
        self.authorize(request.metadata())?;
        let metadata = self.0.v2_metadata(&request.get_ref().name)?;
        let tensors = |list: Vec<jig_api::oip::TensorMetadata>| {
            list.into_iter().map(|t| TensorMetadata { name: t.name, datatype: t.datatype, shape: t.shape }).collect()
        };
        Ok(Response::new(ModelMetadataResponse {
            name: metadata.name,
            versions: metadata.versions,
            platform: metadata.platform,
            inputs: tensors(metadata.inputs),
            outputs: tensors(metadata.outputs),
        }))
    }

    async fn model_infer(&self, request: Request<ModelInferRequest>) -> Result<Response<ModelInferResponse>, Status> {
        self.authorize(request.metadata())?;
        let (metadata, _, request) = request.into_parts();
        Ok(Response::new(self.infer(&metadata, request).await?))
    }

    async fn model_config(
        &self,
        request: Request<ModelConfigRequest>,
    ) -> Result<Response<ModelConfigResponse>, Status> {
        self.authorize(request.metadata())?;
        let config = self.0.v2_config(&request.get_ref().name)?;
        let data_type = |name: &str| DataType::from_str_name(name).unwrap_or(DataType::TypeInvalid) as i32;
        let config = ModelConfig {
            name: config.name,
            platform: config.platform,
            backend: config.backend,
            max_batch_size: i32::try_from(config.max_batch_size).unwrap_or(i32::MAX),
            input: config
                .input
                .into_iter()
                .map(|t| ModelInput { data_type: data_type(&t.data_type), name: t.name, dims: t.dims })
                .collect(),
            output: config
                .output
                .into_iter()
                .map(|t| ModelOutput { data_type: data_type(&t.data_type), name: t.name, dims: t.dims })
                .collect(),
            instance_group: config
                .instance_group
                .into_iter()
                .map(|g| ModelInstanceGroup {
                    kind: model_instance_group::Kind::from_str_name(&g.kind).unwrap_or_default() as i32,
                    name: g.name,
                    count: i32::try_from(g.count).unwrap_or(i32::MAX),
                })
                .collect(),
            dynamic_batching: config
                .dynamic_batching
                .map(|b| ModelDynamicBatching { max_queue_delay_microseconds: b.max_queue_delay_microseconds }),
        };
        Ok(Response::new(ModelConfigResponse { config: Some(config) }))
    }

    async fn model_statistics(
        &self,
        request: Request<ModelStatisticsRequest>,
    ) -> Result<Response<ModelStatisticsResponse>, Status> {
        self.authorize(request.metadata())?;
        let name = Some(request.get_ref().name.as_str()).filter(|n| !n.is_empty());
        let duration = |d: jig_api::triton::StatDuration| Some(StatisticDuration { count: d.count, ns: d.ns });
        let model_stats = self
            .0
            .v2_statistics(name)?
            .model_stats
            .into_iter()
            .map(|s| ModelStatistics {
                name: s.name,
                version: s.version,
                last_inference: s.last_inference,
                inference_count: s.inference_count,
                execution_count: s.execution_count,
                inference_stats: Some(InferStatistics {
                    success: duration(s.inference_stats.success),
                    fail: duration(s.inference_stats.fail),
                    queue: duration(s.inference_stats.queue),
                    compute_input: duration(s.inference_stats.compute_input),
                    compute_infer: duration(s.inference_stats.compute_infer),
                    compute_output: duration(s.inference_stats.compute_output),
                }),
                batch_stats: s
                    .batch_stats
                    .into_iter()
                    .map(|b| InferBatchStatistics {
                        batch_size: b.batch_size,
                        compute_input: duration(b.compute_input),
                        compute_infer: duration(b.compute_infer),
                        compute_output: duration(b.compute_output),
                    })
                    .collect(),
            })
            .collect();
        Ok(Response::new(ModelStatisticsResponse { model_stats }))
    }

    async fn repository_index(
        &self,
        request: Request<RepositoryIndexRequest>,
    ) -> Result<Response<RepositoryIndexResponse>, Status> {
        self.authorize(request.metadata())?;
        let models = self
            .0
            .v2_repository(request.get_ref().ready)
            .into_iter()
            .map(|m| repository_index_response::ModelIndex {
                name: m.name,
                version: m.version,
                state: m.state,
                reason: m.reason,
            })
            .collect();
        Ok(Response::new(RepositoryIndexResponse { models }))
    }

    async fn repository_model_load(
        &self,
        request: Request<RepositoryModelLoadRequest>,
    ) -> Result<Response<RepositoryModelLoadResponse>, Status> {
        self.control(request.metadata())?;
        let RepositoryModelLoadRequest { repository_name, model_name } = request.into_inner();
        self.0.v2_load(if model_name.is_empty() { &repository_name } else { &model_name }).await?;
        Ok(Response::new(RepositoryModelLoadResponse {}))
    }

    async fn repository_model_unload(
        &self,
        request: Request<RepositoryModelUnloadRequest>,
    ) -> Result<Response<RepositoryModelUnloadResponse>, Status> {
        self.control(request.metadata())?;
        let RepositoryModelUnloadRequest { repository_name, model_name } = request.into_inner();
        self.0.v2_unload(if model_name.is_empty() { &repository_name } else { &model_name }).await?;
        Ok(Response::new(RepositoryModelUnloadResponse {}))
    }
}
