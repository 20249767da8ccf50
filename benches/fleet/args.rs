//! The fleet bench's flags (see the top of `benches/fleet.rs`).

use anyhow::{Context, Result, bail};

/// What the flags ask for.
pub(super) struct Args {
    pub(super) sections: Vec<String>,
    pub(super) runners: usize,
    pub(super) rate: f64,
    pub(super) secs: u64,
    pub(super) jobs: usize,
    pub(super) installs: usize,
    pub(super) max_parallel: u32,
    pub(super) lines: u64,
    /// `rollout` on PostgreSQL with two replicas.
    pub(super) pg: bool,
    /// `rollout` to the installs this selector picks.
    pub(super) to: String,
    /// `rollout --pg`: PostgreSQL's statements of the parked window and of
    /// the rollout, counted (`pg_stat_statements`).
    pub(super) statements: bool,
    /// `rollout --pg`: the replicas on the first CPU, PostgreSQL and the
    /// simulated runners on the others (as in production, where the
    /// database is another host): the replicas' CPU without PostgreSQL
    /// taking their core at each round trip.
    pub(super) pin: bool,
}

/// The flags of this run, over the defaults.
pub(super) fn args() -> Result<Args> {
    let mut a = Args {
        sections: Vec::new(),
        runners: 10_000,
        rate: 200.0,
        secs: 30,
        jobs: 12_000,
        installs: 1_000,
        max_parallel: 50,
        lines: 1_000_000,
        pg: false,
        to: "tier=prod".to_owned(),
        statements: false,
        pin: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--bench" => {}
            "--runners" => a.runners = value("--runners")?.parse()?,
            "--rate" => a.rate = value("--rate")?.parse()?,
            "--secs" => a.secs = value("--secs")?.parse()?,
            "--jobs" => a.jobs = value("--jobs")?.parse()?,
            "--installs" => a.installs = value("--installs")?.parse()?,
            "--max-parallel" => a.max_parallel = value("--max-parallel")?.parse()?,
            "--lines" => a.lines = value("--lines")?.parse()?,
            "--pg" => a.pg = true,
            "--to" => a.to = value("--to")?,
            "--statements" => a.statements = true,
            "--pin" => a.pin = true,
            s if s.starts_with("--") => bail!("unknown flag {s}; see the top of benches/fleet.rs"),
            s => a.sections.push(s.to_owned()),
        }
    }
    if a.statements && !a.pg {
        bail!("--statements counts PostgreSQL's statements: pass --pg too");
    }
    if a.pin && !a.pg {
        bail!("--pin puts the replicas and PostgreSQL on different CPUs: pass --pg too");
    }
    Ok(a)
}
