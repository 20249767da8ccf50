//! The SQLite schema, and the small migration of data dirs of earlier versions.

use super::*;

pub(super) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS orgs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    signing_key BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    max_running INTEGER,
    key_rotations TEXT
);
CREATE TABLE IF NOT EXISTS api_tokens (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER,
    user_id TEXT,
    expires_at INTEGER
);
CREATE TABLE IF NOT EXISTS users (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    email TEXT NOT NULL,
    role TEXT NOT NULL,
    status TEXT NOT NULL,
    name TEXT,
    subject TEXT,
    invited_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_sign_in_at INTEGER,
    UNIQUE (org_id, email)
);
CREATE TABLE IF NOT EXISTS install_summaries (
    install_id TEXT PRIMARY KEY,
    rev INTEGER NOT NULL,
    summary_rev INTEGER,
    brief TEXT,
    summary TEXT
);
CREATE TABLE IF NOT EXISTS invitations (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    app_id TEXT NOT NULL,
    install_id TEXT,
    name TEXT,
    email TEXT,
    token_hash TEXT NOT NULL UNIQUE,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER,
    revoked_at INTEGER,
    browser_hash TEXT,
    customer_inputs TEXT,
    template_hash TEXT,
    template_expires INTEGER
);
CREATE INDEX IF NOT EXISTS invitations_org ON invitations (org_id, created_at);
CREATE INDEX IF NOT EXISTS invitations_install ON invitations (install_id) WHERE install_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS web_sessions (
    id_hash TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS oidc_sign_ins (
    state_hash TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    nonce TEXT NOT NULL,
    verifier TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS runners (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER,
    last_seen_at INTEGER,
    role TEXT NOT NULL DEFAULT 'generic',
    session TEXT,
    telemetry TEXT,
    health TEXT,
    health_since INTEGER,
    UNIQUE (org_id, name)
);
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    runner_id TEXT NOT NULL REFERENCES runners(id),
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    signature TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    timeout_secs INTEGER NOT NULL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER,
    reason TEXT,
    outputs TEXT,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    payload TEXT
);
CREATE INDEX IF NOT EXISTS jobs_queue ON jobs (runner_id, seq) WHERE status = 'queued';
CREATE INDEX IF NOT EXISTS jobs_org ON jobs (org_id, seq);
CREATE INDEX IF NOT EXISTS jobs_running ON jobs (org_id) WHERE status = 'running';
CREATE TABLE IF NOT EXISTS attempts (
    job_id TEXT NOT NULL REFERENCES jobs(id),
    n INTEGER NOT NULL,
    runner_id TEXT NOT NULL,
    state TEXT NOT NULL,
    confirmed INTEGER NOT NULL DEFAULT 0,
    lease_expires INTEGER NOT NULL,
    acked_seq INTEGER NOT NULL DEFAULT 0,
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    PRIMARY KEY (job_id, n)
);
CREATE INDEX IF NOT EXISTS attempts_leases ON attempts (lease_expires) WHERE state = 'running';
CREATE TABLE IF NOT EXISTS apps (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (org_id, name)
);
CREATE TABLE IF NOT EXISTS app_configs (
    app_id TEXT NOT NULL REFERENCES apps(id),
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    components INTEGER NOT NULL,
    files TEXT NOT NULL,
    config TEXT NOT NULL,
    warnings TEXT NOT NULL,
    PRIMARY KEY (app_id, version)
);
CREATE TABLE IF NOT EXISTS installs (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    app_id TEXT NOT NULL REFERENCES apps(id),
    name TEXT NOT NULL,
    config_version INTEGER NOT NULL,
    runner_id TEXT NOT NULL REFERENCES runners(id),
    state TEXT NOT NULL,
    inputs TEXT NOT NULL,
    sealed TEXT NOT NULL,
    outputs TEXT,
    created_at INTEGER NOT NULL,
    toggles TEXT,
    stack_outputs TEXT,
    stack_token TEXT,
    stack_token_expires INTEGER,
    stack_token_used INTEGER,
    labels TEXT,
    overrides TEXT,
    checks TEXT,
    pending TEXT,
    pending_rev INTEGER NOT NULL DEFAULT 0,
    UNIQUE (org_id, name)
);
CREATE TABLE IF NOT EXISTS releases (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    app_id TEXT NOT NULL REFERENCES apps(id),
    config_version INTEGER NOT NULL,
    builds TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS releases_app ON releases (org_id, app_id, created_at);
CREATE TABLE IF NOT EXISTS rollouts (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    release_id TEXT NOT NULL,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    doc TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS rollouts_release ON rollouts (org_id, release_id, created_at);
CREATE INDEX IF NOT EXISTS rollouts_status ON rollouts (status);
CREATE TABLE IF NOT EXISTS rollout_targets (
    rollout_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    doc TEXT NOT NULL,
    PRIMARY KEY (rollout_id, idx)
);
CREATE TABLE IF NOT EXISTS install_releases (
    install_id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    release_id TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS install_releases_org ON install_releases (org_id);
CREATE TABLE IF NOT EXISTS runner_releases (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    version TEXT NOT NULL,
    doc TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (org_id, version)
);
CREATE TABLE IF NOT EXISTS runner_binaries (
    org_id TEXT NOT NULL REFERENCES orgs(id),
    digest TEXT NOT NULL,
    part INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (org_id, digest, part)
);
CREATE TABLE IF NOT EXISTS install_runner_releases (
    install_id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    release_id TEXT NOT NULL,
    tries INTEGER NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS install_runner_releases_org ON install_runner_releases (org_id);
CREATE TABLE IF NOT EXISTS install_groups (
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    selector TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (org_id, name)
);
CREATE TABLE IF NOT EXISTS workflows (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    install_id TEXT NOT NULL REFERENCES installs(id),
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    config_version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    finished_at INTEGER
);
CREATE INDEX IF NOT EXISTS workflows_install ON workflows (install_id, created_at);
CREATE INDEX IF NOT EXISTS workflows_active ON workflows (created_at) WHERE status IN ('pending', 'running', 'cancelling');
CREATE TABLE IF NOT EXISTS workflow_steps (
    workflow_id TEXT NOT NULL REFERENCES workflows(id),
    idx INTEGER NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT,
    needs_approval INTEGER NOT NULL,
    status TEXT NOT NULL,
    job_id TEXT,
    approved_at INTEGER,
    attempts TEXT,
    PRIMARY KEY (workflow_id, idx)
);
CREATE TABLE IF NOT EXISTS cron_fires (
    install_id TEXT NOT NULL REFERENCES installs(id),
    action TEXT NOT NULL,
    fire_at INTEGER NOT NULL,
    workflow_id TEXT NOT NULL,
    PRIMARY KEY (install_id, action, fire_at)
);
CREATE TABLE IF NOT EXISTS builds (
    job_id TEXT PRIMARY KEY REFERENCES jobs(id),
    org_id TEXT NOT NULL REFERENCES orgs(id),
    app_id TEXT NOT NULL REFERENCES apps(id),
    config_version INTEGER NOT NULL,
    component TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS builds_app ON builds (app_id, config_version, component);
CREATE TABLE IF NOT EXISTS state_tokens (
    token_hash TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs(id),
    install_id TEXT NOT NULL REFERENCES installs(id),
    component TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tf_states (
    install_id TEXT NOT NULL REFERENCES installs(id),
    component TEXT NOT NULL,
    version INTEGER NOT NULL,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (install_id, component, version)
);
CREATE TABLE IF NOT EXISTS tf_locks (
    install_id TEXT NOT NULL REFERENCES installs(id),
    component TEXT NOT NULL,
    lock_id TEXT NOT NULL,
    info TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (install_id, component)
);
CREATE TABLE IF NOT EXISTS audit (
    org_id TEXT NOT NULL,
    n INTEGER NOT NULL,
    at INTEGER NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL,
    prev TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (org_id, n)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit_heads (
    org_id TEXT PRIMARY KEY,
    n INTEGER NOT NULL,
    hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS webhooks (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    secret TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    removed_at INTEGER
);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    webhook_id TEXT NOT NULL REFERENCES webhooks(id),
    org_id TEXT NOT NULL,
    event TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    next_at INTEGER,
    delivered_at INTEGER,
    last_error TEXT
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_pending ON webhook_deliveries (webhook_id, seq) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS webhook_deliveries_org ON webhook_deliveries (org_id, seq);
CREATE TABLE IF NOT EXISTS settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS logs.records (
    id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS logs.records_job ON records (job_id, id);
"#;

/// Brings a data dir made by an earlier version up to the schema.
pub(super) fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    const COLUMNS: [(&str, &str, &str); 37] = [
        ("orgs", "max_running", "INTEGER"),
        ("orgs", "key_rotations", "TEXT"),
        ("runners", "role", "TEXT NOT NULL DEFAULT 'generic'"),
        ("app_configs", "sources", "TEXT NOT NULL DEFAULT '[]'"),
        (
            "installs",
            "approval",
            "TEXT NOT NULL DEFAULT 'approve-all'",
        ),
        ("workflows", "component", "TEXT"),
        ("workflow_steps", "reason", "TEXT"),
        ("workflow_steps", "outputs", "TEXT"),
        ("tf_locks", "job_id", "TEXT"),
        ("jobs", "payload", "TEXT"),
        ("runners", "session", "TEXT"),
        ("workflow_steps", "attempts", "TEXT"),
        ("installs", "toggles", "TEXT"),
        ("workflows", "inputs", "TEXT"),
        ("workflows", "trigger", "TEXT"),
        ("runners", "telemetry", "TEXT"),
        ("runners", "health", "TEXT"),
        ("runners", "health_since", "INTEGER"),
        ("installs", "stack_outputs", "TEXT"),
        ("installs", "stack_token", "TEXT"),
        ("installs", "stack_token_expires", "INTEGER"),
        ("installs", "stack_token_used", "INTEGER"),
        ("installs", "labels", "TEXT"),
        ("workflows", "release_id", "TEXT"),
        ("api_tokens", "user_id", "TEXT"),
        ("api_tokens", "expires_at", "INTEGER"),
        ("workflow_steps", "approved_by", "TEXT"),
        ("installs", "overrides", "TEXT"),
        ("installs", "checks", "TEXT"),
        ("attempts", "log_bytes", "INTEGER NOT NULL DEFAULT 0"),
        ("invitations", "template_hash", "TEXT"),
        ("invitations", "template_expires", "INTEGER"),
        ("installs", "pending", "TEXT"),
        ("installs", "pending_rev", "INTEGER NOT NULL DEFAULT 0"),
        ("installs", "stamp", "INTEGER NOT NULL DEFAULT 0"),
        ("runners", "stamp", "INTEGER NOT NULL DEFAULT 0"),
        ("install_summaries", "stamp", "INTEGER NOT NULL DEFAULT 0"),
    ];
    for (table, column, decl) in COLUMNS {
        let has: bool = conn
            .prepare(&format!(
                "SELECT 1 FROM pragma_table_info('{table}') WHERE name = '{column}'"
            ))?
            .exists([])?;
        if !has {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
        }
    }
    // On columns an earlier version lacked: made once they are there.
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS installs_stack_token ON installs (stack_token) \
         WHERE stack_token IS NOT NULL;
         CREATE INDEX IF NOT EXISTS installs_runner ON installs (runner_id);
         CREATE INDEX IF NOT EXISTS installs_listed ON installs (org_id, created_at, id);
         CREATE INDEX IF NOT EXISTS api_tokens_user ON api_tokens (user_id) WHERE user_id IS NOT NULL;
         CREATE INDEX IF NOT EXISTS invitations_template ON invitations (template_hash) \
         WHERE template_hash IS NOT NULL;
         CREATE INDEX IF NOT EXISTS workflow_steps_job ON workflow_steps (job_id) \
         WHERE job_id IS NOT NULL;",
    )?;
    install_labels(conn)?;
    fleet_stamps(conn)
}

/// The stamps of the rows a fleet's view reads again when they change
/// (`store::fleet`): each write of an install, runner or summary moves
/// `fleet_clock` and stamps its row with it.
fn fleet_stamps(conn: &Connection) -> rusqlite::Result<()> {
    let mut sql = String::from(
        "CREATE TABLE IF NOT EXISTS fleet_clock (id INTEGER PRIMARY KEY CHECK (id = 1), v INTEGER NOT NULL);
         INSERT OR IGNORE INTO fleet_clock (id, v) VALUES (1, 0);
         CREATE INDEX IF NOT EXISTS installs_stamp ON installs (org_id, stamp);
         CREATE INDEX IF NOT EXISTS runners_stamp ON runners (org_id, stamp);
         CREATE INDEX IF NOT EXISTS install_summaries_stamp ON install_summaries (stamp);",
    );
    for (table, key) in [
        ("installs", "id"),
        ("runners", "id"),
        ("install_summaries", "install_id"),
    ] {
        // The stamping `UPDATE` itself changes the stamp: no trigger for it.
        for (event, when) in [("INSERT", ""), ("UPDATE", " WHEN NEW.stamp IS OLD.stamp")] {
            sql.push_str(&format!(
                "CREATE TRIGGER IF NOT EXISTS {table}_stamp_{} AFTER {event} ON {table}{when} BEGIN
                     UPDATE fleet_clock SET v = v + 1 WHERE id = 1;
                     UPDATE {table} SET stamp = (SELECT v FROM fleet_clock WHERE id = 1) WHERE {key} = NEW.{key};
                 END;",
                event.to_lowercase()
            ));
        }
    }
    conn.execute_batch(&sql)
}

/// The index of install labels (what a selector reads), kept by triggers
/// on `installs.labels` whoever writes them. Made, and filled from the
/// installs there, when it or one of its triggers is missing.
fn install_labels(conn: &Connection) -> rusqlite::Result<()> {
    let kept: i64 = conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE (type = 'table' AND name = 'install_labels') \
         OR (type = 'trigger' AND name IN ('install_labels_insert', 'install_labels_update', 'install_labels_delete'))",
        [],
        |r| r.get(0),
    )?;
    if kept == 4 {
        return Ok(());
    }
    conn.execute_batch(
        "BEGIN;
         CREATE TABLE IF NOT EXISTS install_labels (
             org_id TEXT NOT NULL,
             install_id TEXT NOT NULL,
             key TEXT NOT NULL,
             value TEXT NOT NULL,
             PRIMARY KEY (install_id, key)
         );
         CREATE INDEX IF NOT EXISTS install_labels_value ON install_labels (org_id, key, value);
         CREATE TRIGGER IF NOT EXISTS install_labels_insert AFTER INSERT ON installs BEGIN
             INSERT INTO install_labels (org_id, install_id, key, value)
             SELECT NEW.org_id, NEW.id, l.key, l.value FROM json_each(COALESCE(NEW.labels, '{}')) AS l;
         END;
         CREATE TRIGGER IF NOT EXISTS install_labels_update AFTER UPDATE OF labels ON installs BEGIN
             DELETE FROM install_labels WHERE install_id = OLD.id;
             INSERT INTO install_labels (org_id, install_id, key, value)
             SELECT NEW.org_id, NEW.id, l.key, l.value FROM json_each(COALESCE(NEW.labels, '{}')) AS l;
         END;
         CREATE TRIGGER IF NOT EXISTS install_labels_delete AFTER DELETE ON installs BEGIN
             DELETE FROM install_labels WHERE install_id = OLD.id;
         END;
         DELETE FROM install_labels;
         INSERT INTO install_labels (org_id, install_id, key, value)
         SELECT i.org_id, i.id, l.key, l.value FROM installs AS i, json_each(COALESCE(i.labels, '{}')) AS l;
         COMMIT;",
    )
}
