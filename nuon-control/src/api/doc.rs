//! The Control API's operations as one table: it builds the router and the
//! OpenAPI 3.1 document served at `/openapi.json`, so the two cannot drift
//! apart. Schemas come from the wire types themselves (`schemars`).

use axum::Router;
use axum::routing::MethodRouter;
use nuon_core::endpoint::Endpoint;
use nuon_core::wire::ApiError;
use schemars::generate::{Contract, SchemaSettings};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::SharedState;

type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

fn schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// A query parameter of an operation.
pub(crate) struct QueryParam {
    pub(crate) name: &'static str,
    pub(crate) schema: Value,
    pub(crate) description: &'static str,
}

/// One operation of the Control API.
pub(crate) struct Op {
    /// `get`, `post` or `patch`.
    pub(crate) method: &'static str,
    /// The route, with `{name}` parameters.
    pub(crate) path: &'static str,
    /// The OpenAPI operationId.
    pub(crate) id: &'static str,
    /// One line.
    pub(crate) summary: &'static str,
    /// Whether it changes state (and so needs an admin token).
    pub(crate) write: bool,
    pub(crate) query: Vec<QueryParam>,
    /// Whether it needs no token (signing in).
    public: bool,
    /// A redirect as its success, and where to.
    redirect: Option<&'static str>,
    request: Option<SchemaFn>,
    /// A body that is not JSON: its media type.
    request_bytes: Option<&'static str>,
    status: u16,
    /// Another success status with the same body, and when it is given.
    also: Option<(u16, &'static str)>,
    response: Option<SchemaFn>,
    /// Another media type for the success answer (a stream), with the
    /// schema of one item.
    stream: Option<(&'static str, SchemaFn)>,
    handler: MethodRouter<SharedState>,
}

impl Op {
    fn new(
        method: &'static str,
        path: &'static str,
        id: &'static str,
        summary: &'static str,
        handler: MethodRouter<SharedState>,
    ) -> Self {
        Op {
            method,
            path,
            id,
            summary,
            write: method != "get",
            query: Vec::new(),
            public: false,
            redirect: None,
            request: None,
            request_bytes: None,
            status: 200,
            also: None,
            response: None,
            stream: None,
            handler,
        }
    }

    pub(crate) fn get(
        path: &'static str,
        id: &'static str,
        summary: &'static str,
        handler: MethodRouter<SharedState>,
    ) -> Self {
        Self::new("get", path, id, summary, handler)
    }

    /// The operation `E` declares (method, path, id, summary, request and
    /// response), served by `handler`.
    pub(crate) fn endpoint<E: Endpoint>(handler: MethodRouter<SharedState>) -> Self {
        let mut op = Self::new(E::METHOD.as_str(), E::PATH, E::ID, E::SUMMARY, handler);
        if E::BODY {
            op = op.takes::<E::Request>();
        }
        op.returns::<E::Response>(E::STATUS)
    }

    /// The JSON body it takes.
    pub(crate) fn takes<T: JsonSchema>(mut self) -> Self {
        self.request = Some(schema_of::<T>);
        self
    }

    /// The body it takes is bytes of `media`, not JSON.
    pub(crate) fn takes_bytes(mut self, media: &'static str) -> Self {
        self.request_bytes = Some(media);
        self
    }

    /// The JSON it answers with, and the status.
    pub(crate) fn returns<T: JsonSchema>(mut self, status: u16) -> Self {
        self.status = status;
        self.response = Some(schema_of::<T>);
        self
    }

    /// It may also succeed with `status` (same body): `when`.
    pub(crate) fn or_status(mut self, status: u16, when: &'static str) -> Self {
        self.also = Some((status, when));
        self
    }

    /// It may also answer with a stream of `media` items of type `T`.
    pub(crate) fn streams<T: JsonSchema>(mut self, media: &'static str) -> Self {
        self.stream = Some((media, schema_of::<T>));
        self
    }

    /// It needs no token.
    pub(crate) fn public(mut self) -> Self {
        self.public = true;
        self
    }

    /// It answers with a redirect (302) `to` somewhere.
    pub(crate) fn redirects(mut self, to: &'static str) -> Self {
        self.status = 302;
        self.redirect = Some(to);
        self
    }

    /// A query parameter.
    pub(crate) fn query(
        mut self,
        name: &'static str,
        schema: Value,
        description: &'static str,
    ) -> Self {
        self.query.push(QueryParam {
            name,
            schema,
            description,
        });
        self
    }

    /// The path parameters, in order.
    pub(crate) fn path_params(&self) -> Vec<&'static str> {
        self.path
            .split('/')
            .filter_map(|p| p.strip_prefix('{').and_then(|p| p.strip_suffix('}')))
            .collect()
    }
}

/// The router of a list of operations.
pub(crate) fn router(ops: Vec<Op>) -> Router<SharedState> {
    ops.into_iter()
        .fold(Router::new(), |r, op| r.route(op.path, op.handler))
}

/// The OpenAPI 3.1 document of a list of operations.
pub(crate) fn openapi(ops: &[Op]) -> Value {
    let mut g = SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
            s.contract = Contract::Serialize;
        })
        .into_generator();
    let error = g.subschema_for::<ApiError>().to_value();
    let json_content = |schema: Value| json!({ "application/json": { "schema": schema } });
    let mut paths: Map<String, Value> = Map::new();
    for op in ops {
        let mut params: Vec<Value> = op
            .path_params()
            .into_iter()
            .map(|name| {
                json!({
                    "name": name,
                    "in": "path",
                    "required": true,
                    "schema": { "type": "string" },
                    "description": "An id, or a name where the resource has one.",
                })
            })
            .collect();
        params.extend(op.query.iter().map(|q| {
            json!({
                "name": q.name,
                "in": "query",
                "required": false,
                "schema": q.schema,
                "description": q.description,
            })
        }));
        let mut ok = json!({ "description": op.redirect.unwrap_or("Success.") });
        let mut content = Map::new();
        if let Some(f) = op.response {
            content.insert(
                "application/json".into(),
                json!({ "schema": f(&mut g).to_value() }),
            );
        }
        if let Some((media, f)) = op.stream {
            content.insert(media.into(), json!({ "schema": f(&mut g).to_value() }));
        }
        if !content.is_empty() {
            ok["content"] = Value::Object(content);
        }
        let mut responses = Map::new();
        if let Some((status, when)) = op.also {
            let mut also = ok.clone();
            also["description"] = Value::String(when.into());
            responses.insert(status.to_string(), also);
        }
        responses.insert(op.status.to_string(), ok);
        let err = |d: &str| json!({ "description": d, "content": json_content(error.clone()) });
        responses.insert(
            "400".into(),
            err("Invalid input: what, where and how to fix it."),
        );
        if op.public {
            responses.insert(
                "401".into(),
                err("Refused by the identity provider, or its answer did not check out."),
            );
            responses.insert("403".into(), err("The person is not invited."));
            responses.insert(
                "502".into(),
                err("The identity provider could not be reached."),
            );
        } else {
            responses.insert("401".into(), err("Missing or unknown token."));
        }
        if op.write {
            responses.insert("403".into(), err("A read-only token."));
        }
        responses.insert("404".into(), err("No such resource in the token's org."));
        if op.write {
            responses.insert(
                "409".into(),
                err("Conflicts with the current state (a name taken)."),
            );
        }
        responses.insert("413".into(), err("The body is larger than 4 MiB."));
        responses.insert("415".into(), err("The body is not JSON."));
        let mut operation = json!({
            "operationId": op.id,
            "summary": op.summary,
            "parameters": params,
            "responses": responses,
            "security": if op.public { json!([]) } else { json!([{ "bearer": [] }]) },
        });
        if let Some(f) = op.request {
            operation["requestBody"] = json!({
                "required": true,
                "content": json_content(f(&mut g).to_value()),
            });
        }
        if let Some(media) = op.request_bytes {
            operation["requestBody"] = json!({
                "required": true,
                "content": { media: { "schema": { "type": "string", "contentMediaType": media } } },
            });
        }
        paths
            .entry(op.path.to_owned())
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("a path item is an object")
            .insert(op.method.into(), operation);
    }
    let schemas = g.take_definitions(true);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "nuon Control API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Everything is scoped to the org of the bearer API token. Admin tokens may change things; read tokens only read.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
        },
    })
}
