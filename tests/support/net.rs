//! Links that misbehave, for runners on real networks.
//!
//! - [`Netns`]: a host of the runner's own, a network namespace joined to
//!   this one by a veth pair; iptables inside it drops a share of the
//!   link's packets ([`Netns::loss`]) or all of them ([`Netns::partition`]).
//!   A process started by [`Netns::ours`] reaches nothing but the host end
//!   of the pair (no route, no loopback of the host): whatever it says to
//!   the control plane goes through the link and the proxies below.
//! - [`Link`]: a TCP proxy on the host end (toxiproxy's model, since this
//!   kernel has no `netem`): each way delayed by a latency, order kept, and
//!   every connection reset a time after it was made (a NAT's timeout).
//! - [`ConnectProxy`]: an HTTP `CONNECT` proxy, as `HTTPS_PROXY` names one,
//!   that records what it tunnelled.
//!
//! Everything a test makes is removed when it is dropped; namespaces need
//! root, `ip` and `iptables`, and are skipped loudly without them (a
//! failure under `NUON_TEST_REQUIRE=all`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::*;

/// A network namespace with a veth pair to the host: the runner's host.
pub struct Netns {
    pub name: String,
    veth: String,
    ns_veth: String,
    /// The host's end of the pair: what the namespace can reach.
    pub host_ip: Ipv4Addr,
    /// The namespace's end.
    pub ns_ip: Ipv4Addr,
}

fn ip(args: &[&str]) -> Result<()> {
    run("ip", args)
}

fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("run {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Netns {
    /// A new namespace and its link, or `None` (skipped loudly) where this
    /// machine cannot make one (no `ip` or `iptables`, not root).
    pub fn create(what_for: &str) -> Option<Netns> {
        if !have_tool("ip", what_for) || !have_tool("iptables", what_for) {
            return None;
        }
        match Self::try_create() {
            Ok(ns) => Some(ns),
            Err(e) => {
                let msg = format!("cannot make a network namespace ({e:#}): cannot {what_for}");
                assert!(!require_all(), "{msg} (NUON_TEST_REQUIRE=all)");
                eprintln!("SKIPPED: {msg}");
                None
            }
        }
    }

    fn try_create() -> Result<Netns> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed) % 250;
        let pid = std::process::id() % 100_000;
        let subnet = 200 + (std::process::id() % 50) as u8;
        let ns = Netns {
            name: format!("nuon{pid}x{n}"),
            veth: format!("vh{pid}x{n}"),
            ns_veth: format!("vn{pid}x{n}"),
            host_ip: Ipv4Addr::new(10, subnet, n as u8, 1),
            ns_ip: Ipv4Addr::new(10, subnet, n as u8, 2),
        };
        // Left by a test of an earlier process of the same pid, killed.
        let _ = ip(&["link", "del", &ns.veth]);
        let _ = ip(&["netns", "del", &ns.name]);
        ip(&["netns", "add", &ns.name])?;
        let host = format!("{}/30", ns.host_ip);
        let inner = format!("{}/30", ns.ns_ip);
        let steps: [&[&str]; 6] = [
            &[
                "link",
                "add",
                &ns.veth,
                "type",
                "veth",
                "peer",
                "name",
                &ns.ns_veth,
            ],
            &["link", "set", &ns.ns_veth, "netns", &ns.name],
            &["addr", "add", &host, "dev", &ns.veth],
            &["link", "set", &ns.veth, "up"],
            &["-n", &ns.name, "addr", "add", &inner, "dev", &ns.ns_veth],
            &["-n", &ns.name, "link", "set", &ns.ns_veth, "up"],
        ];
        for step in steps {
            ip(step)?;
        }
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// One of our binaries, run inside the namespace (as [`ours`]).
    pub fn ours(&self, name: &str) -> Command {
        ours_in(&self.name, name)
    }

    fn iptables(&self, args: &[&str]) -> Result<()> {
        let mut all = vec!["netns", "exec", &self.name, "iptables", "-w"];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Drops each packet crossing the link, either way, with probability
    /// `p` (0 takes the loss away).
    pub fn loss(&self, p: f64) -> Result<()> {
        let jumps = [("INPUT", "-i"), ("OUTPUT", "-o")].map(|(chain, dir)| {
            let rule = ["-m", "comment", "--comment", "nuon-loss", "-j", "NUON-LOSS"];
            let mut jump = vec![chain, dir, self.ns_veth.as_str()];
            jump.extend_from_slice(&rule);
            jump
        });
        // Take the last loss away (none: nothing to take).
        for jump in &jumps {
            let delete: Vec<&str> = std::iter::once("-D").chain(jump.iter().copied()).collect();
            while self.iptables(&delete).is_ok() {}
        }
        let _ = self.iptables(&["-F", "NUON-LOSS"]);
        let _ = self.iptables(&["-X", "NUON-LOSS"]);
        if p <= 0.0 {
            return Ok(());
        }
        let p = format!("{p}");
        self.iptables(&["-N", "NUON-LOSS"])?;
        let drop = [
            "-m",
            "statistic",
            "--mode",
            "random",
            "--probability",
            &p,
            "-j",
            "DROP",
        ];
        let mut add = vec!["-A", "NUON-LOSS"];
        add.extend_from_slice(&drop);
        self.iptables(&add)?;
        for jump in &jumps {
            let add: Vec<&str> = std::iter::once("-A").chain(jump.iter().copied()).collect();
            self.iptables(&add)?;
        }
        Ok(())
    }

    /// Cuts the link (every packet either way dropped, silently: the ends
    /// see nothing but silence) or gives it back.
    pub fn partition(&self, on: bool) -> Result<()> {
        let rules: [[&str; 4]; 2] = [
            ["INPUT", "-i", &self.ns_veth, "DROP"],
            ["OUTPUT", "-o", &self.ns_veth, "DROP"],
        ];
        for [chain, dir, dev, target] in rules {
            let rule = [
                "-m",
                "comment",
                "--comment",
                "nuon-partition",
                dir,
                dev,
                "-j",
                target,
            ];
            if on {
                let mut args = vec!["-I", chain, "1"];
                args.extend_from_slice(&rule);
                self.iptables(&args)?;
            } else {
                let mut args = vec!["-D", chain];
                args.extend_from_slice(&rule);
                while self.iptables(&args).is_ok() {}
            }
        }
        Ok(())
    }
}

/// One of our binaries, run inside the network namespace `netns` (as
/// [`ours`]).
pub fn ours_in(netns: &str, name: &str) -> Command {
    let mut cmd = ours_via(Command::new("ip"));
    cmd.args(["netns", "exec", netns]).arg(bin(name));
    cmd
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.veth]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// What a [`Link`] does to the connections it carries.
#[derive(Default)]
struct LinkState {
    upstream: Mutex<Option<SocketAddr>>,
    /// Added to each way.
    one_way: Mutex<Duration>,
    /// Every connection is reset this long after it was made.
    cut_after: Mutex<Option<Duration>>,
    connections: AtomicU64,
    cuts: AtomicU64,
}

/// A TCP proxy that delays and cuts what it carries.
pub struct Link {
    pub addr: SocketAddr,
    state: Arc<LinkState>,
    task: JoinHandle<()>,
}

impl Link {
    /// Listens on `ip` (a free port); forwards nowhere until [`Self::to`].
    pub fn bind(ip: impl Into<IpAddr>) -> Result<Link> {
        let state = Arc::new(LinkState::default());
        let shared = state.clone();
        let (addr, task) = serve(ip.into(), move |client| carry(client, shared.clone()))?;
        Ok(Link { addr, state, task })
    }

    /// `http://ADDR`: the link's end, as a runner is given it.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Forwards to the address of `url` (`http://127.0.0.1:PORT`).
    pub fn to(&self, url: &str) -> Result<()> {
        let addr = url.split_once("://").map_or(url, |(_, a)| a);
        let addr = addr
            .trim_end_matches('/')
            .parse()
            .context("upstream address")?;
        *lock(&self.state.upstream) = Some(addr);
        Ok(())
    }

    /// Each way delayed by `rtt / 2` from now (connections made before too).
    pub fn latency(&self, rtt: Duration) {
        *lock(&self.state.one_way) = rtt / 2;
    }

    /// Connections made from now are reset `after` they were made.
    pub fn cut_after(&self, after: Option<Duration>) {
        *lock(&self.state.cut_after) = after;
    }

    /// Connections made so far.
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::Relaxed)
    }

    /// Connections reset by [`Self::cut_after`] so far.
    pub fn cuts(&self) -> u64 {
        self.state.cuts.load(Ordering::Relaxed)
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // The accept loop owns the connections' tasks: all end with it.
        self.task.abort();
    }
}

/// Listens on `ip` (a free port) and hands each connection to `each`, on
/// the shared runtime; aborting the task ends every connection's too.
fn serve<F, Fut>(ip: IpAddr, each: F) -> Result<(SocketAddr, JoinHandle<()>)>
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = rt().block_on(TcpListener::bind((ip, 0)))?;
    let addr = listener.local_addr()?;
    let task = rt().spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((client, _)) = accepted else { continue };
                    conns.spawn(each(client));
                }
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    });
    Ok((addr, task))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn carry(client: TcpStream, state: Arc<LinkState>) {
    let Some(upstream) = *lock(&state.upstream) else {
        return;
    };
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    state.connections.fetch_add(1, Ordering::Relaxed);
    let cut = *lock(&state.cut_after);
    for s in [&client, &server] {
        let _ = s.set_nodelay(true);
        if cut.is_some() {
            // Closed by the cut: a reset, as a NAT's forgotten mapping
            // answers (a clean close would look like the peer's own).
            let _ = s.set_zero_linger();
        }
    }
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let both = async {
        tokio::join!(delayed(cr, sw, &state), delayed(sr, cw, &state));
    };
    match cut {
        Some(after) => {
            if tokio::time::timeout(after, both).await.is_err() {
                state.cuts.fetch_add(1, Ordering::Relaxed);
            }
        }
        None => both.await,
    }
}

/// Copies `from` to `to`, each chunk written one way's latency after it was
/// read, in order; an end of stream passes the same way.
async fn delayed(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, state: &LinkState) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let read = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = from.read(&mut buf).await.unwrap_or(0);
            let due = tokio::time::Instant::now() + *lock(&state.one_way);
            // An empty chunk is the end of the stream.
            if tx.send((due, buf[..n].to_vec())).is_err() || n == 0 {
                break;
            }
        }
    };
    let write = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if chunk.is_empty() {
                let _ = to.shutdown().await;
                break;
            }
            if to.write_all(&chunk).await.is_err() {
                break;
            }
        }
    };
    tokio::join!(read, write);
}

/// An HTTP `CONNECT` proxy: each tunnel it opens is recorded.
pub struct ConnectProxy {
    pub addr: SocketAddr,
    tunnels: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl ConnectProxy {
    /// Listens on `ip` (a free port).
    pub fn start(ip: impl Into<IpAddr>) -> Result<ConnectProxy> {
        let tunnels = Arc::new(Mutex::new(Vec::new()));
        let seen = tunnels.clone();
        let (addr, task) = serve(ip.into(), move |client| tunnel(client, seen.clone()))?;
        Ok(ConnectProxy {
            addr,
            tunnels,
            task,
        })
    }

    /// `http://ADDR`, as `HTTPS_PROXY` names it.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The `host:port` of each tunnel opened so far.
    pub fn tunnels(&self) -> Vec<String> {
        lock(&self.tunnels).clone()
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn tunnel(mut client: TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    // The request's head, at most 8 KiB.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 8192 || client.read(&mut byte).await.unwrap_or(0) == 0 {
            return;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut words = head.split_whitespace();
    let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
        let _ = client
            .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            .await;
        return;
    };
    let target = target.to_owned();
    let Ok(mut server) = TcpStream::connect(target.as_str()).await else {
        let _ = client
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            .await;
        return;
    };
    lock(&seen).push(target);
    if client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await
        .is_ok()
    {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
    }
}
