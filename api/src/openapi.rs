//! The OpenAPI 3.1 description of the HTTP API, served by the gateway at `GET /openapi.json`: one operation
//! per [`Route`] (an exhaustive match, so a new route needs its description), its schemas generated from the
//! wire types of this crate, so they cannot drift from what the gateway writes.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Value, json};

use crate::oip::{Health, InferRequest, InferResponse, ModelMetadata, ServerMetadata};
use crate::routes::Route;
use crate::triton::{ModelConfig, ModelControl, ModelStatistics, RepositoryIndexRequest, RepositoryModel};
use crate::{AppList, AppStatus, CLASS_HEADER, Deleted, ErrorBody, InvokeResponse, MachineStatus, TIMEOUT_HEADER};

/// The OpenAPI document of the API.
pub fn openapi() -> Value {
    let mut generator =
        SchemaSettings::draft2020_12().with(|s| s.definitions_path = "/components/schemas".into()).into_generator();
    let mut paths = serde_json::Map::new();
    for route in Route::ALL {
        let (method, path) = route.template();
        let operation = operation(route, &mut generator);
        let item = paths.entry(path).or_insert_with(|| json!({}));
        item[method.to_lowercase()] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "jig",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Deploy apps (graphs of WebAssembly functions and ONNX models) and invoke them with \
                deadlines. Every error is an ErrorBody whose `kind` sets the status.",
        },
        "paths": paths,
        "components": {
            "schemas": generator.take_definitions(true),
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
        },
    })
}

/// The operation of `route`.
fn operation(route: Route, generator: &mut SchemaGenerator) -> Value {
    let app = json!({
        "name": "app", "in": "path", "required": true, "schema": { "type": "string" },
        "description": "The app's name, from its jig.toml.",
    });
    let model = json!({
        "name": "model", "in": "path", "required": true, "schema": { "type": "string" },
        "description": "A model slot of a deployed app, named `APP.SLOT`, or an app that declares `[tensors]`, named `APP`.",
    });
    let token = json!([{ "bearer": [] }]);
    let mut op = match route {
        Route::Health => json!({
            "summary": "Liveness: `ok` while the gateway runs.",
            "responses": { "200": text("ok") },
        }),
        Route::Ready => json!({
            "summary": "Readiness: `ready` when every app the gateway should run runs with an instance in each model \
                slot; otherwise 503 and what is not ready (an app starting, or whose start failed).",
            "responses": { "200": text("ready"), "503": text("not ready: and a line for each app or model that is not") },
        }),
        Route::Metrics => json!({
            "summary": "Prometheus/OpenMetrics text: requests, latencies, SLO violations, drops, instances, devices.",
            "responses": { "200": {
                "description": "The metrics.",
                "content": {
                    "application/openmetrics-text": { "schema": { "type": "string" } },
                    "text/plain": { "schema": { "type": "string" } },
                },
            } },
        }),
        Route::Ui => json!({
            "summary": "A status page for a browser: the machine, each app's plan (instances on cores, GPUs and MIG \
                        instances) and its live rate, latency and SLO violations, refreshed every two seconds from \
                        /v1/devices, /v1/apps and /metrics (with the gateway's token, `?token=` or asked for).",
            "responses": { "200": {
                "description": "The page.",
                "content": { "text/html": { "schema": { "type": "string" } } },
            } },
        }),
        Route::OpenApi => json!({
            "summary": "This document.",
            "responses": { "200": { "description": "The OpenAPI document.", "content": { "application/json": {} } } },
        }),
        Route::Devices => json!({
            "summary": "The cores and GPUs model instances may use, and what no app holds.",
            "security": token,
            "responses": { "200": body::<MachineStatus>(generator, "The machine."), "401": error(generator) },
        }),
        Route::ListApps => json!({
            "summary": "The deployed apps.",
            "security": token,
            "responses": { "200": body::<AppList>(generator, "The apps."), "401": error(generator) },
        }),
        Route::Deploy => json!({
            "summary": "Deploy a packed bundle (`jig deploy` packs and sends it); an app of the same name is replaced.",
            "security": token,
            "requestBody": {
                "required": true,
                "description": "The bundle as a tar: jig.toml, glue/*.wasm, models, profiles.csv.",
                "content": { "application/x-tar": { "schema": { "type": "string", "format": "binary" } } },
            },
            "responses": {
                "201": body::<AppStatus>(generator, "Deployed: the app's status."),
                "400": error(generator), "401": error(generator), "408": error(generator), "413": error(generator),
            },
        }),
        Route::Status(_) => json!({
            "summary": "One app's tasks, deployment, bundle, demand and what it observed.",
            "security": token,
            "parameters": [app],
            "responses": {
                "200": body::<AppStatus>(generator, "The app's status."),
                "401": error(generator), "404": error(generator),
            },
        }),
        Route::Delete(_) => json!({
            "summary": "Remove an app (and its bundle, once no app uses it).",
            "security": token,
            "parameters": [app],
            "responses": {
                "200": body::<Deleted>(generator, "Removed."),
                "401": error(generator), "404": error(generator),
            },
        }),
        Route::Invoke(_) => json!({
            "summary": "Run the app's graph on the request body: the entry task gets it, every payload emitted on an \
                edge runs the tasks it leads to, and the answer gathers the leaves' outputs.",
            "description": "Needs `invoke_token` when the gateway has one. Answers refused for load (429, 503) \
                carry `Retry-After: 1`.",
            "security": token,
            "parameters": [app, {
                "name": TIMEOUT_HEADER, "in": "header", "required": false, "schema": { "type": "integer", "minimum": 0 },
                "description": "The deadline, milliseconds from arrival; else the query class's or the app's latency SLO; else 30 s.",
            }, {
                "name": CLASS_HEADER, "in": "header", "required": false, "schema": { "type": "string" },
                "description": "The query class of an app planned by Compass (`classes` in its jig.toml): required there, refused elsewhere (400).",
            }],
            "requestBody": {
                "required": false,
                "description": "The entry task's payload: an image, text, or an SDK envelope.",
                "content": { "application/octet-stream": { "schema": { "type": "string", "format": "binary" } } },
            },
            "responses": {
                "200": body::<InvokeResponse>(generator, "The outputs; `server-timing: total;dur=MS` gives the time in the gateway."),
                "400": error(generator), "401": error(generator), "404": error(generator), "413": error(generator),
                "429": error(generator), "500": error(generator), "503": error(generator), "504": error(generator),
            },
        }),
        Route::V2Server => json!({
            "summary": "Open Inference Protocol (KServe v2): the server's name, version and extensions.",
            "responses": { "200": body::<ServerMetadata>(generator, "The server.") },
        }),
        Route::V2Live => json!({
            "summary": "Open Inference Protocol: live while the gateway runs.",
            "responses": { "200": body::<Health>(generator, "Live: `{\"live\": true}`.") },
        }),
        Route::V2Ready => json!({
            "summary": "Open Inference Protocol: ready, as `/readyz` (503 while it is not).",
            "responses": { "200": body::<Health>(generator, "Ready: `{\"ready\": true}`."), "503": error(generator) },
        }),
        Route::V2Model(_) => json!({
            "summary": "Open Inference Protocol: a model slot's declared inputs and outputs (also at \
                `/v2/models/{model}/versions/1`, its one version; so are `ready` and `infer`).",
            "security": token,
            "parameters": [model],
            "responses": {
                "200": body::<ModelMetadata>(generator, "The model."),
                "401": error(generator), "404": error(generator),
            },
        }),
        Route::V2ModelReady(_) => json!({
            "summary": "Open Inference Protocol: 200 when the model slot (each slot of an app model) has a running \
                instance; 503 while it has none or its app is starting.",
            "security": token,
            "parameters": [model],
            "responses": {
                "200": body::<Health>(generator, "Ready: `{\"name\": …, \"ready\": true}`."),
                "401": error(generator), "404": error(generator), "503": error(generator),
            },
        }),
        Route::V2Infer(_) => json!({
            "summary": "Open Inference Protocol: run a model slot on JSON or binary tensors, batched with the app's \
                own calls, under the app's deadlines, admission and metrics.",
            "description": "With the binary tensor data extension the body is the JSON request followed by the \
                inputs' bytes; `Inference-Header-Content-Length` gives the JSON's length, and the answer comes \
                the same way when an output asks for `binary_data`.",
            "security": token,
            "parameters": [model, {
                "name": TIMEOUT_HEADER, "in": "header", "required": false, "schema": { "type": "integer", "minimum": 0 },
                "description": "The deadline, milliseconds from arrival; else the app's latency SLO; else 30 s.",
            }],
            "requestBody": {
                "required": true,
                "content": {
                    "application/json": { "schema": generator.subschema_for::<InferRequest>() },
                    "application/octet-stream": { "schema": { "type": "string", "format": "binary" } },
                },
            },
            "responses": {
                "200": body::<InferResponse>(generator, "The outputs."),
                "400": error(generator), "401": error(generator), "404": error(generator), "413": error(generator),
                "500": error(generator), "503": error(generator), "504": error(generator),
            },
        }),
        Route::V2ModelConfig(_) => json!({
            "summary": "Triton's model configuration: what the plan serves the model with (batch, instances, batching).",
            "security": token,
            "parameters": [model],
            "responses": {
                "200": body::<ModelConfig>(generator, "The configuration."),
                "401": error(generator), "404": error(generator), "503": error(generator),
            },
        }),
        Route::V2ModelStats(_) => json!({
            "summary": "Triton's statistics: the model's requests by outcome, rows and batches since its instances started.",
            "security": token,
            "parameters": [model],
            "responses": {
                "200": body::<ModelStatistics>(generator, "One model's statistics."),
                "401": error(generator), "404": error(generator),
            },
        }),
        Route::V2Stats => json!({
            "summary": "Triton's statistics of every model.",
            "security": token,
            "responses": { "200": body::<ModelStatistics>(generator, "Every model's statistics."), "401": error(generator) },
        }),
        Route::V2RepositoryIndex => json!({
            "summary": "Triton's model repository: every v2 model and whether it is ready (`{\"ready\": true}`: only those).",
            "security": token,
            "requestBody": {
                "required": false,
                "content": { "application/json": { "schema": generator.subschema_for::<RepositoryIndexRequest>() } },
            },
            "responses": {
                "200": body::<Vec<RepositoryModel>>(generator, "The models."),
                "400": error(generator), "401": error(generator),
            },
        }),
        Route::V2Load(_) => json!({
            "summary": "Triton's model control: an unloaded slot's instances planned (within what is free) and started \
                again; a loaded model, or an app, is loaded already.",
            "security": token,
            "parameters": [model],
            "responses": {
                "200": body::<ModelControl>(generator, "Loaded."),
                "400": error(generator), "401": error(generator), "404": error(generator), "500": error(generator),
            },
        }),
        Route::V2Unload(_) => json!({
            "summary": "Triton's model control: a slot's instances stopped; its app runs on, and a call of the slot is \
                told it has no running instance (503) until it is loaded.",
            "security": token,
            "parameters": [model],
            "responses": {
                "200": body::<ModelControl>(generator, "Unloaded."),
                "400": error(generator), "401": error(generator), "404": error(generator), "500": error(generator),
            },
        }),
    };
    let (method, path) = route.template();
    op["operationId"] = json!(format!("{} {path}", method.to_lowercase()));
    op
}

/// A JSON response of type `T`.
fn body<T: JsonSchema>(generator: &mut SchemaGenerator, description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": generator.subschema_for::<T>() } },
    })
}

/// An error response: an [`ErrorBody`], its `kind` as docs/src/reference/http-api.md's table of errors gives it.
fn error(generator: &mut SchemaGenerator) -> Value {
    body::<ErrorBody>(generator, "An error: a message naming what failed and what to do, and its kind.")
}

/// A plain-text response.
fn text(description: &str) -> Value {
    json!({ "description": description, "content": { "text/plain": { "schema": { "type": "string" } } } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_described_and_every_description_is_a_route() {
        let doc = openapi();
        let mut described = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                assert!(op["summary"].as_str().is_some_and(|s| !s.is_empty()), "{method} {path}");
                assert!(!op["responses"].as_object().unwrap().is_empty(), "{method} {path}");
                let concrete = path.replace("{app}", "shop").replace("{model}", "shop.det");
                let route = Route::parse(&method.to_uppercase(), &concrete)
                    .unwrap_or_else(|| panic!("{method} {path} is described but no route"));
                assert_eq!(route.template(), (method.to_uppercase().as_str(), path.as_str()));
                described.push(route.template());
            }
        }
        let routes: Vec<_> = Route::ALL.iter().map(Route::template).collect();
        described.sort();
        let mut sorted = routes.clone();
        sorted.sort();
        assert_eq!(described, sorted);
    }

    #[test]
    fn every_reference_resolves_to_a_schema_of_the_wire_types() {
        let doc = openapi();
        let text = doc.to_string();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for name in ["AppStatus", "AppList", "Deleted", "ErrorBody", "ErrorKind", "InvokeResponse", "MachineStatus"] {
            assert!(schemas.contains_key(name), "{name} missing from {:?}", schemas.keys());
        }
        for reference in text.split("\"$ref\":\"").skip(1) {
            let target = &reference[..reference.find('"').unwrap()];
            let name = target.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("{target}"));
            assert!(schemas.contains_key(name), "{target} does not resolve");
        }
        // The error kinds are the wire's snake_case names.
        assert!(schemas["ErrorKind"].to_string().contains("invalid_bundle"), "{}", schemas["ErrorKind"]);
    }
}
