//! Every route of the HTTP API, parsed from a request's method and path. The gateway dispatches on [`Route`],
//! and [`crate::openapi()`] describes each one: a route cannot be added without its description.

/// A route of the HTTP API, with the app it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET /healthz`: liveness.
    Health,
    /// `GET /readyz`: readiness, every app the gateway should run running with an instance in each model slot.
    Ready,
    /// `GET /metrics`
    Metrics,
    /// `GET /openapi.json`
    OpenApi,
    /// `GET /ui`: a page showing the machine, each app's plan and its live rate, latency and violations.
    Ui,
    /// `GET /v1/devices`
    Devices,
    /// `GET /v1/apps`
    ListApps,
    /// `POST /v1/apps`
    Deploy,
    /// `GET /v1/apps/{app}`
    Status(&'a str),
    /// `DELETE /v1/apps/{app}`
    Delete(&'a str),
    /// `POST /v1/apps/{app}/invoke`
    Invoke(&'a str),
    /// `GET /v2`: the Open Inference Protocol's server metadata ([`crate::oip`]).
    V2Server,
    /// `GET /v2/health/live`
    V2Live,
    /// `GET /v2/health/ready`
    V2Ready,
    /// `GET /v2/models/{model}`, a model named `APP.SLOT` (a slot) or `APP` (an app that declares `[tensors]`)
    V2Model(&'a str),
    /// `GET /v2/models/{model}/ready`
    V2ModelReady(&'a str),
    /// `POST /v2/models/{model}/infer`
    V2Infer(&'a str),
    /// `GET /v2/models/{model}/config`: Triton's model configuration extension ([`crate::triton`]).
    V2ModelConfig(&'a str),
    /// `GET /v2/models/{model}/stats`: Triton's statistics extension.
    V2ModelStats(&'a str),
    /// `GET /v2/models/stats`: every model's statistics.
    V2Stats,
    /// `POST /v2/repository/index`: Triton's model repository extension.
    V2RepositoryIndex,
    /// `POST /v2/repository/models/{model}/load`: model control, a slot's instances planned and started again.
    V2Load(&'a str),
    /// `POST /v2/repository/models/{model}/unload`: model control, a slot's instances stopped.
    V2Unload(&'a str),
}

impl<'a> Route<'a> {
    /// One of each route, naming the app `{app}` (a v2 model `{model}`) as the API description writes it.
    pub const ALL: [Route<'static>; 23] = [
        Route::Health,
        Route::Ready,
        Route::Metrics,
        Route::OpenApi,
        Route::Ui,
        Route::Devices,
        Route::ListApps,
        Route::Deploy,
        Route::Status("{app}"),
        Route::Delete("{app}"),
        Route::Invoke("{app}"),
        Route::V2Server,
        Route::V2Live,
        Route::V2Ready,
        Route::V2Model("{model}"),
        Route::V2ModelReady("{model}"),
        Route::V2Infer("{model}"),
        Route::V2ModelConfig("{model}"),
        Route::V2ModelStats("{model}"),
        Route::V2Stats,
        Route::V2RepositoryIndex,
        Route::V2Load("{model}"),
        Route::V2Unload("{model}"),
    ];

    /// The route a request for `method` (`GET`, `POST`, …) and `path` takes, or `None`.
    pub fn parse(method: &str, path: &'a str) -> Option<Route<'a>> {
        let parts: Vec<&'a str> = path.trim_matches('/').split('/').collect();
        Some(match (method, parts.as_slice()) {
            ("GET", ["healthz"]) => Route::Health,
            ("GET", ["readyz"]) => Route::Ready,
            ("GET", ["metrics"]) => Route::Metrics,
            ("GET", ["openapi.json"]) => Route::OpenApi,
            ("GET", ["ui"]) => Route::Ui,
            ("GET", ["v1", "devices"]) => Route::Devices,
            ("GET", ["v1", "apps"]) => Route::ListApps,
            ("POST", ["v1", "apps"]) => Route::Deploy,
            ("GET", ["v1", "apps", app]) => Route::Status(app),
            ("DELETE", ["v1", "apps", app]) => Route::Delete(app),
            ("POST", ["v1", "apps", app, "invoke"]) => Route::Invoke(app),
            ("GET", ["v2"]) => Route::V2Server,
            ("GET", ["v2", "health", "live"]) => Route::V2Live,
            ("GET", ["v2", "health", "ready"]) => Route::V2Ready,
            ("GET", ["v2", "models", "stats"]) => Route::V2Stats,
            // A model has one version, `1` (the app's deployment); the protocol's versioned paths name it.
            ("GET", ["v2", "models", model] | ["v2", "models", model, "versions", "1"]) => Route::V2Model(model),
            ("GET", ["v2", "models", model, "ready"] | ["v2", "models", model, "versions", "1", "ready"]) => {
                Route::V2ModelReady(model)
            }
            ("POST", ["v2", "models", model, "infer"] | ["v2", "models", model, "versions", "1", "infer"]) => {
                Route::V2Infer(model)
            }
            ("GET", ["v2", "models", model, "config"] | ["v2", "models", model, "versions", "1", "config"]) => {
                Route::V2ModelConfig(model)
            }
            ("GET", ["v2", "models", model, "stats"] | ["v2", "models", model, "versions", "1", "stats"]) => {
                Route::V2ModelStats(model)
            }
            ("POST", ["v2", "repository", "index"]) => Route::V2RepositoryIndex,
            ("POST", ["v2", "repository", "models", model, "load"]) => Route::V2Load(model),
            ("POST", ["v2", "repository", "models", model, "unload"]) => Route::V2Unload(model),

            _ => return None,
        })
    }

    /// The method and the path, its app written `{app}` (an OpenAPI path template).
    pub fn template(&self) -> (&'static str, &'static str) {
        match self {
            Route::Health => ("GET", "/healthz"),
            Route::Ready => ("GET", "/readyz"),
            Route::Metrics => ("GET", "/metrics"),
            Route::OpenApi => ("GET", "/openapi.json"),
            Route::Ui => ("GET", "/ui"),
            Route::Devices => ("GET", "/v1/devices"),
            Route::ListApps => ("GET", "/v1/apps"),
            Route::Deploy => ("POST", "/v1/apps"),
            Route::Status(_) => ("GET", "/v1/apps/{app}"),
            Route::Delete(_) => ("DELETE", "/v1/apps/{app}"),
            Route::Invoke(_) => ("POST", "/v1/apps/{app}/invoke"),
            Route::V2Server => ("GET", "/v2"),
            Route::V2Live => ("GET", "/v2/health/live"),
            Route::V2Ready => ("GET", "/v2/health/ready"),
            Route::V2Model(_) => ("GET", "/v2/models/{model}"),
            Route::V2ModelReady(_) => ("GET", "/v2/models/{model}/ready"),
            Route::V2Infer(_) => ("POST", "/v2/models/{model}/infer"),
            Route::V2ModelConfig(_) => ("GET", "/v2/models/{model}/config"),
            Route::V2ModelStats(_) => ("GET", "/v2/models/{model}/stats"),
            Route::V2Stats => ("GET", "/v2/models/stats"),
            Route::V2RepositoryIndex => ("POST", "/v2/repository/index"),
            Route::V2Load(_) => ("POST", "/v2/repository/models/{model}/load"),
            Route::V2Unload(_) => ("POST", "/v2/repository/models/{model}/unload"),
        }
    }

    /// Whether the route needs the gateway's `token` (invocations, v1 and v2, need `invoke_token` instead):
    /// the control API, model control included.
    pub fn needs_token(&self) -> bool {
        matches!(
            self,
            Route::Devices
                | Route::ListApps
                | Route::Deploy
                | Route::Status(_)
                | Route::Delete(_)
                | Route::V2Load(_)
                | Route::V2Unload(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The HTTP API reference lists each route once, as `METHOD TEMPLATE`, and no route the gateway lacks.
    #[test]
    fn the_http_reference_lists_every_route() {
        let reference = include_str!("../../docs/src/reference/http-api.md");
        let mut listed: Vec<&str> = reference
            .lines()
            .filter_map(|line| line.strip_prefix("| `")?.split_once('`').map(|(route, _)| route))
            .filter(|route| route.split_once(' ').is_some_and(|(_, path)| path.starts_with('/')))
            .collect();
        let mut routes: Vec<String> =
            Route::ALL.iter().map(|r| r.template()).map(|(method, path)| format!("{method} {path}")).collect();
        listed.sort();
        routes.sort();
        assert_eq!(listed, routes, "docs/src/reference/http-api.md's table against Route::ALL");
    }

    #[test]
    fn every_route_parses_back_from_its_template_and_others_do_not() {
        for route in Route::ALL {
            let (method, path) = route.template();
            assert_eq!(Route::parse(method, path), Some(route), "{method} {path}");
        }
        assert_eq!(Route::parse("POST", "/v1/apps/shop/invoke/"), Some(Route::Invoke("shop")));
        assert_eq!(Route::parse("POST", "/v2/models/shop.det/infer"), Some(Route::V2Infer("shop.det")));
        assert_eq!(Route::parse("POST", "/v2/models/shop.det/versions/1/infer"), Some(Route::V2Infer("shop.det")));
        assert_eq!(Route::parse("GET", "/v2/models/shop.det/versions/2"), None);
        for (method, path) in [("PUT", "/v1/apps"), ("GET", "/v1/apps/a/b"), ("POST", "/healthz"), ("GET", "/")] {
            assert_eq!(Route::parse(method, path), None, "{method} {path}");
        }
    }
}
