//! The WASM plugin host: vendor plugins as WebAssembly components of the
//! `nuon:plugin` world (`sdk/wit`), run by wasmtime with only the powers
//! they declared.
//!
//! - One [`Engine`] per process: component model, epoch interruption (a
//!   ticker thread advances the epoch every [`TICK`] while a call runs)
//!   and the pooling allocator.
//! - Components are compiled once and cached on disk by content hash and
//!   engine version (the `cache` module); only files the host wrote itself are ever
//!   deserialized: each carries a MAC under a key only the host holds.
//! - A loaded plugin keeps its linker and pre-instantiation; every call
//!   gets a fresh instance in a fresh store, with a deadline and a memory
//!   limit, WASI with only the job's work directory preopened, no
//!   environment beyond what the job passes, no sockets; outgoing HTTP only
//!   to the hosts the call allows, checked before any connection. Guest
//!   stdout and stderr go to the job's log.
//!
//! [`job::WasmPlugin`] is the runner's `wasm` job kind on top of this.

mod cache;
mod imports;
pub mod job;
pub mod schema;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nuon_core::wasm::Limits;
use sha2::{Digest as _, Sha256};
use tokio::sync::mpsc;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

pub use cache::CompileCache;

mod bindings {
    #![allow(missing_docs)]
    wasmtime::component::bindgen!({
        path: "sdk/wit",
        world: "nuon-plugin",
        imports: { default: async },
        exports: { default: async },
    });
}

use bindings::exports::nuon::plugin::plugin as wit;
pub use bindings::nuon::plugin::types::{
    Applied, ChangeAction, ChangePlan, PlanMode, PlannedChange, PluginError, Request,
};

/// How often the engine's epoch advances: the granularity of deadlines.
pub const TICK: Duration = Duration::from_millis(10);

/// The host's settings.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Where compiled components are cached (`None`: compile every time).
    pub cache_dir: Option<PathBuf>,
    /// How many plugin instances may be live at once (the pool's size).
    pub max_instances: u32,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            cache_dir: None,
            max_instances: 32,
        }
    }
}

/// Why the host could not load or run a plugin.
#[derive(Debug, thiserror::Error)]
pub enum WasmError {
    /// The bytes are not a WebAssembly component.
    #[error("{0}")]
    NotAComponent(String),
    /// A component, but not of the `nuon:plugin` world.
    #[error("{0}")]
    WrongWorld(String),
    /// The plugin returned an error.
    #[error("{}", describe_plugin_error(.0))]
    Plugin(PluginError),
    /// The call ran past its deadline and was stopped.
    #[error("the plugin ran past its deadline of {}s and was stopped", .0.as_secs_f64())]
    Deadline(Duration),
    /// The plugin asked for more memory than its limit.
    #[error("the plugin reached its memory limit of {} MiB and was stopped", .0 >> 20)]
    Memory(u64),
    /// The job was stopped (cancelled, timed out, lease lost).
    #[error("the plugin was stopped: {0}")]
    Stopped(String),
    /// The plugin trapped (a panic, an unreachable, a bad access).
    #[error("the plugin crashed: {0}")]
    Trap(String),
    /// The host failed (compiling, the cache, the pool).
    #[error("wasm host: {0}")]
    Host(String),
}

fn describe_plugin_error(e: &PluginError) -> String {
    match e {
        PluginError::InvalidConfig(m) => format!("the plugin rejected its config: {m}"),
        PluginError::Transient(m) => format!("the plugin failed (transient, may be retried): {m}"),
        PluginError::Permanent(m) => format!("the plugin failed: {m}"),
    }
}

/// What a plugin says of itself (its `info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The component types it handles.
    pub component_types: Vec<String>,
    /// Its config's JSON schema.
    pub config_schema: serde_json::Value,
}

/// How a plugin was made ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadedFrom {
    /// Compiled now.
    Compiled,
    /// Read from the on-disk cache.
    DiskCache,
    /// Already loaded in this process.
    Memory,
}

/// A plugin ready to call: compiled, linked and pre-instantiated.
pub struct LoadedPlugin {
    pre: bindings::NuonPluginPre<CallState>,
    /// The SHA-256 of its component bytes.
    pub sha256: String,
    /// What it says of itself.
    pub info: PluginInfo,
    /// How it was loaded, and how long that took.
    pub loaded: (LoadedFrom, Duration),
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("sha256", &self.sha256)
            .field("info", &self.info)
            .field("loaded", &self.loaded)
            .finish()
    }
}

/// One line a plugin wrote: to its log, its stdout or its stderr.
pub type LogSink = mpsc::UnboundedSender<String>;

/// What one call may do and where it runs.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The job's work directory, the only one the plugin sees (as `.`).
    pub work_dir: PathBuf,
    /// The environment the plugin sees.
    pub env: Vec<(String, String)>,
    /// Hosts it may call (as `Capabilities::allowed_hosts`).
    pub allowed_hosts: Vec<String>,
    /// Secrets it may read, by name.
    pub secrets: BTreeMap<String, String>,
    /// Memory and time.
    pub limits: Limits,
    /// Set to stop the call (checked every tick).
    pub stop: Arc<AtomicBool>,
    /// Where its log lines go.
    pub log: LogSink,
}

/// A call of the plugin interface.
#[derive(Debug, Clone)]
pub enum Call {
    /// `info`.
    Info,
    /// `validate(config)`.
    Validate(String),
    /// `plan(request, mode)`.
    Plan(Request, PlanMode),
    /// `apply(request, plan)`.
    Apply(Request, ChangePlan),
    /// `destroy(request, plan)`.
    Destroy(Request, ChangePlan),
}

/// What a [`Call`] returned.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Of `info`.
    Info(PluginInfo),
    /// Of `validate` and `destroy`.
    Done,
    /// Of `plan`.
    Plan(ChangePlan),
    /// Of `apply`.
    Applied(Applied),
}

/// The data of one call's store.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    http: reqwest::Client,
    allowed_hosts: Vec<String>,
    secrets: BTreeMap<String, String>,
    log: LogSink,
    stop: Arc<AtomicBool>,
    deadline: Instant,
    timeout: Duration,
    limiter: MemoryLimiter,
    stopped_by: Option<StopCause>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopCause {
    Deadline,
    Stop,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps the linear memory of a call, summed over all its memories.
struct MemoryLimiter {
    limit: u64,
    used: u64,
    hit: bool,
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grow = desired.saturating_sub(current) as u64;
        if self.used + grow > self.limit {
            self.hit = true;
            return Err(wasmtime::format_err!(
                "memory limit of {} MiB reached",
                self.limit >> 20
            ));
        }
        self.used += grow;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// The process's plugin host. Cheap to share (`Arc`).
pub struct WasmHost {
    engine: Engine,
    linker: Linker<CallState>,
    cache: Option<CompileCache>,
    loaded: Mutex<HashMap<String, Arc<LoadedPlugin>>>,
    http: reqwest::Client,
    ticker: Ticker,
}

impl std::fmt::Debug for WasmHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmHost")
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

/// Advances the engine's epoch every [`TICK`] while a call runs, until
/// dropped. Between calls its thread sleeps on a condition variable, so an
/// idle runner is not woken 100 times a second (nor a job's CPU taken).
struct Ticker(Arc<TickState>);

struct TickState {
    /// Calls running now.
    calls: Mutex<usize>,
    wake: std::sync::Condvar,
    done: AtomicBool,
}

/// Keeps the epoch advancing while it lives: held across every stretch of
/// guest code (instantiation and the call).
struct Ticking<'a>(&'a TickState);

impl Ticker {
    fn start(engine: &Engine) -> Result<Ticker, WasmError> {
        let state = Arc::new(TickState {
            calls: Mutex::new(0),
            wake: std::sync::Condvar::new(),
            done: AtomicBool::new(false),
        });
        let (shared, engine) = (state.clone(), engine.weak());
        std::thread::Builder::new()
            .name("nuon-wasm-epoch".into())
            .spawn(move || tick(&shared, engine))
            .map_err(|e| WasmError::Host(format!("cannot start the epoch thread: {e}")))?;
        Ok(Ticker(state))
    }

    fn running(&self) -> Ticking<'_> {
        *lock(&self.0.calls) += 1;
        self.0.wake.notify_one();
        Ticking(&self.0)
    }
}

fn lock(calls: &Mutex<usize>) -> std::sync::MutexGuard<'_, usize> {
    calls
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Drop for Ticking<'_> {
    fn drop(&mut self) {
        *lock(&self.0.calls) -= 1;
    }
}

fn tick(state: &TickState, engine: wasmtime::EngineWeak) {
    loop {
        {
            let mut calls = lock(&state.calls);
            while *calls == 0 && !state.done.load(Ordering::Relaxed) {
                calls = state
                    .wake
                    .wait(calls)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        }
        if state.done.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep(TICK);
        match engine.upgrade() {
            Some(e) => e.increment_epoch(),
            None => return,
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        // Under the lock, so the thread cannot miss it between its check
        // and its wait.
        let _calls = lock(&self.0.calls);
        self.0.done.store(true, Ordering::Relaxed);
        self.0.wake.notify_all();
    }
}

fn host_err(what: &str) -> impl FnOnce(wasmtime::Error) -> WasmError + '_ {
    move |e| WasmError::Host(format!("{what}: {e:#}"))
}

impl WasmHost {
    /// Builds the engine (with its pooling allocator and epoch ticker), the
    /// linker and the compile cache.
    pub fn new(config: HostConfig) -> Result<Arc<WasmHost>, WasmError> {
        let mut pool = PoolingAllocationConfig::new();
        let n = config.max_instances.max(1);
        pool.total_component_instances(n)
            .total_core_instances(n * 16)
            .total_memories(n * 4)
            .total_tables(n * 8)
            .total_stacks(n)
            .max_core_instances_per_component(64)
            .max_memories_per_component(8)
            .max_tables_per_component(16)
            .max_core_instance_size(8 << 20)
            .max_component_instance_size(1 << 20)
            .table_elements(100_000)
            .max_memory_size(nuon_core::wasm::MAX_MEMORY as usize)
            .max_unused_warm_slots(n.min(8));
        let mut c = Config::new();
        c.wasm_component_model(true)
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&c).map_err(host_err("cannot build the wasm engine"))?;
        let mut linker = Linker::<CallState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(host_err("cannot link WASI"))?;
        bindings::NuonPlugin::add_to_linker::<_, wasmtime::component::HasSelf<CallState>>(
            &mut linker,
            |s| s,
        )
        .map_err(host_err("cannot link the nuon:plugin imports"))?;
        let cache = match &config.cache_dir {
            Some(dir) => Some(CompileCache::open(dir, &engine)?),
            None => None,
        };
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| WasmError::Host(format!("cannot build the HTTP client: {e}")))?;
        let ticker = Ticker::start(&engine)?;
        Ok(Arc::new(WasmHost {
            engine,
            linker,
            cache,
            loaded: Mutex::new(HashMap::new()),
            http,
            ticker,
        }))
    }

    /// Compiles (or finds) the component `bytes`, checks it is a plugin of
    /// the `nuon:plugin` world, pre-instantiates it and reads its `info`.
    /// Nothing of the plugin runs but `info`, with `limits`.
    pub async fn load(
        self: &Arc<Self>,
        bytes: &[u8],
        limits: &Limits,
    ) -> Result<Arc<LoadedPlugin>, WasmError> {
        let started = Instant::now();
        let sha256 = hex::encode(Sha256::digest(bytes));
        if let Some(p) = self.loaded.lock().expect("plugin map").get(&sha256) {
            let mut p = LoadedPlugin::clone_handle(p);
            p.loaded = (LoadedFrom::Memory, started.elapsed());
            return Ok(Arc::new(p));
        }
        check_header(bytes)?;
        let (component, from) = {
            let host = self.clone();
            let bytes = bytes.to_vec();
            let sha = sha256.clone();
            tokio::task::spawn_blocking(move || host.compile(&bytes, &sha))
                .await
                .map_err(|e| WasmError::Host(format!("the compile task failed: {e}")))??
        };
        let pre = self.linker.instantiate_pre(&component).map_err(|e| {
            WasmError::WrongWorld(format!(
                "the component cannot be linked as a nuon plugin: {e:#} (it imports: {})",
                names(
                    component
                        .component_type()
                        .imports(&self.engine)
                        .map(|(n, _)| n)
                )
            ))
        })?;
        let pre = bindings::NuonPluginPre::new(pre).map_err(|e| {
            WasmError::WrongWorld(format!(
                "not a nuon plugin: {e:#}; a plugin exports nuon:plugin/plugin@0.1 (this component exports: {})",
                names(component.component_type().exports(&self.engine).map(|(n, _)| n))
            ))
        })?;
        let mut plugin = LoadedPlugin {
            pre,
            sha256: sha256.clone(),
            info: PluginInfo {
                name: String::new(),
                version: String::new(),
                component_types: Vec::new(),
                config_schema: serde_json::Value::Null,
            },
            loaded: (from, Duration::ZERO),
        };
        let (log, mut lines) = mpsc::unbounded_channel();
        let ctx = CallContext {
            work_dir: std::env::temp_dir(),
            env: Vec::new(),
            allowed_hosts: Vec::new(),
            secrets: BTreeMap::new(),
            limits: limits.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            log,
        };
        let info = match self.call(&plugin, &ctx, Call::Info).await {
            Ok(Reply::Info(i)) => i,
            Ok(_) => unreachable!("info answers info"),
            Err(e) => {
                lines.close();
                return Err(e);
            }
        };
        plugin.info = info;
        plugin.loaded.1 = started.elapsed();
        let plugin = Arc::new(plugin);
        self.loaded
            .lock()
            .expect("plugin map")
            .insert(sha256, plugin.clone());
        Ok(plugin)
    }

    fn compile(&self, bytes: &[u8], sha256: &str) -> Result<(Component, LoadedFrom), WasmError> {
        if let Some(cache) = &self.cache
            && let Some(c) = cache.get(&self.engine, sha256)?
        {
            return Ok((c, LoadedFrom::DiskCache));
        }
        let compiled = self.engine.precompile_component(bytes).map_err(|e| {
            WasmError::NotAComponent(format!("the component does not compile: {e:#}"))
        })?;
        if let Some(cache) = &self.cache {
            cache.put(sha256, &compiled)?;
        }
        let c = cache::deserialize_own(&self.engine, &compiled)?;
        Ok((c, LoadedFrom::Compiled))
    }

    /// Calls the plugin on a fresh instance, within `ctx`'s limits.
    pub async fn call(
        &self,
        plugin: &LoadedPlugin,
        ctx: &CallContext,
        call: Call,
    ) -> Result<Reply, WasmError> {
        let mut store = self.new_store(ctx)?;
        let _ticking = self.ticker.running();
        let result = async {
            let instance = plugin.pre.instantiate_async(&mut store).await?;
            let p = instance.nuon_plugin_plugin();
            Ok::<_, wasmtime::Error>(match call {
                Call::Info => {
                    let i = p.call_info(&mut store).await?;
                    info_of(i).map(Reply::Info)
                }
                Call::Validate(config) => p
                    .call_validate(&mut store, &config)
                    .await?
                    .map(|()| Reply::Done),
                Call::Plan(r, mode) => p.call_plan(&mut store, &r, mode).await?.map(Reply::Plan),
                Call::Apply(r, plan) => p
                    .call_apply(&mut store, &r, &plan)
                    .await?
                    .map(Reply::Applied),
                Call::Destroy(r, plan) => p
                    .call_destroy(&mut store, &r, &plan)
                    .await?
                    .map(|()| Reply::Done),
            })
        }
        .await;
        let s = store.data();
        match result {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(WasmError::Plugin(e)),
            Err(_) if s.limiter.hit => Err(WasmError::Memory(s.limiter.limit)),
            Err(_) if s.stopped_by == Some(StopCause::Deadline) => {
                Err(WasmError::Deadline(s.timeout))
            }
            Err(_) if s.stopped_by == Some(StopCause::Stop) => {
                Err(WasmError::Stopped("the job was stopped".into()))
            }
            Err(e) => Err(WasmError::Trap(trap_text(&e))),
        }
    }

    /// A live instance of `plugin`, kept until the returned value is
    /// dropped: for measuring what an instance costs (benchmarks).
    #[doc(hidden)]
    pub async fn hold_instance(
        &self,
        plugin: &LoadedPlugin,
        ctx: &CallContext,
    ) -> Result<Box<dyn std::any::Any + Send>, WasmError> {
        let mut store = self.new_store(ctx)?;
        let _ticking = self.ticker.running();
        let instance = plugin
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| WasmError::Trap(trap_text(&e)))?;
        Ok(Box::new((store, instance)))
    }

    /// A fresh store for one call: WASI, limits, deadline.
    fn new_store(&self, ctx: &CallContext) -> Result<Store<CallState>, WasmError> {
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(imports::LogPipe::new(ctx.log.clone(), "stdout"))
            .stderr(imports::LogPipe::new(ctx.log.clone(), "stderr"))
            .envs(&ctx.env)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        wasi.preopened_dir(&ctx.work_dir, ".", FsPerms::ReadWrite)
            .map_err(|e| {
                WasmError::Host(format!(
                    "cannot open the work directory {}: {e:#}",
                    ctx.work_dir.display()
                ))
            })?;
        let state = CallState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            http: self.http.clone(),
            allowed_hosts: ctx.allowed_hosts.clone(),
            secrets: ctx.secrets.clone(),
            log: ctx.log.clone(),
            stop: ctx.stop.clone(),
            deadline: Instant::now() + ctx.limits.timeout,
            timeout: ctx.limits.timeout,
            limiter: MemoryLimiter {
                limit: ctx.limits.memory,
                used: 0,
                hit: false,
            },
            stopped_by: None,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|mut cx| {
            let s = cx.data_mut();
            if s.stop.load(Ordering::Relaxed) {
                s.stopped_by = Some(StopCause::Stop);
                return Err(wasmtime::format_err!("stopped"));
            }
            if Instant::now() >= s.deadline {
                s.stopped_by = Some(StopCause::Deadline);
                return Err(wasmtime::format_err!("deadline"));
            }
            Ok(wasmtime::UpdateDeadline::Yield(1))
        });
        Ok(store)
    }

    /// The engine (for benchmarks and tests).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

impl LoadedPlugin {
    fn clone_handle(p: &LoadedPlugin) -> LoadedPlugin {
        LoadedPlugin {
            pre: p.pre.clone(),
            sha256: p.sha256.clone(),
            info: p.info.clone(),
            loaded: p.loaded,
        }
    }
}

/// The trap's message and the guest's frames, briefly.
fn trap_text(e: &wasmtime::Error) -> String {
    let text = format!("{e:#}");
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("trap").to_owned();
    let frames: Vec<&str> = lines.filter(|l| !l.trim().is_empty()).take(6).collect();
    if frames.is_empty() {
        first
    } else {
        format!("{first} ({})", frames.join("; ").trim())
    }
}

fn info_of(i: wit::PluginInfo) -> Result<PluginInfo, PluginError> {
    let schema = match serde_json::from_str(&i.config_schema) {
        Ok(s) => s,
        Err(e) => {
            return Err(PluginError::Permanent(format!(
                "its config schema is not JSON: {e}"
            )));
        }
    };
    Ok(PluginInfo {
        name: i.name,
        version: i.version,
        component_types: i.component_types,
        config_schema: schema,
    })
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = it.collect();
    if v.is_empty() {
        "nothing".into()
    } else {
        v.join(", ")
    }
}

/// Tells a core module, a component and anything else apart by their
/// header, for a clear error before compiling.
fn check_header(bytes: &[u8]) -> Result<(), WasmError> {
    match bytes.get(..8) {
        Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => Err(WasmError::NotAComponent(
            "this is a core WebAssembly module, not a component: build the plugin for wasm32-wasip2 (or wrap the module with `wasm-tools component new`)".into(),
        )),
        Some([0, b'a', b's', b'm', _, _, 1, 0]) => Ok(()),
        Some([0, b'a', b's', b'm', ..]) => Err(WasmError::NotAComponent(
            "this WebAssembly binary has an unknown version: build the plugin for wasm32-wasip2".into(),
        )),
        _ => Err(WasmError::NotAComponent(format!(
            "this is not a WebAssembly component (it starts with {:02x?}): a plugin is the .wasm that `cargo build --target wasm32-wasip2` makes",
            &bytes[..bytes.len().min(8)]
        ))),
    }
}

/// Where the host keeps its compile cache under a runner's work directory.
pub fn default_cache_dir(work_dir: &Path) -> PathBuf {
    work_dir.join("wasm-cache")
}
