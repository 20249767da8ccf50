//! The statements of a workflow's writes, and of its install's summary
//! cache: PostgreSQL's each in one statement where SQLite takes two.

use super::super::rows::Dialect;
use super::super::sql::{Arg, Stmt, args};
use super::super::*;
use nuon_core::model::InstallState;
use nuon_core::now_ms;

/// The statements of the summary cache.
pub(super) mod summary_sql {
    /// Marks an install's summary stale (`$1`: the install).
    pub(in crate::store) const BUMP_INSTALL: &str = "INSERT INTO install_summaries (install_id, rev) VALUES ($1, 1) \
         ON CONFLICT (install_id) DO UPDATE SET rev = install_summaries.rev + 1";
    /// Marks the summary of a workflow's install stale (`$1`: the workflow).
    pub(in crate::store) const BUMP_WORKFLOW: &str = "INSERT INTO install_summaries (install_id, rev) \
         SELECT install_id, 1 FROM workflows WHERE id = $1 \
         ON CONFLICT (install_id) DO UPDATE SET rev = install_summaries.rev + 1";
    /// Saves summaries, each made at revision `$2` (`$1` the install, `$3`
    /// its brief, `$4` the whole, a row of `(ROWS)` each), each only while
    /// that is still its install's revision.
    pub(in crate::store) const SAVE: &str = "INSERT INTO install_summaries (install_id, rev, summary_rev, brief, summary) \
         VALUES ROWS \
         ON CONFLICT (install_id) DO UPDATE SET summary_rev = excluded.summary_rev, \
         brief = excluded.brief, summary = excluded.summary \
         WHERE install_summaries.rev = excluded.rev";
}

/// Summaries a statement saves at most (four arguments each).
const SAVED_AT_ONCE: usize = 500;

/// The statements that save summaries (`install`, the revision each was
/// made at, the summary): [`summary_sql::SAVE`], [`SAVED_AT_ONCE`] a
/// statement.
pub(super) fn save_summaries(made: &[(InstallId, i64, SummaryText)]) -> Vec<Stmt> {
    made.chunks(SAVED_AT_ONCE)
        .map(|chunk| {
            let mut args = Vec::with_capacity(chunk.len() * 4);
            let mut rows = Vec::with_capacity(chunk.len());
            for (install, rev, text) in chunk {
                let n = args.len();
                args.extend(args![
                    install.as_str(),
                    *rev,
                    text.brief.as_str(),
                    text.full.as_str()
                ]);
                rows.push(format!(
                    "(${}, ${}, ${}, ${}, ${})",
                    n + 1,
                    n + 2,
                    n + 2,
                    n + 3,
                    n + 4
                ));
            }
            Stmt::new(summary_sql::SAVE.replace("ROWS", &rows.join(", ")), args)
        })
        .collect()
}

/// Changes a step's row as `u` says, when the workflow is the org's.
/// `approved` and `clear_job` are integers (1 true, 0 false, NULL none).
pub(super) fn update_step_stmt(org: &OrgId, id: &WorkflowId, index: u32, u: &StepUpdate) -> Stmt {
    Stmt::new(
        "UPDATE workflow_steps SET status = $4, reason = $5, \
         outputs = COALESCE($6, outputs), \
         approved_at = CASE $7 WHEN 1 THEN $8 WHEN 0 THEN NULL ELSE approved_at END, \
         approved_by = CASE $7 WHEN 1 THEN $11 WHEN 0 THEN NULL ELSE approved_by END, \
         job_id = CASE $9 WHEN 1 THEN NULL ELSE job_id END, \
         attempts = COALESCE($10, attempts) \
         WHERE workflow_id = $1 AND idx = $3 \
         AND EXISTS (SELECT 1 FROM workflows w WHERE w.id = $1 AND w.org_id = $2)",
        args![
            id.as_str(),
            org.as_str(),
            index,
            u.status.as_str(),
            u.reason.as_deref(),
            u.outputs_json.as_deref(),
            Arg::Int(u.approved.map(i64::from)),
            now_ms(),
            i64::from(u.clear_job),
            u.attempts_json(),
            u.approved_by.as_deref(),
        ],
    )
}

/// Marks the summary of a workflow's install stale.
pub(super) fn bump(workflow: &WorkflowId) -> Stmt {
    Stmt::new(summary_sql::BUMP_WORKFLOW, args![workflow.as_str()])
}

/// `write` (whose `$1` is the workflow `workflow`), then the bump of its
/// install's summary when it changed a row. PostgreSQL: one statement (one
/// round trip, atomic without a transaction of its own; it changed a row
/// when it bumped one); SQLite, which has no writes in `WITH`: the two.
pub(super) fn bumped(dialect: Dialect, write: Stmt, workflow: &WorkflowId) -> Vec<Stmt> {
    bumped_with(dialect, write, workflow, None)
}

/// [`bumped`], and `also` with it: a write whose arguments are `write`'s
/// and its own after them, and whose SQL ends in a `WHERE` clause (on
/// PostgreSQL it changes rows only when `write` changed one).
pub(super) fn bumped_with(
    dialect: Dialect,
    write: Stmt,
    workflow: &WorkflowId,
    also: Option<Stmt>,
) -> Vec<Stmt> {
    match dialect {
        Dialect::Postgres => {
            let with = (also.as_ref())
                .map(|a| format!(", also AS ({} AND EXISTS (SELECT 1 FROM changed))", a.sql))
                .unwrap_or_default();
            let sql = format!(
                "WITH changed AS ({} RETURNING 1){with} \
                 INSERT INTO install_summaries (install_id, rev) \
                 SELECT install_id, 1 FROM workflows WHERE id = $1 \
                   AND EXISTS (SELECT 1 FROM changed) \
                 ON CONFLICT (install_id) DO UPDATE SET rev = install_summaries.rev + 1",
                write.sql
            );
            let args = also.map_or(write.args, |a| a.args);
            vec![Stmt {
                sql: sql.into(),
                args,
                ..write
            }]
        }
        Dialect::Sqlite => std::iter::once(write)
            .chain(also)
            .chain([bump(workflow)])
            .collect(),
    }
}

/// Step `index`'s update `u` with the install's outputs it carries and
/// its summary's bump (see [`bumped_with`]).
pub(super) fn step_writes(
    dialect: Dialect,
    org: &OrgId,
    id: &WorkflowId,
    index: u32,
    u: &StepUpdate,
) -> Vec<Stmt> {
    let write = update_step_stmt(org, id, index, u);
    let outputs =
        (u.install_outputs.as_ref()).map(|(json, state)| outputs_with_step(&write, json, *state));
    bumped_with(dialect, write, id, outputs)
}

/// The write of a step's install's outputs and state that goes with the
/// step's update `write` (see [`update_step_stmt`]'s arguments).
pub(super) fn outputs_with_step(write: &Stmt, outputs_json: &str, state: InstallState) -> Stmt {
    let mut args = write.args.clone();
    args.extend(args![outputs_json, state.as_str()]);
    let (json, state) = (args.len() - 1, args.len());
    Stmt::new(
        format!(
            "UPDATE installs SET outputs = ${json}, state = ${state} WHERE org_id = $2 \
             AND id = (SELECT install_id FROM workflows WHERE id = $1 AND org_id = $2)"
        ),
        args,
    )
}

/// The update `u` of step `at`, carried by a PostgreSQL statement whose
/// arguments are `args` (the update's are pushed after them, its
/// placeholders moved on): the common table expressions `ended` (the
/// step's row, `RETURNING 1`) and, when the step changed its install's
/// outputs, `ended_outputs`, which writes them with the install's state
/// once `ended` changed the row. With `install_written` the carrying
/// statement writes the install's row itself (one statement may not change
/// a row twice): no `ended_outputs`, and the outputs' placeholder is
/// answered for it to write.
pub(super) fn ended_ctes(
    org: &OrgId,
    id: &WorkflowId,
    at: u32,
    u: &StepUpdate,
    args: &mut Vec<Arg>,
    install_written: bool,
) -> (String, Option<String>) {
    let write = update_step_stmt(org, id, at, u);
    let by = args.len();
    let mut sql = format!("ended AS ({} RETURNING 1), ", shifted(&write.sql, by));
    match &u.install_outputs {
        Some((json, _)) if install_written => {
            args.extend(write.args);
            args.extend(args![json.as_str()]);
            (sql, Some(format!("${}", args.len())))
        }
        Some((json, state)) => {
            let o = outputs_with_step(&write, json, *state);
            sql.push_str(&format!(
                "ended_outputs AS ({} AND EXISTS (SELECT 1 FROM ended)), ",
                shifted(&o.sql, by)
            ));
            args.extend(o.args);
            (sql, None)
        }
        None => {
            args.extend(write.args);
            (sql, None)
        }
    }
}

/// A step's dispatch on PostgreSQL, in one statement (one round trip, no
/// transaction of its own): the workflow's row locked while it runs, the
/// job queued, the step running it, its state token, the summary bumped;
/// nothing unless the workflow is running and has the step. What it
/// carries goes first: the workflow's start (`running` from `pending`, its
/// install's state: then only a pending workflow dispatches, its row
/// locked by that update), or the update of the step that ended before it
/// (its success, and the install's outputs with it), which is written
/// whether or not the dispatch is. Its one row says whether the step was
/// dispatched.
pub(super) fn dispatch_in_one(
    org: &OrgId,
    id: &WorkflowId,
    index: u32,
    job: &NewJob,
    token: Option<StateToken>,
    carried: Option<&Carried>,
) -> Stmt {
    // `$1` to `$10` are the job's; the workflow's follow.
    let mut insert = super::jobs::job_insert_from(job, "FROM wf RETURNING id");
    insert.args.extend(args![id.as_str(), org.as_str(), index]);
    let token_sql = match token {
        Some(t) => {
            insert
                .args
                .extend(args![t.hash, t.install_id.as_str(), t.component]);
            ", token AS (INSERT INTO state_tokens (token_hash, job_id, install_id, component) \
               SELECT $14, id, $15, $16 FROM job)"
        }
        None => "",
    };
    let has_step = "EXISTS (SELECT 1 FROM workflow_steps WHERE workflow_id = $11 AND idx = $13)";
    let mut wf = format!(
        "wf AS (SELECT install_id FROM workflows \
            WHERE id = $11 AND org_id = $12 AND status = 'running' AND {has_step} \
            FOR UPDATE), "
    );
    // What it carries, after the rest of the arguments.
    let (carried_sql, also_bumps) = match carried {
        Some(Carried::Ended(at, u)) => {
            let (sql, _) = ended_ctes(org, id, *at, u, &mut insert.args, false);
            (sql, " OR EXISTS (SELECT 1 FROM ended)")
        }
        Some(Carried::Started(state)) => {
            insert.args.extend(args![state.as_str()]);
            let sql = format!(
                "started AS (UPDATE workflows SET status = 'running', finished_at = NULL \
                    WHERE id = $11 AND org_id = $12 AND status = 'pending' AND {has_step} \
                    RETURNING install_id), \
                 started_install AS (UPDATE installs SET state = ${} \
                    WHERE org_id = $12 AND id = (SELECT install_id FROM started)), ",
                insert.args.len()
            );
            wf = "wf AS (SELECT install_id FROM started), ".to_owned();
            (sql, "")
        }
        None => (String::new(), ""),
    };
    Stmt {
        sql: format!(
            "WITH {carried_sql}{wf}\
             job AS ({}), \
             step AS (UPDATE workflow_steps SET status = 'running', job_id = (SELECT id FROM job), \
                reason = NULL WHERE workflow_id = $11 AND idx = $13 AND EXISTS (SELECT 1 FROM job) \
                RETURNING 1){token_sql} \
             INSERT INTO install_summaries (install_id, rev) \
             SELECT install_id, 1 FROM workflows WHERE id = $11 \
               AND (EXISTS (SELECT 1 FROM step){also_bumps}) \
             ON CONFLICT (install_id) DO UPDATE SET rev = install_summaries.rev + 1 \
             RETURNING EXISTS (SELECT 1 FROM step)",
            insert.sql
        )
        .into(),
        ..insert
    }
}

/// `sql` with each placeholder `$n` as `$(n + by)`: a statement's SQL
/// within another whose arguments come first.
fn shifted(sql: &str, by: usize) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + by).to_string()),
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::shifted;

    #[test]
    fn placeholders_move_on_and_nothing_else_does() {
        assert_eq!(
            shifted("a = $1 AND b = $12 AND c = '$' AND d = $3", 13),
            "a = $14 AND b = $25 AND c = '$' AND d = $16"
        );
        assert_eq!(shifted("no placeholders", 4), "no placeholders");
    }
}
