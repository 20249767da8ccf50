//! What a runner checks of a claimed job before anything runs, and how a
//! refusal is recorded: the signature over the exact bytes, the spec naming
//! this job and runner, the grant of this attempt (signed, in its time,
//! never accepted before), the role of its operation.

use nuon_core::Signed as _;
use std::sync::Arc;

use nuon_core::JobSpec;

use super::JobRun;
use crate::credentials::Handed;
use crate::spool::SpoolWriter;

impl JobRun {
    /// The role of the job's operation, as the stack created it, handed by
    /// the runner's credentials provider (what it hands is redacted from
    /// the log); a role the stack did not create (or a break-glass one
    /// that is off) refuses the job with the reason.
    pub(super) async fn role(
        &self,
        spec: &JobSpec,
        spool: &mut SpoolWriter,
        redact: &mut Vec<String>,
    ) -> Result<Handed, String> {
        let Some(role) = &spec.role else {
            return Ok(Handed::default());
        };
        let provider = &self.shared.config.credentials;
        let handed = match provider.credentials(role, &self.key.0, self.note()).await {
            Ok(handed) => handed,
            Err(reason) => {
                tracing::warn!(job = %self.key.0, attempt = self.key.1, role = %role.name, "role refused: {reason}");
                return Err(reason);
            }
        };
        if provider.hands_roles() {
            spool.system(&format!(
                "runs as role {} ({}; {})",
                role.name, role.kind, role.because
            ));
        } else {
            spool.system(&format!(
                "its role is {} ({}; {}), but this runner hands jobs no role (--credentials none): it runs with the runner's own identity",
                role.name, role.kind, role.because
            ));
        }
        redact.extend(handed.secrets.iter().cloned());
        spool.set_redact(redact);
        Ok(handed)
    }

    /// Each cloud session made for the job, in the journal
    /// (`job.credentials`: assumed, renewed, renewal failed).
    fn note(&self) -> crate::aws_session::Note {
        let shared = self.shared.clone();
        let job = self.key.0.to_string();
        Arc::new(move |outcome: &str, detail: String| {
            shared
                .journal
                .record("job.credentials", &job, outcome, detail)
        })
    }

    /// Checks the claimed job: signature over the exact bytes, then the spec
    /// names this job and this runner.
    pub(super) fn check(&self) -> std::result::Result<JobSpec, String> {
        let job = &self.claimed.job_id;
        let config = &self.shared.config;
        let signer = self
            .shared
            .keys
            .verify_signer(self.claimed.spec.as_bytes(), &self.claimed.signature)
            .map_err(|e| format!("refusing job {job}: {e}"))?;
        let _ = self.signer.set(signer);
        let spec: JobSpec = serde_json::from_str(&self.claimed.spec).map_err(|e| {
            format!("refusing job {job}: the signed spec is not a valid job spec: {e}")
        })?;
        if spec.job_id != *job {
            return Err(format!(
                "refusing job {job}: the signed spec is for job {}, not this one",
                spec.job_id
            ));
        }
        if spec.runner_id != config.runner_id {
            return Err(format!(
                "refusing job {job}: the signed spec is for runner {}, not this runner ({})",
                spec.runner_id, config.runner_id
            ));
        }
        self.check_grant()?;
        Ok(spec)
    }

    /// The claim's grant ([`nuon_core::Grant`]): signed by the org for
    /// this attempt and this runner, still in its time, an attempt this
    /// runner has not accepted before, of a job it has not finished.
    fn check_grant(&self) -> std::result::Result<(), String> {
        let c = &self.claimed;
        let (job, attempt) = (&c.job_id, c.attempt);
        if c.grant.is_empty() {
            return Err(format!(
                "refusing job {job} attempt {attempt}: the claim carries no grant, so nothing \
                 shows it may run now and once (a control plane older than this runner, or an \
                 answer altered on its way): update the control plane"
            ));
        }
        let grant = nuon_core::Grant {
            job_id: job,
            attempt,
            runner_id: &self.shared.config.runner_id,
            not_after_ms: c.not_after_ms,
            spec: c.spec.as_bytes(),
        };
        self.shared
            .keys
            .verify(&grant.signed_bytes(), &c.grant)
            .map_err(|e| {
                format!(
                    "refusing job {job} attempt {attempt}: its grant does not verify ({e}): the \
                     claim answer was altered, or granted to another runner or attempt"
                )
            })?;
        let now = nuon_core::now_ms();
        if now > c.not_after_ms {
            return Err(format!(
                "refusing job {job} attempt {attempt}: its grant ended {} s ago (at {} ms since \
                 the epoch): a claim answer served again after its time, or this machine's clock \
                 is ahead by more than the lease and {} s",
                (now - c.not_after_ms) / 1000,
                c.not_after_ms,
                nuon_core::Grant::LEEWAY_MS / 1000
            ));
        }
        if let Some(done) = self.shared.accepted.finished(job) {
            return Err(format!(
                "refusing job {job} attempt {attempt}: this runner ran attempt {} of this job to \
                 its end ({}, {} s ago; its journal, {}, records it), and a job runs once: a \
                 claim answer served again, or a control plane restored from a backup taken \
                 before then asking for it again. Nothing of it runs now; to do its work anew, \
                 run its step again",
                done.attempt,
                done.outcome(),
                (now - done.at_ms).max(0) / 1000,
                self.shared.journal.path().display()
            ));
        }
        if !self.shared.accepted.take(job, attempt, c.not_after_ms) {
            return Err(format!(
                "refusing job {job} attempt {attempt}: this runner accepted that attempt before \
                 (its journal, {}, records it): a claim answer served again runs nothing",
                self.shared.journal.path().display()
            ));
        }
        Ok(())
    }

    /// [`JobRun::check`], before anything is written, so a refusal (a
    /// replayed claim answer, say) is in the journal whatever the disk
    /// does next; `None` when a claim of an attempt this runner took or
    /// ran was refused and reported already.
    pub(super) fn checked(&self) -> Option<Result<JobSpec, String>> {
        let checked = self.check();
        (!self.refused_held(&checked)).then_some(checked)
    }

    /// Refuses a claim of an attempt this runner took or ran (an answer
    /// served again) that `checked` refused: that attempt's spool and end
    /// are the run's. A spool of the refusal would be refused as stale by a
    /// control plane that never handed it out, and that would read as the
    /// run's end never counting; so it is journaled and reported by
    /// itself. Answers whether it was such a claim.
    fn refused_held(&self, checked: &Result<JobSpec, String>) -> bool {
        let Err(reason) = checked else {
            return false;
        };
        if !self.shared.accepted.holds(&self.key.0, self.key.1) {
            return false;
        }
        tracing::error!(job = %self.key.0, attempt = self.key.1, "{reason}");
        self.journal_refused(reason);
        let (job, attempt) = self.key.clone();
        self.shared
            .report_end(job, attempt, nuon_core::JobResult::failed(reason.clone()));
        true
    }

    /// The refusal in the journal and the runner's counts.
    pub(super) fn journal_refused(&self, reason: &str) {
        self.shared.config.stats.error(reason);
        self.shared.config.stats.job_ended("refused");
        self.shared.journal.record(
            "job.refused",
            self.key.0.as_str(),
            "refused",
            format!("attempt {}; {}; {reason}", self.key.1, self.provenance()),
        );
    }

    /// Where the job came from, for the journal: its spec's digest and
    /// the key that signed it (as [`Self::check`] found it: a signature is
    /// verified once per job).
    pub(super) fn provenance(&self) -> String {
        let digest = nuon_core::artifact::Digest::of(self.claimed.spec.as_bytes());
        match self.signer.get() {
            Some(key) => format!("spec {digest}; signed by {key}"),
            None => format!("spec {digest}; signed by no trusted key"),
        }
    }
}
