//! The WASM plugin host, with real plugins built for `wasm32-wasip2`: the
//! example records plugin against a loopback service, hostile plugins,
//! a plugin of the 0.1.0 contract, the Python plugin, and bad input.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use nuon_core::artifact::{ArtifactStore, Descriptor, Digest};
use nuon_core::wasm::{Capabilities, Limits, PluginManifest};
use nuon_plugins::oci::LayoutStore;
use nuon_plugins::oci::pluginpkg;
use nuon_plugins::wasm::{
    Call, CallContext, HostConfig, LoadedFrom, LoadedPlugin, PlanMode, PluginError, Reply, Request,
    WasmError, WasmHost,
};
use nuon_tests::{RecordService, python_plugin, rt, wasm_plugins};
use serde_json::{Value, json};
use tokio::sync::mpsc;

fn host(cache: &Path) -> Arc<WasmHost> {
    WasmHost::new(HostConfig {
        cache_dir: Some(cache.to_path_buf()),
        max_instances: 8,
    })
    .expect("host")
}

fn limits(memory_mib: u64, timeout: Duration) -> Limits {
    Limits {
        memory: memory_mib << 20,
        timeout,
    }
}

/// A call context in `work`, and the receiver of its log lines.
fn ctx(
    work: &Path,
    hosts: &[&str],
    secrets: &[(&str, &str)],
    limits: Limits,
) -> (CallContext, mpsc::UnboundedReceiver<String>) {
    let (log, rx) = mpsc::unbounded_channel();
    (
        CallContext {
            work_dir: work.to_path_buf(),
            env: Vec::new(),
            allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            secrets: secrets
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            limits,
            stop: Arc::new(AtomicBool::new(false)),
            log,
        },
        rx,
    )
}

fn drain(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    let mut out = String::new();
    while let Ok(l) = rx.try_recv() {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

fn request(config: Value, state: Option<Value>) -> Request {
    Request {
        config: config.to_string(),
        state: state.map(|s| s.to_string()),
    }
}

async fn plan(
    h: &WasmHost,
    p: &LoadedPlugin,
    c: &CallContext,
    config: Value,
) -> Result<Reply, WasmError> {
    h.call(p, c, Call::Plan(request(config, None), PlanMode::Deploy))
        .await
}

#[test]
fn records_plugin_plans_applies_and_destroys_a_real_record() {
    let Some(plugins) = wasm_plugins() else {
        return;
    };
    let svc = RecordService::start("t0ken").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let h = host(&tmp.path().join("cache"));
        let bytes = std::fs::read(&plugins.records).unwrap();
        let p = h
            .load(&bytes, &limits(64, Duration::from_secs(10)))
            .await
            .unwrap();
        assert_eq!(p.info.name, "records");
        assert_eq!(p.loaded.0, LoadedFrom::Compiled);
        let (c, mut rx) = ctx(
            tmp.path(),
            &["127.0.0.1"],
            &[("records_token", "t0ken")],
            limits(64, Duration::from_secs(10)),
        );
        let config = json!({
            "endpoint": svc.url, "collection": "licenses", "id": "acme",
            "fields": {"seats": 10}, "token_secret": "records_token"
        });
        h.call(&p, &c, Call::Validate(config.to_string()))
            .await
            .unwrap();
        let Reply::Plan(plan1) = plan(&h, &p, &c, config.clone()).await.unwrap() else {
            panic!("plan answers a plan")
        };
        assert_eq!(plan1.changes.len(), 1, "{plan1:?}");
        assert!(
            svc.get("licenses", "acme").is_none(),
            "a plan changes nothing"
        );
        let Reply::Applied(a) = h
            .call(&p, &c, Call::Apply(request(config.clone(), None), plan1))
            .await
            .unwrap()
        else {
            panic!("apply answers applied")
        };
        let outputs: Value = serde_json::from_str(&a.outputs).unwrap();
        assert_eq!(outputs["revision"], 1);
        assert_eq!(svc.get("licenses", "acme").unwrap()["fields"]["seats"], 10);
        let state: Value = serde_json::from_str(&a.state).unwrap();
        // Planned again with the same config: nothing to do.
        let Reply::Plan(again) = h
            .call(
                &p,
                &c,
                Call::Plan(
                    request(config.clone(), Some(state.clone())),
                    PlanMode::Deploy,
                ),
            )
            .await
            .unwrap()
        else {
            panic!()
        };
        assert!(again.changes.is_empty(), "{again:?}");
        // A plan made stale by a change behind its back is refused.
        let mut changed = config.clone();
        changed["fields"]["seats"] = json!(20);
        let Reply::Plan(update) = plan(&h, &p, &c, changed.clone()).await.unwrap() else {
            panic!()
        };
        assert!(update.changes[0].summary.contains("seats"), "{update:?}");
        let Reply::Plan(other) = plan(
            &h,
            &p,
            &c,
            json!({
                "endpoint": svc.url, "collection": "licenses", "id": "acme",
                "fields": {"seats": 30}, "token_secret": "records_token"
            }),
        )
        .await
        .unwrap() else {
            panic!()
        };
        h.call(
            &p,
            &c,
            Call::Apply(request(changed.clone(), None), update.clone()),
        )
        .await
        .unwrap();
        let stale = h
            .call(&p, &c, Call::Apply(request(changed.clone(), None), other))
            .await
            .unwrap_err();
        assert!(
            stale.to_string().contains("changed since the plan"),
            "{stale}"
        );
        // Destroy.
        let Reply::Plan(d) = h
            .call(
                &p,
                &c,
                Call::Plan(request(changed.clone(), Some(state)), PlanMode::Destroy),
            )
            .await
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(d.changes.len(), 1);
        h.call(&p, &c, Call::Destroy(request(changed, None), d))
            .await
            .unwrap();
        assert!(svc.get("licenses", "acme").is_none());
        let log = drain(&mut rx);
        assert!(
            log.contains("[plugin progress 1/1] record written"),
            "{log}"
        );
        assert!(log.contains("deleted"), "{log}");

        // A second host on the same cache loads the compiled code, and a
        // planted file in the cache is never deserialized.
        let h2 = host(&tmp.path().join("cache"));
        let p2 = h2
            .load(&bytes, &limits(64, Duration::from_secs(10)))
            .await
            .unwrap();
        assert_eq!(p2.loaded.0, LoadedFrom::DiskCache);
        let h3 = host(&tmp.path().join("cache"));
        for e in std::fs::read_dir(tmp.path().join("cache")).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "cwasm") {
                let mut b = std::fs::read(&path).unwrap();
                let n = b.len() / 2;
                b[n] ^= 0xff;
                std::fs::write(&path, b).unwrap();
            }
        }
        let p3 = h3
            .load(&bytes, &limits(64, Duration::from_secs(10)))
            .await
            .unwrap();
        assert_eq!(
            p3.loaded.0,
            LoadedFrom::Compiled,
            "a tampered cache file is compiled again"
        );
    });
}

#[test]
fn hostile_plugins_are_contained_and_the_host_stays_healthy() {
    let Some(plugins) = wasm_plugins() else {
        return;
    };
    let svc = RecordService::start("x").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(tmp.path().join("outside.txt"), "runner secret").unwrap();
    rt().block_on(async {
        let h = host(&tmp.path().join("cache"));
        let bytes = std::fs::read(&plugins.hostile).unwrap();
        let p = h.load(&bytes, &limits(32, Duration::from_secs(5))).await.unwrap();
        let healthy = |h: Arc<WasmHost>, p: Arc<LoadedPlugin>, work: std::path::PathBuf| async move {
            let (c, _) = ctx(&work, &[], &[], limits(32, Duration::from_secs(5)));
            assert!(matches!(
                plan(&h, &p, &c, json!({"attack": "none"})).await,
                Ok(Reply::Plan(_))
            ));
        };

        // An infinite loop is stopped at its deadline.
        let (c, _) = ctx(&work, &[], &[], limits(32, Duration::from_millis(500)));
        let t = Instant::now();
        let e = plan(&h, &p, &c, json!({"attack": "loop"})).await.unwrap_err();
        assert!(matches!(e, WasmError::Deadline(_)), "{e}");
        assert!(e.to_string().contains("deadline of 0.5s"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(3), "stopped late: {:?}", t.elapsed());
        healthy(h.clone(), p.clone(), work.clone()).await;

        // A memory bomb is stopped at its limit.
        let (c, _) = ctx(&work, &[], &[], limits(32, Duration::from_secs(10)));
        let e = plan(&h, &p, &c, json!({"attack": "memory"})).await.unwrap_err();
        assert!(matches!(e, WasmError::Memory(_)), "{e}");
        assert!(e.to_string().contains("memory limit of 32 MiB"), "{e}");
        healthy(h.clone(), p.clone(), work.clone()).await;

        // A file outside the work directory cannot be read.
        let outside = tmp.path().join("outside.txt");
        let (c, _) = ctx(&work, &[], &[], limits(32, Duration::from_secs(5)));
        for path in [outside.display().to_string(), "../outside.txt".into(), "/etc/passwd".into()] {
            let e = plan(&h, &p, &c, json!({"attack": "file", "path": path})).await.unwrap_err();
            assert!(
                matches!(&e, WasmError::Plugin(PluginError::Permanent(m)) if m.contains("cannot read")),
                "{path}: {e}"
            );
        }
        // ... while the work directory is its own.
        std::fs::write(work.join("mine.txt"), "hello").unwrap();
        let Reply::Plan(ok) = plan(&h, &p, &c, json!({"attack": "file", "path": "mine.txt"})).await.unwrap() else { panic!() };
        assert!(ok.data.contains("hello"));

        // HTTP to an undeclared host is refused before any connection.
        let before = svc.requests();
        let (c, mut rx) = ctx(&work, &["api.example.com"], &[], limits(32, Duration::from_secs(5)));
        let e = plan(&h, &p, &c, json!({"attack": "http", "url": format!("{}/records/a/b", svc.url)}))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("refused: not among the plugin's allowed hosts"), "{e}");
        assert_eq!(svc.requests(), before, "no request reached the service");
        assert!(drain(&mut rx).contains("[host] HTTP to 127.0.0.1"));

        // An undeclared secret is refused.
        let (c, _) = ctx(&work, &[], &[("granted", "g")], limits(32, Duration::from_secs(5)));
        let e = plan(&h, &p, &c, json!({"attack": "secret", "name": "db_password"})).await.unwrap_err();
        assert!(e.to_string().contains("secret \"db_password\" refused"), "{e}");

        // The environment holds only what the job passes (nothing).
        let Reply::Plan(env) = plan(&h, &p, &c, json!({"attack": "env"})).await.unwrap() else { panic!() };
        assert_eq!(serde_json::from_str::<Value>(&env.data).unwrap()["env"], json!([]));

        // Cancellation stops a running call.
        let (c, _) = ctx(&work, &[], &[], limits(32, Duration::from_secs(30)));
        let stop = c.stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let e = plan(&h, &p, &c, json!({"attack": "loop"})).await.unwrap_err();
        assert!(matches!(e, WasmError::Stopped(_)), "{e}");
        healthy(h.clone(), p.clone(), work.clone()).await;
    });
}

#[test]
fn a_plugin_of_the_0_1_0_contract_runs_on_the_0_1_1_host() {
    let Some(plugins) = wasm_plugins() else {
        return;
    };
    let wit =
        std::fs::read_to_string(nuon_tests::repo_root().join("nuon-plugins/sdk/wit/plugin.wit"))
            .unwrap();
    assert!(wit.contains("package nuon:plugin@0.1.1;") && wit.contains("time-left-ms"));
    let tmp = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let h = host(&tmp.path().join("cache"));
        let p = h
            .load(
                &std::fs::read(&plugins.compat).unwrap(),
                &limits(32, Duration::from_secs(5)),
            )
            .await
            .unwrap();
        assert_eq!(p.info.name, "compat");
        let (c, mut rx) = ctx(tmp.path(), &[], &[], limits(32, Duration::from_secs(5)));
        let Reply::Plan(plan) = plan(&h, &p, &c, json!({})).await.unwrap() else {
            panic!()
        };
        assert!(plan.data.contains("0.1.0"));
        assert!(drain(&mut rx).contains("planning on a 0.1.0 contract"));
    });
}

#[test]
fn the_python_plugin_plans_and_applies_through_the_same_host() {
    let Some(path) = python_plugin() else { return };
    let tmp = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let h = host(&tmp.path().join("cache"));
        let l = limits(256, Duration::from_secs(30));
        let p = h.load(&std::fs::read(&path).unwrap(), &l).await.unwrap();
        assert_eq!(p.info.name, "inventory");
        let (c, mut rx) = ctx(tmp.path(), &[], &[], l.clone());
        let config = json!({"items": {"bolts": 40, "nuts": 2}});
        h.call(&p, &c, Call::Validate(config.to_string()))
            .await
            .unwrap();
        let Reply::Plan(plan1) = plan(&h, &p, &c, config.clone()).await.unwrap() else {
            panic!()
        };
        assert_eq!(plan1.changes.len(), 2, "{plan1:?}");
        let Reply::Applied(a) = h
            .call(&p, &c, Call::Apply(request(config, None), plan1))
            .await
            .unwrap()
        else {
            panic!()
        };
        let outputs: Value = serde_json::from_str(&a.outputs).unwrap();
        assert_eq!(outputs, json!({"kinds": 2, "total": 42}));
        let Reply::Plan(plan2) = h
            .call(
                &p,
                &c,
                Call::Plan(
                    request(
                        json!({"items": {"bolts": 41}}),
                        serde_json::from_str(&a.state).ok(),
                    ),
                    PlanMode::Deploy,
                ),
            )
            .await
            .unwrap()
        else {
            panic!()
        };
        let summary: Vec<String> = plan2.changes.iter().map(|c| c.summary.clone()).collect();
        assert_eq!(summary, vec!["40 -> 41", "remove"]);
        assert!(drain(&mut rx).contains("inventory: 2 change(s)"));
        let bad = h
            .call(
                &p,
                &c,
                Call::Validate(json!({"items": {"bolts": -1}}).to_string()),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(bad, WasmError::Plugin(PluginError::InvalidConfig(_))),
            "{bad}"
        );
    });
}

#[test]
fn bad_plugins_are_refused_with_clear_errors_before_anything_runs() {
    let Some(plugins) = wasm_plugins() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let h = host(&tmp.path().join("cache"));
        let l = limits(32, Duration::from_secs(5));
        let e = h.load(b"#!/bin/sh\necho hi\n", &l).await.unwrap_err();
        assert!(e.to_string().contains("not a WebAssembly component"), "{e}");
        let core_module = [0u8, b'a', b's', b'm', 1, 0, 0, 0];
        let e = h.load(&core_module, &l).await.unwrap_err();
        assert!(
            e.to_string()
                .contains("core WebAssembly module, not a component"),
            "{e}"
        );
        let e = h
            .load(&std::fs::read(&plugins.other_world).unwrap(), &l)
            .await
            .unwrap_err();
        assert!(matches!(e, WasmError::WrongWorld(_)), "{e}");
        assert!(e.to_string().contains("not a nuon plugin"), "{e}");
        assert!(e.to_string().contains("wasi:cli/run"), "{e}");

        // A config that fails the plugin's schema.
        let p = h
            .load(&std::fs::read(&plugins.records).unwrap(), &l)
            .await
            .unwrap();
        let problems = nuon_plugins::wasm::schema::check(
            &p.info.config_schema,
            &json!({"endpoint": 5, "collection": "c", "fields": {}, "color": "red"}),
        );
        let text = problems.join("; ");
        assert!(text.contains("config.endpoint: expected string"), "{text}");
        assert!(text.contains("\"id\" is required"), "{text}");
        assert!(text.contains("config.color: unknown key"), "{text}");

        // A packaged plugin whose bytes do not match its digest.
        let store = LayoutStore::open(tmp.path().join("store")).unwrap();
        let manifest = PluginManifest {
            name: "records".into(),
            version: "0.1.0".into(),
            wasm: "records.wasm".into(),
            capabilities: Capabilities::default(),
        };
        let wasm = std::fs::read(&plugins.records).unwrap();
        let digest = pluginpkg::push_parts(&store, "acme/records", &manifest, wasm.clone(), None)
            .await
            .unwrap();
        let (m, bytes) = pluginpkg::fetch_plugin(&store, "acme/records", &digest)
            .await
            .unwrap();
        assert_eq!((m, bytes.len()), (manifest.clone(), wasm.len()));
        let layer = Descriptor {
            media_type: nuon_core::wasm::PLUGIN_COMPONENT_MEDIA_TYPE.into(),
            digest: Digest::of(&wasm),
            size: wasm.len() as u64,
            annotations: Default::default(),
        };
        let blob = store.blob_path("acme/records", &layer.digest).unwrap();
        assert!(store.has_blob("acme/records", &layer).await.unwrap());
        let mut evil = wasm.clone();
        let n = evil.len() - 10;
        evil[n] ^= 0x55;
        std::fs::write(&blob, &evil).unwrap();
        let e = pluginpkg::fetch_plugin(&store, "acme/records", &digest)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("does not match"), "{e}");
        let wrong = Digest::of(b"another artifact");
        let e = pluginpkg::fetch_plugin(&store, "acme/records", &wrong)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("no plugin"), "{e}");
    });
}
