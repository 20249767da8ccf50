//! The statements of a new workflow: the checks it is started against, its
//! row, its steps and what it starts, and the workflow as it reads once
//! stored.

use super::super::rollouts::rollout_doc;
use super::super::rows::{Cells, Record};
use super::super::sql::Stmt;
use super::*;

/// What a new workflow is checked against in its transaction: whether its
/// install is the org's, whether its cron run was stored already, and the
/// version of the rollout it starts when that rollout is the org's.
pub(super) struct StartChecks {
    in_org: bool,
    fired: bool,
    rollout_version: Option<i64>,
}

impl Record for StartChecks {
    /// The first two; parameters: the install, the org, the cron run's
    /// action and time.
    const COLUMNS: &'static str = "EXISTS (SELECT 1 FROM installs WHERE id = $1 AND org_id = $2), \
         EXISTS (SELECT 1 FROM cron_fires WHERE install_id = $1 AND action = $3 AND fire_at = $4)";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(StartChecks {
            in_org: r.flag(0)?,
            fired: r.flag(1)?,
            rollout_version: r.opt_int(2)?,
        })
    }
}

/// The locked read of a new workflow's [`StartChecks`]: the row of the
/// rollout it starts (so that no other save of it comes between the check
/// and the save), else its install's.
pub(super) fn start_checks(org: &OrgId, new: &NewWorkflow) -> Stmt {
    let (action, at) = new.fire.as_ref().map(|(a, t)| (a.as_str(), *t)).unzip();
    let mut values = args![new.install_id.as_str(), org.as_str(), action, Arg::Int(at)];
    let sql = match &new.rollout {
        Some(r) => {
            values.push(Arg::from(r.id().as_str()));
            format!(
                "SELECT {}, CASE WHEN org_id = $2 THEN version END FROM rollouts WHERE id = $5",
                StartChecks::COLUMNS
            )
        }
        None => format!(
            "SELECT {}, NULL FROM installs WHERE id = $1",
            StartChecks::COLUMNS
        ),
    };
    Stmt::new(sql, values)
}

/// Refuses a new workflow as its checks say (`None`: no row to read them
/// from): an install not the org's, its cron run stored already, its
/// rollout saved since it was read.
pub(super) fn check_start(found: Option<StartChecks>, new: &NewWorkflow) -> Result<()> {
    let no_install = || StoreError::Invalid(format!("no install {}", new.install_id));
    let Some(c) = found else {
        return Err(match &new.rollout {
            Some(r) => stale_rollout(r.id()),
            None => no_install(),
        });
    };
    if !c.in_org {
        return Err(no_install());
    }
    if let Some((action, at)) = &new.fire
        && c.fired
    {
        return Err(already_started(action, *at));
    }
    match &new.rollout {
        Some(r) if c.rollout_version != Some(r.head.version as i64) => Err(stale_rollout(r.id())),
        _ => Ok(()),
    }
}

/// `e`, but the insert of a cron run that found it stored (by another
/// leader, since the check) is `already_started`, as the check says.
pub(super) fn fired_twice(e: StoreError, fire: Option<&(String, i64)>) -> StoreError {
    let Some((action, at)) = fire else {
        return e;
    };
    let started = already_started(action, *at);
    let twice = matches!(
        &e,
        StoreError::Conflict { code: ErrorCode::NameTaken, message, .. }
            if *message == started.to_string()
    );
    if twice { started } else { e }
}

/// The statements that store a new workflow, pending, with its steps, and
/// what goes with it: its cron run, its rollout saved, its install's config
/// version, its install's summary marked stale.
pub(super) fn create_stmts(org: &OrgId, new: &NewWorkflow, now: i64) -> Result<Vec<Stmt>> {
    let mut stmts = Vec::new();
    if let Some((action, at)) = &new.fire {
        stmts.push(
            Stmt::new(
                "INSERT INTO cron_fires (install_id, action, fire_at, workflow_id) \
                 VALUES ($1, $2, $3, $4)",
                args![
                    new.install_id.as_str(),
                    action.as_str(),
                    *at,
                    new.id.as_str()
                ],
            )
            .taken(already_started(action, *at).to_string()),
        );
    }
    if let Some(r) = &new.rollout {
        stmts.extend(save_stmts(org, r, &[])?);
    }
    stmts.push(Stmt::new(
        "UPDATE installs SET config_version = $2 WHERE id = $1 AND config_version != $2",
        args![new.install_id.as_str(), new.config_version],
    ));
    stmts.push(Stmt::new(
        "INSERT INTO workflows (id, org_id, install_id, kind, status, config_version, created_at, \
         component, inputs, trigger, release_id) \
         VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8, $9, $10)",
        args![
            new.id.as_str(),
            org.as_str(),
            new.install_id.as_str(),
            enum_str(&new.kind),
            new.config_version,
            now,
            new.component.as_deref(),
            inputs_column(&new.inputs),
            new.trigger.as_deref(),
            new.release.as_ref().map(|r| r.as_str()),
        ],
    ));
    let steps: Vec<(usize, &PlannedStep)> = new.steps.iter().enumerate().collect();
    stmts.extend(
        steps
            .chunks(STEPS_PER_INSERT)
            .map(|chunk| insert_steps(&new.id, chunk)),
    );
    stmts.push(Stmt::new(
        summary_sql::BUMP_INSTALL,
        args![new.install_id.as_str()],
    ));
    Ok(stmts)
}

/// The arguments of a statement written in parts: each placeholder is
/// numbered as its argument is pushed.
#[derive(Default)]
struct Params(Vec<Arg>);

impl Params {
    /// `$n` of `a`.
    fn push(&mut self, a: impl Into<Arg>) -> String {
        self.0.push(a.into());
        format!("${}", self.0.len())
    }

    /// `(…), (…)`: one parenthesized list of placeholders a row.
    fn rows<R>(
        &mut self,
        rows: impl IntoIterator<Item = R>,
        row: impl Fn(&mut Self, R) -> Vec<String>,
    ) -> String {
        let rows: Vec<String> = rows
            .into_iter()
            .map(|r| format!("({})", row(self, r).join(", ")))
            .collect();
        rows.join(", ")
    }
}

/// Rows of steps and of a rollout's installs that [`create_in_one`]
/// writes at most (9 and 3 arguments each: well under PostgreSQL's 65,535);
/// more go the way of [`create_stmts`].
pub(super) const IN_ONE_AT_MOST: usize = 1000;

/// A new workflow on PostgreSQL in one statement (one round trip, no
/// `BEGIN`/`COMMIT`): what [`start_checks`] reads and [`create_stmts`]
/// writes, every write gated on the checks. It answers whether the install
/// is the org's and whether the workflow was stored: when the install is
/// the org's and it was not, the rollout it starts was saved since it was
/// read (its version is checked and moved in the statement, its row locked
/// by that update). A cron run stored already breaks the statement on its
/// key (nothing of it is kept) and reads as `already_started`. Without a
/// rollout the install's row is locked, as the transaction's read locks it.
pub(super) fn create_in_one(org: &OrgId, new: &NewWorkflow, now: i64) -> Result<Stmt> {
    let mut p = Params::default();
    let (install, org_p) = (p.push(new.install_id.as_str()), p.push(org.as_str()));
    let id = p.push(new.id.as_str());
    let version = p.push(new.config_version);
    let mut parts = vec![format!(
        "ins AS (SELECT 1 FROM installs WHERE id = {install} AND org_id = {org_p}{})",
        if new.rollout.is_some() {
            ""
        } else {
            " FOR UPDATE"
        }
    )];
    let go = match &new.rollout {
        Some(r) => {
            let (doc, status) = (
                p.push(rollout_doc(&r.head)?),
                p.push(r.head.status.as_str()),
            );
            let (rid, at) = (p.push(r.id().as_str()), p.push(r.head.version as i64));
            parts.push(format!(
                "ro AS (UPDATE rollouts SET doc = {doc}, status = {status}, version = version + 1 \
                 WHERE id = {rid} AND org_id = {org_p} AND version = {at} \
                 AND EXISTS (SELECT 1 FROM ins) RETURNING 1)"
            ));
            parts.push("go AS (SELECT 1 FROM ro)".to_owned());
            if !r.targets.is_empty() {
                let mut docs = Vec::with_capacity(r.targets.len());
                for (i, t) in &r.targets {
                    docs.push((
                        *i as i64,
                        serde_json::to_string(t).map_err(|e| StoreError::Invalid(e.to_string()))?,
                    ));
                }
                let rows = p.rows(docs, |p, (i, doc)| {
                    vec![rid.clone(), p.push(i), p.push(doc)]
                });
                parts.push(format!(
                    "targets AS (INSERT INTO rollout_targets (rollout_id, idx, doc) \
                     SELECT v.* FROM (VALUES {rows}) AS v(rollout_id, idx, doc) \
                     WHERE EXISTS (SELECT 1 FROM go) \
                     ON CONFLICT (rollout_id, idx) DO UPDATE SET doc = excluded.doc)"
                ));
            }
            "go"
        }
        None => "ins",
    };
    if let Some((action, at)) = &new.fire {
        let (action, at) = (p.push(action.as_str()), p.push(*at));
        parts.push(format!(
            "fired AS (INSERT INTO cron_fires (install_id, action, fire_at, workflow_id) \
             SELECT {install}, {action}, {at}, {id} FROM {go})"
        ));
    }
    parts.push(format!(
        "cv AS (UPDATE installs SET config_version = {version} WHERE id = {install} \
         AND config_version != {version} AND EXISTS (SELECT 1 FROM {go}))"
    ));
    let head = [
        p.push(enum_str(&new.kind)),
        p.push(now),
        p.push(new.component.as_deref()),
        p.push(inputs_column(&new.inputs)),
        p.push(new.trigger.as_deref()),
        p.push(new.release.as_ref().map(|r| r.as_str())),
    ];
    parts.push(format!(
        "wf AS (INSERT INTO workflows (id, org_id, install_id, kind, status, config_version, \
         created_at, component, inputs, trigger, release_id) \
         SELECT {id}, {org_p}, {install}, {}, 'pending', {version}, {} FROM {go})",
        head[0],
        head[1..].join(", ")
    ));
    let steps = p.rows(new.steps.iter().enumerate(), |p, (i, s)| {
        let (status, outputs) = planned_status(s);
        vec![
            id.clone(),
            p.push(i as i64),
            p.push(s.name.as_str()),
            p.push(enum_str(&s.kind)),
            p.push(s.target.as_deref()),
            format!("{} <> 0", p.push(i64::from(s.needs_approval))),
            p.push(status),
            p.push(s.skipped.as_deref()),
            p.push(outputs),
        ]
    });
    parts.push(format!(
        "steps AS (INSERT INTO workflow_steps (workflow_id, idx, name, kind, target, \
         needs_approval, status, reason, outputs) \
         SELECT v.* FROM (VALUES {steps}) AS v WHERE EXISTS (SELECT 1 FROM {go}))"
    ));
    parts.push(format!(
        "bump AS (INSERT INTO install_summaries (install_id, rev) SELECT {install}, 1 FROM {go} \
         ON CONFLICT (install_id) DO UPDATE SET rev = install_summaries.rev + 1)"
    ));
    let sql = format!(
        "WITH {} SELECT EXISTS (SELECT 1 FROM ins), EXISTS (SELECT 1 FROM {go})",
        parts.join(", ")
    );
    let stmt = Stmt::new(sql, p.0);
    Ok(match &new.fire {
        Some((action, at)) => stmt.taken(already_started(action, *at).to_string()),
        None => stmt,
    })
}

/// What [`create_in_one`] answers: whether the install is the org's, and
/// whether the workflow was stored.
pub(super) struct Created(pub(super) bool, pub(super) bool);

impl Record for Created {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(Created(r.flag(0)?, r.flag(1)?))
    }
}

/// The refusal [`create_in_one`]'s answer says, if any.
pub(super) fn check_created(c: Option<Created>, new: &NewWorkflow) -> Result<()> {
    match (c, &new.rollout) {
        (Some(Created(_, true)), _) => Ok(()),
        (Some(Created(true, false)), Some(r)) => Err(stale_rollout(r.id())),
        _ => Err(StoreError::Invalid(format!(
            "no install {}",
            new.install_id
        ))),
    }
}

/// Steps one insert holds at most: 9 values each, well under either
/// database's bound on a statement's parameters.
const STEPS_PER_INSERT: usize = 1000;

/// Stores planned steps (each with its index), in one statement. A step's
/// `needs_approval` is PostgreSQL's `BOOLEAN` and SQLite's 0/1: the SQL
/// makes it of an integer.
fn insert_steps(workflow: &WorkflowId, steps: &[(usize, &PlannedStep)]) -> Stmt {
    let mut sql = String::from(
        "INSERT INTO workflow_steps (workflow_id, idx, name, kind, target, needs_approval, \
         status, reason, outputs) VALUES ",
    );
    let mut all = Vec::with_capacity(steps.len() * 9);
    for (row, (i, s)) in steps.iter().enumerate() {
        let (status, outputs) = planned_status(s);
        let n = row * 9;
        if row > 0 {
            sql.push_str(", ");
        }
        let marks: Vec<String> = (1..=9)
            .map(|k| match k {
                6 => format!("${} <> 0", n + k),
                _ => format!("${}", n + k),
            })
            .collect();
        sql.push_str(&format!("({})", marks.join(", ")));
        all.extend(args![
            workflow.as_str(),
            *i as i64,
            s.name.as_str(),
            enum_str(&s.kind),
            s.target.as_deref(),
            i64::from(s.needs_approval),
            status,
            s.skipped.as_deref(),
            outputs,
        ]);
    }
    Stmt::new(sql, all)
}

/// The new workflow as its rows read once stored.
pub(super) fn created(new: &NewWorkflow, now: i64) -> Result<Workflow> {
    let steps = new.steps.iter().enumerate();
    let steps = steps
        .map(|(i, s)| planned_step(i, s))
        .collect::<Result<Vec<_>>>()?;
    let head = WorkflowHead {
        install_id: new.install_id.clone(),
        kind: new.kind,
        status: WorkflowStatus::Pending,
        config_version: new.config_version,
        created_at_ms: now,
        finished_at_ms: None,
        component: new.component.clone(),
        inputs: new.inputs.clone(),
        trigger: new.trigger.clone(),
        release_id: new.release.clone(),
    };
    Ok(head.with_steps(new.id.clone(), steps))
}

/// A planned step as its row reads once stored ([`insert_step`]).
fn planned_step(i: usize, s: &PlannedStep) -> Result<Step> {
    let (status, outputs) = planned_status(s);
    Ok(Step {
        index: i as u32,
        name: s.name.clone(),
        kind: s.kind,
        target: s.target.clone(),
        needs_approval: s.needs_approval,
        status: status.parse().map_err(corrupt)?,
        job_id: None,
        approved_at_ms: None,
        reason: s.skipped.clone(),
        outputs: json_or_null(outputs),
        attempts: Vec::new(),
        approved_by: None,
    })
}
