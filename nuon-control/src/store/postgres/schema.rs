//! The PostgreSQL schema: numbered migrations, applied once each under an advisory lock.

use super::*;

/// The advisory lock migrations run under.
const MIGRATE_LOCK: i64 = 0x6e75_6f6e_6d69_6772; // "nuonmigr"

/// Numbered migrations; each runs once, in order, in one transaction.
const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        r#"
CREATE TABLE orgs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    signing_key BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE TABLE runners (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    last_seen_at BIGINT,
    role TEXT NOT NULL DEFAULT 'generic',
    UNIQUE (org_id, name)
);
CREATE TABLE jobs (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    runner_id TEXT NOT NULL REFERENCES runners(id),
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    signature TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    max_attempts BIGINT NOT NULL,
    timeout_secs BIGINT NOT NULL,
    cancel_requested BOOLEAN NOT NULL DEFAULT false,
    exit_code INTEGER,
    reason TEXT,
    outputs TEXT,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT
);
CREATE INDEX jobs_queue ON jobs (runner_id, seq) WHERE status = 'queued';
CREATE INDEX jobs_org ON jobs (org_id, seq);
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE TABLE attempts (
    job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    n BIGINT NOT NULL,
    runner_id TEXT NOT NULL,
    state TEXT NOT NULL,
    confirmed BOOLEAN NOT NULL DEFAULT false,
    lease_expires BIGINT NOT NULL,
    acked_seq BIGINT NOT NULL DEFAULT 0,
    started_at BIGINT NOT NULL,
    finished_at BIGINT,
    PRIMARY KEY (job_id, n)
);
CREATE INDEX attempts_leases ON attempts (lease_expires) WHERE state = 'running';
CREATE TABLE apps (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (org_id, name)
);
CREATE TABLE app_configs (
    app_id TEXT NOT NULL REFERENCES apps(id),
    version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    components BIGINT NOT NULL,
    files TEXT NOT NULL,
    config TEXT NOT NULL,
    warnings TEXT NOT NULL,
    sources TEXT NOT NULL,
    PRIMARY KEY (app_id, version)
);
CREATE TABLE installs (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    app_id TEXT NOT NULL REFERENCES apps(id),
    name TEXT NOT NULL,
    config_version BIGINT NOT NULL,
    runner_id TEXT NOT NULL REFERENCES runners(id),
    state TEXT NOT NULL,
    inputs TEXT NOT NULL,
    sealed TEXT NOT NULL,
    outputs TEXT,
    created_at BIGINT NOT NULL,
    approval TEXT NOT NULL,
    UNIQUE (org_id, name)
);
CREATE TABLE workflows (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    install_id TEXT NOT NULL REFERENCES installs(id),
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    config_version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    finished_at BIGINT,
    component TEXT
);
CREATE INDEX workflows_install ON workflows (install_id, created_at);
CREATE INDEX workflows_active ON workflows (created_at) WHERE status IN ('pending', 'running', 'cancelling');
CREATE TABLE workflow_steps (
    workflow_id TEXT NOT NULL REFERENCES workflows(id),
    idx BIGINT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT,
    needs_approval BOOLEAN NOT NULL,
    status TEXT NOT NULL,
    job_id TEXT,
    approved_at BIGINT,
    reason TEXT,
    outputs TEXT,
    PRIMARY KEY (workflow_id, idx)
);
CREATE TABLE builds (
    job_id TEXT PRIMARY KEY REFERENCES jobs(id),
    org_id TEXT NOT NULL REFERENCES orgs(id),
    app_id TEXT NOT NULL REFERENCES apps(id),
    config_version BIGINT NOT NULL,
    component TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX builds_app ON builds (app_id, config_version, component);
CREATE TABLE state_tokens (
    token_hash TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs(id),
    install_id TEXT NOT NULL REFERENCES installs(id),
    component TEXT NOT NULL
);
CREATE TABLE tf_states (
    install_id TEXT NOT NULL REFERENCES installs(id),
    component TEXT NOT NULL,
    version BIGINT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (install_id, component, version)
);
CREATE TABLE tf_locks (
    install_id TEXT NOT NULL REFERENCES installs(id),
    component TEXT NOT NULL,
    lock_id TEXT NOT NULL,
    info TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    job_id TEXT,
    PRIMARY KEY (install_id, component)
);
CREATE TABLE log_records (
    id BIGSERIAL PRIMARY KEY,
    job_id TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    body BYTEA NOT NULL
);
CREATE INDEX log_records_job ON log_records (job_id, id);
"#,
    ),
    (
        2,
        r#"
ALTER TABLE orgs ADD COLUMN max_running BIGINT;
CREATE INDEX jobs_running ON jobs (org_id) WHERE status = 'running';
"#,
    ),
    (
        3,
        r#"
CREATE TABLE settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"#,
    ),
    (
        4,
        r#"
ALTER TABLE jobs ADD COLUMN payload TEXT;
"#,
    ),
    (
        5,
        r#"
ALTER TABLE orgs ADD COLUMN key_rotations TEXT;
"#,
    ),
    (
        6,
        r#"
ALTER TABLE runners ADD COLUMN session TEXT;
"#,
    ),
    (
        7,
        r#"
ALTER TABLE workflow_steps ADD COLUMN attempts TEXT;
ALTER TABLE installs ADD COLUMN toggles TEXT;
ALTER TABLE workflows ADD COLUMN inputs TEXT;
ALTER TABLE workflows ADD COLUMN trigger TEXT;
CREATE TABLE cron_fires (
    install_id TEXT NOT NULL REFERENCES installs(id),
    action TEXT NOT NULL,
    fire_at BIGINT NOT NULL,
    workflow_id TEXT NOT NULL,
    PRIMARY KEY (install_id, action, fire_at)
);
"#,
    ),
    (
        8,
        r#"
ALTER TABLE runners ADD COLUMN telemetry TEXT;
ALTER TABLE runners ADD COLUMN health TEXT;
ALTER TABLE runners ADD COLUMN health_since BIGINT;
CREATE TABLE audit (
    org_id TEXT NOT NULL,
    n BIGINT NOT NULL,
    at BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL,
    prev TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (org_id, n)
);
CREATE TABLE audit_heads (
    org_id TEXT PRIMARY KEY,
    n BIGINT NOT NULL,
    hash TEXT NOT NULL
);
CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    secret TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    removed_at BIGINT
);
CREATE TABLE webhook_deliveries (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    webhook_id TEXT NOT NULL REFERENCES webhooks(id),
    org_id TEXT NOT NULL,
    event TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    next_at BIGINT,
    delivered_at BIGINT,
    last_error TEXT
);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (webhook_id, seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_org ON webhook_deliveries (org_id, seq);
"#,
    ),
    (
        9,
        r#"
ALTER TABLE installs ADD COLUMN stack_outputs TEXT;
ALTER TABLE installs ADD COLUMN stack_token TEXT;
ALTER TABLE installs ADD COLUMN stack_token_expires BIGINT;
ALTER TABLE installs ADD COLUMN stack_token_used BIGINT;
CREATE INDEX installs_stack_token ON installs (stack_token) WHERE stack_token IS NOT NULL;
"#,
    ),
    (
        10,
        r#"
CREATE INDEX installs_runner ON installs (runner_id);
"#,
    ),
    (
        11,
        r#"
ALTER TABLE installs ADD COLUMN labels TEXT;
CREATE TABLE install_groups (
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    selector TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, name)
);
"#,
    ),
    (
        12,
        r#"
CREATE TABLE releases (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    app_id TEXT NOT NULL REFERENCES apps(id),
    config_version BIGINT NOT NULL,
    builds TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX releases_app ON releases (org_id, app_id, created_at);
"#,
    ),
    (
        13,
        r#"
CREATE TABLE rollouts (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    release_id TEXT NOT NULL,
    status TEXT NOT NULL,
    version BIGINT NOT NULL,
    doc TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX rollouts_release ON rollouts (org_id, release_id, created_at);
CREATE INDEX rollouts_status ON rollouts (status);
CREATE TABLE install_releases (
    install_id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    release_id TEXT NOT NULL,
    at BIGINT NOT NULL
);
CREATE INDEX install_releases_org ON install_releases (org_id);
ALTER TABLE workflows ADD COLUMN release_id TEXT;
"#,
    ),
    (
        14,
        r#"
CREATE TABLE users (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    email TEXT NOT NULL,
    role TEXT NOT NULL,
    status TEXT NOT NULL,
    name TEXT,
    subject TEXT,
    invited_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_sign_in_at BIGINT,
    UNIQUE (org_id, email)
);
CREATE TABLE oidc_sign_ins (
    state_hash TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    nonce TEXT NOT NULL,
    verifier TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX oidc_sign_ins_expiry ON oidc_sign_ins (expires_at);
ALTER TABLE api_tokens ADD COLUMN user_id TEXT;
ALTER TABLE api_tokens ADD COLUMN expires_at BIGINT;
CREATE INDEX api_tokens_user ON api_tokens (user_id) WHERE user_id IS NOT NULL;
ALTER TABLE workflow_steps ADD COLUMN approved_by TEXT;
"#,
    ),
    (
        15,
        r#"
CREATE TABLE web_sessions (
    id_hash TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX web_sessions_expiry ON web_sessions (expires_at);
"#,
    ),
    (
        16,
        r#"
CREATE TABLE install_summaries (
    install_id TEXT PRIMARY KEY,
    rev BIGINT NOT NULL,
    summary_rev BIGINT,
    brief TEXT,
    summary TEXT
);
"#,
    ),
    (
        17,
        r#"
CREATE TABLE runner_releases (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    version TEXT NOT NULL,
    doc TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (org_id, version)
);
CREATE TABLE install_runner_releases (
    install_id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    release_id TEXT NOT NULL,
    tries INTEGER NOT NULL,
    at BIGINT NOT NULL
);
CREATE INDEX install_runner_releases_org ON install_runner_releases (org_id);
"#,
    ),
    (
        18,
        r#"
ALTER TABLE installs ADD COLUMN overrides TEXT;
"#,
    ),
    (
        19,
        r#"
ALTER TABLE installs ADD COLUMN checks TEXT;
"#,
    ),
    (
        20,
        r#"
ALTER TABLE attempts ADD COLUMN log_bytes BIGINT NOT NULL DEFAULT 0;
"#,
    ),
    (
        21,
        r#"
CREATE TABLE invitations (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    app_id TEXT NOT NULL,
    install_id TEXT,
    name TEXT,
    email TEXT,
    token_hash TEXT NOT NULL UNIQUE,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    revoked_at BIGINT,
    browser_hash TEXT,
    customer_inputs TEXT
);
CREATE INDEX invitations_org ON invitations (org_id, created_at);
CREATE INDEX invitations_install ON invitations (install_id) WHERE install_id IS NOT NULL;
"#,
    ),
    (
        22,
        r#"
ALTER TABLE invitations ADD COLUMN template_hash TEXT;
ALTER TABLE invitations ADD COLUMN template_expires BIGINT;
CREATE INDEX invitations_template ON invitations (template_hash) WHERE template_hash IS NOT NULL;
"#,
    ),
    (
        23,
        r#"
CREATE INDEX workflow_steps_job ON workflow_steps (job_id) WHERE job_id IS NOT NULL;
"#,
    ),
    (
        24,
        r#"
ALTER TABLE installs ADD COLUMN pending TEXT;
ALTER TABLE installs ADD COLUMN pending_rev BIGINT NOT NULL DEFAULT 0;
"#,
    ),
    (
        25,
        r#"
CREATE TABLE runner_binaries (
    org_id TEXT NOT NULL REFERENCES orgs(id),
    digest TEXT NOT NULL,
    part INTEGER NOT NULL,
    bytes BYTEA NOT NULL,
    PRIMARY KEY (org_id, digest, part)
);
"#,
    ),
    (
        26,
        r#"
CREATE TABLE nuon_schema (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    readers_from BIGINT NOT NULL
);
CREATE TABLE nuon_replicas (
    id TEXT PRIMARY KEY,
    version TEXT NOT NULL,
    seen_at BIGINT NOT NULL
);
"#,
    ),
    (
        27,
        r#"
CREATE TABLE rollout_targets (
    rollout_id TEXT NOT NULL,
    idx BIGINT NOT NULL,
    doc TEXT NOT NULL,
    PRIMARY KEY (rollout_id, idx)
);
"#,
    ),
    (
        28,
        r#"
CREATE TABLE install_labels (
    org_id TEXT NOT NULL,
    install_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (install_id, key)
);
CREATE INDEX install_labels_value ON install_labels (org_id, key, value);
CREATE FUNCTION nuon_install_labels() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM install_labels WHERE install_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO install_labels (org_id, install_id, key, value)
        SELECT NEW.org_id, NEW.id, l.key, l.value
        FROM jsonb_each_text(COALESCE(NEW.labels, '{}')::jsonb) AS l;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER install_labels AFTER INSERT OR DELETE OR UPDATE OF labels ON installs
    FOR EACH ROW EXECUTE FUNCTION nuon_install_labels();
INSERT INTO install_labels (org_id, install_id, key, value)
SELECT i.org_id, i.id, l.key, l.value
FROM installs AS i, jsonb_each_text(COALESCE(i.labels, '{}')::jsonb) AS l;
"#,
    ),
    (
        29,
        r#"
ALTER TABLE installs ADD COLUMN stamp BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runners ADD COLUMN stamp BIGINT NOT NULL DEFAULT 0;
ALTER TABLE install_summaries ADD COLUMN stamp BIGINT NOT NULL DEFAULT 0;
CREATE FUNCTION nuon_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.stamp := pg_current_xact_id()::text::bigint;
    RETURN NEW;
END
$$;
CREATE TRIGGER installs_stamp BEFORE INSERT OR UPDATE ON installs
    FOR EACH ROW EXECUTE FUNCTION nuon_stamp();
CREATE TRIGGER runners_stamp BEFORE INSERT OR UPDATE ON runners
    FOR EACH ROW EXECUTE FUNCTION nuon_stamp();
CREATE TRIGGER install_summaries_stamp BEFORE INSERT OR UPDATE ON install_summaries
    FOR EACH ROW EXECUTE FUNCTION nuon_stamp();
CREATE INDEX installs_stamp ON installs (org_id, stamp);
CREATE INDEX runners_stamp ON runners (org_id, stamp);
CREATE INDEX install_summaries_stamp ON install_summaries (stamp);
"#,
    ),
    (
        30,
        r#"
CREATE INDEX installs_listed ON installs (org_id, created_at, id);
"#,
    ),
];

/// The oldest schema version whose code may still run on this one: the
/// rolling-upgrade floor, kept in `nuon_schema.readers_from`.
///
/// Migrations are expand-then-contract: one above this floor only adds
/// (tables, nullable or defaulted columns, indexes), so a replica one
/// release older, which knows no more than the floor, still reads and
/// writes everything it knows while a newer replica runs beside it (the
/// test `migrations_above_the_readers_floor_only_expand` holds them to
/// it). A migration that takes away (a dropped or renamed column, a
/// changed type) raises this floor to its own version, in the release
/// after the one that stopped using what it takes: the contract step.
const READERS_FROM: i64 = 26;

pub(super) async fn migrate(pool: &PgPool) -> Result<()> {
    let mut conn = pool.acquire().await.map_err(db)?;
    // `CREATE ... IF NOT EXISTS` would log a notice on every start.
    sqlx::query("SET client_min_messages = warning")
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(MIGRATE_LOCK)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    let result = async {
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS nuon_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
        )
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        let done: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM nuon_migrations")
            .fetch_one(&mut *conn)
            .await
            .map_err(db)?;
        let done = done.unwrap_or(0);
        if let Some(&(newest, _)) = MIGRATIONS.last()
            && done > newest
        {
            // A newer replica migrated it: a rolling upgrade, or a
            // rollback. Fine while the newer schema only expanded.
            let floor: Option<i64> =
                sqlx::query_scalar("SELECT readers_from FROM nuon_schema WHERE id = 1")
                    .fetch_optional(&mut *conn)
                    .await
                    .map_err(db)?;
            let floor = floor.unwrap_or(done);
            if floor > newest {
                return Err(StoreError::Invalid(format!(
                    "the database's schema is version {done}, newer than this nuon-ctl knows ({newest}), \
                     and no longer readable by it (it needs a nuon-ctl that knows version {floor} or later); \
                     run a newer nuon-ctl"
                )));
            }
            tracing::warn!(
                schema = done,
                known = newest,
                "the database's schema is newer than this nuon-ctl knows, and still readable by it (a rolling upgrade): upgrade this replica"
            );
            return Ok(());
        }
        for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > done) {
            let mut tx = conn.begin().await.map_err(db)?;
            sqlx::raw_sql(sql).execute(&mut *tx).await.map_err(db)?;
            sqlx::query("INSERT INTO nuon_migrations (version, applied_at) VALUES ($1, $2)")
                .bind(version)
                .bind(now_ms())
                .execute(&mut *tx)
                .await
                .map_err(db)?;
            tx.commit().await.map_err(db)?;
            tracing::info!(version, "database schema migrated");
        }
        sqlx::query(
            "INSERT INTO nuon_schema (id, readers_from) VALUES (1, $1) ON CONFLICT (id) \
             DO UPDATE SET readers_from = GREATEST(nuon_schema.readers_from, EXCLUDED.readers_from)",
        )
        .bind(READERS_FROM)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        Ok(())
    }
    .await;
    let _ = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(MIGRATE_LOCK)
        .execute(&mut *conn)
        .await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What makes a migration a contract step: older code would miss what
    /// it takes away, or fail to write a row without what it requires.
    fn contracts(sql: &str) -> Option<String> {
        let upper = sql.to_uppercase();
        for word in ["DROP ", "RENAME ", "ALTER COLUMN", " TYPE "] {
            if upper.contains(word) {
                return Some(format!("it has {:?}", word.trim()));
            }
        }
        for line in upper.lines().filter(|l| l.contains("ADD COLUMN")) {
            if line.contains("NOT NULL") && !line.contains("DEFAULT") {
                return Some(format!(
                    "{:?} adds a NOT NULL column without a DEFAULT, which an older replica's inserts lack",
                    line.trim()
                ));
            }
        }
        None
    }

    #[test]
    fn migrations_above_the_readers_floor_only_expand() {
        for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > READERS_FROM) {
            if let Some(why) = contracts(sql) {
                panic!(
                    "migration {version} contracts the schema ({why}) above READERS_FROM ({READERS_FROM}): \
                     a replica one release older would break during a rolling upgrade; \
                     raise READERS_FROM to {version} in the release after the one that stopped using it"
                );
            }
        }
        let newest = MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        assert!(
            READERS_FROM <= newest,
            "the floor is a migration this build has"
        );
    }

    #[test]
    fn the_contract_check_finds_what_takes_away() {
        assert!(contracts("ALTER TABLE a DROP COLUMN b;").is_some());
        assert!(contracts("ALTER TABLE a RENAME COLUMN b TO c;").is_some());
        assert!(contracts("ALTER TABLE a ALTER COLUMN b TYPE BIGINT;").is_some());
        assert!(contracts("ALTER TABLE a ADD COLUMN b TEXT NOT NULL;").is_some());
        assert!(contracts("ALTER TABLE a ADD COLUMN b BIGINT NOT NULL DEFAULT 0;").is_none());
        assert!(contracts("CREATE TABLE t (id TEXT PRIMARY KEY NOT NULL);").is_none());
    }
}
