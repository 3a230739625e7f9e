//! Slash commands on the wire: the `available_commands_update` that advertises them, a
//! command's answer as an `agent_message_chunk`, and a background job's tool call, which keeps
//! streaming to its card after the turn that started it has ended.
//!
//! Owns: the ACP side of [`crate::driver::commands`] and [`crate::jobs`] only (with telling the
//! session's record when a job starts and ends); what a command does and says is theirs. Must
//! not touch: how jobs run, the answers' text.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, SessionUpdate, ToolCallId,
    UnstructuredCommandInput,
};
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

use super::bridge::ClientFeatures;
use super::call_wire::{CallWire, UpdateSink};
use crate::driver::commands::{CommandHost, SlashCommand, COMMANDS};
use crate::exec::Session;
use crate::jobs::{Job, JobId, JobRegistry, LiveOutput, StartError};
use crate::present::stream::StreamLimits;
use crate::present::{present_call, present_ended};
use crate::store::SessionLog;
use crate::tool::BashCall;

/// The `available_commands_update` sent right after a session is made: every slash command
/// with its description and input hint (Zed and Toad show them in their `/` completion).
pub fn available_commands() -> SessionUpdate {
    let commands = COMMANDS
        .iter()
        .map(|command| &command.spec)
        .map(|spec| {
            AvailableCommand::new(spec.name, spec.description).input(
                AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(spec.hint)),
            )
        })
        .collect();
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands))
}

/// A session's jobs as the agent keeps them: the registry, plus each job's tool call id and
/// whether it has got its final update (so that `/kill` answers after the card has ended, not
/// before, and a replay knows which cards are still live here).
pub(super) struct SessionJobs {
    pub registry: JobRegistry,
    cards_done: Mutex<HashMap<JobId, (ToolCallId, watch::Receiver<bool>)>>,
}

impl SessionJobs {
    pub fn new(registry: JobRegistry) -> Self {
        SessionJobs {
            registry,
            cards_done: Mutex::new(HashMap::new()),
        }
    }

    /// Waits until job `id`'s tool call got its final update (at once if it has no card).
    async fn card_done(&self, id: JobId) {
        let done = self.cards_done.lock().unwrap().get(&id).cloned();
        if let Some((_, mut done)) = done {
            let _ = done.wait_for(|done| *done).await;
        }
    }

    /// Waits until every job card of this session got its final update (and so has recorded
    /// its job's end).
    pub async fn all_cards_done(&self) {
        let cards: Vec<JobId> = self.cards_done.lock().unwrap().keys().copied().collect();
        for id in cards {
            self.card_done(id).await;
        }
    }

    /// The jobs whose cards have not got their final update yet, with their cards' call ids
    /// (the terminals the v2 face lists in `state_update.background`), in start order.
    pub fn open_cards(&self) -> Vec<(JobId, ToolCallId)> {
        let cards = self.cards_done.lock().unwrap();
        let mut open: Vec<(JobId, ToolCallId)> = cards
            .iter()
            .filter(|(_, (_, done))| !*done.borrow())
            .map(|(job, (call, _))| (*job, call.clone()))
            .collect();
        open.sort_by_key(|(job, _)| job.0);
        open
    }

    /// Whether `call_id` is the card of a job of this process that has not got its final
    /// update yet.
    pub fn card_open(&self, call_id: &str) -> bool {
        let cards = self.cards_done.lock().unwrap();
        cards
            .values()
            .any(|(id, done)| *id.0 == *call_id && !*done.borrow())
    }
}

/// What a slash command's turn needs from the agent.
pub(super) struct CommandTurn<'a> {
    /// Makes a sink for the session's updates (a job's card gets its own; it makes no live
    /// output while the client is behind on reading).
    pub sink: &'a (dyn Fn() -> Box<dyn UpdateSink> + Sync),
    /// The ACP v2 face: a job is an agent-owned terminal.
    pub v2: bool,
    pub session: &'a Session,
    pub jobs: &'a SessionJobs,
    /// The session's record: a job is recorded when it starts, and its card records its end.
    pub log: &'a Arc<SessionLog>,
    pub features: ClientFeatures,
    /// How live output is batched and capped (a job's card streams like a turn's call).
    pub limits: StreamLimits,
    /// Makes the tool-call id of a job's card (used by `/bg` only).
    pub new_call_id: &'a (dyn Fn() -> ToolCallId + Sync),
    /// The session's permissions (`/permissions`).
    pub permits: Option<crate::permit::SessionPermits>,
}

impl CommandTurn<'_> {
    /// Runs `command`; returns its answer (for the caller to send as the agent's message) and,
    /// for a `/bg` that started a job, the job's card, to [`JobCard::spawn`] once the turn has
    /// been answered.
    pub async fn run(&self, command: SlashCommand) -> (String, Option<JobCard>) {
        let host = Host {
            turn: self,
            card: Mutex::new(None),
        };
        let answer = command.run(&host).await;
        (answer, host.card.into_inner().unwrap())
    }

    async fn background(&self, script: String) -> Result<(Job, JobCard), StartError> {
        // What changed before the job (the editor, an earlier job) goes into the baseline
        // first, as before a turn's call ([`crate::changes`]).
        let tracker = match self.session.engine().config().track_changes {
            true => {
                let session = self.session.clone();
                tokio::task::spawn_blocking(move || {
                    let tracker = session.changes();
                    if let Some(tracker) = &tracker {
                        tracker.begin();
                    }
                    tracker
                })
                .await
                .ok()
                .flatten()
            }
            false => None,
        };
        let (job, live) = self.jobs.registry.start(self.session, script).await?;
        let call = BashCall::new(job.command());
        let view = present_call(&call, job.cwd());
        let call_id = (self.new_call_id)();
        // Recorded before the client hears of it: whatever happens to this agent later, a
        // replay of the session shows the job.
        self.log
            .job_started(job.id().0, &call_id.0, job.command(), job.cwd());
        let mut sink = (self.sink)();
        // The job's shell leads its process group, like a turn call's: its pid in the card
        // lets a user stop the job from outside.
        let wire = if self.v2 {
            CallWire::open_v2(
                call_id.clone(),
                call.command(),
                view,
                self.limits,
                &mut *sink,
            )
        } else {
            CallWire::open_with_process(
                call_id.clone(),
                call.command(),
                view,
                self.features,
                self.limits,
                job.pid(),
                &mut *sink,
            )
        };
        let (done_tx, done_rx) = watch::channel(false);
        self.jobs
            .cards_done
            .lock()
            .unwrap()
            .insert(job.id(), (call_id, done_rx));
        let card = JobCard {
            sink,
            wire,
            job: job.clone(),
            live,
            log: self.log.clone(),
            done: done_tx,
            after_end: None,
            changes: tracker,
            v2: self.v2,
            features: self.features,
        };
        Ok((job, card))
    }
}

/// Every slash command runs on this: the commands' provider-neutral host over the session's
/// jobs, which keeps the card of a job `/bg` started for the caller to spawn.
struct Host<'a> {
    turn: &'a CommandTurn<'a>,
    card: Mutex<Option<JobCard>>,
}

impl CommandHost for Host<'_> {
    fn jobs(&self) -> &JobRegistry {
        &self.turn.jobs.registry
    }

    fn start_job(&self, script: String) -> BoxFuture<'_, Result<Job, StartError>> {
        async move {
            let (job, card) = self.turn.background(script).await?;
            *self.card.lock().unwrap() = Some(card);
            Ok(job)
        }
        .boxed()
    }

    fn shows_jobs_live(&self) -> bool {
        // The card, or the console view plain clients get while a job runs.
        self.turn.features.card() || self.turn.limits.plain_live.is_some()
    }

    fn job_shown_ended<'b>(&'b self, job: &'b Job) -> BoxFuture<'b, ()> {
        async move {
            job.wait().await;
            self.turn.jobs.card_done(job.id()).await;
        }
        .boxed()
    }

    fn changes(&self) -> Option<Arc<crate::changes::ChangeTracker>> {
        match self.turn.session.engine().config().track_changes {
            true => self.turn.session.changes(),
            false => None,
        }
    }

    fn permits(&self) -> Option<crate::permit::SessionPermits> {
        self.turn.permits.clone()
    }

    fn show_changes(&self, changes: &crate::changes::Changes, verb: &str) {
        let view = crate::present::changes::present_changes(changes, verb);
        let id = (self.turn.new_call_id)();
        let mut sink = (self.turn.sink)();
        match self.turn.v2 {
            true => sink.send_v2(super::changes_card::changes_call_v2(&id, &view)),
            false => sink.send(super::changes_card::changes_call(
                &id,
                &view,
                self.turn.features,
            )),
        }
    }
}

/// A background job's tool call, from after the turn that started it until the job ends.
pub(super) struct JobCard {
    sink: Box<dyn UpdateSink>,
    wire: CallWire,
    job: Job,
    live: LiveOutput,
    log: Arc<SessionLog>,
    done: watch::Sender<bool>,
    /// Runs once the card has got its final update (the v2 face sends its `state_update`).
    after_end: Option<Box<dyn FnOnce() + Send>>,
    /// The session folder's change tracker: what changed since the last look is shown as the
    /// job's edit call when it ends.
    changes: Option<Arc<crate::changes::ChangeTracker>>,
    v2: bool,
    features: ClientFeatures,
}

impl JobCard {
    /// Runs `after_end` once the card has got its final update and counts as done.
    pub fn after_end(mut self, after_end: impl FnOnce() + Send + 'static) -> Self {
        self.after_end = Some(Box::new(after_end));
        self
    }

    /// Streams the job's output to its card (the card's batches, or a console view of the last
    /// lines for clients without the card: what a turn's call gets) and, when it ends, records
    /// its end in the session's record and sends the final update (status, `duration_ms`, the
    /// card's notices and status line or the console block, and the title again: the end comes
    /// after the turn that started the job), then, when change tracking is on, the job's edit
    /// call: what changed in the session folder since the last command (or `/undo`) looked,
    /// kept for `/undo` under the job's call id.
    pub fn spawn(self, tasks: &TaskTracker) {
        tasks.spawn(self.follow());
    }

    async fn follow(mut self) {
        // A job is stopped by /kill or with its session, not by a turn's cancel.
        let never = tokio_util::sync::CancellationToken::new();
        self.wire
            .follow(&mut self.live, &mut *self.sink, &never, || {})
            .await;
        let outcome = self.job.wait().await;
        let changes = match self.changes.take() {
            Some(tracker) => {
                let id = self.wire.id().0.to_string();
                tokio::task::spawn_blocking(move || {
                    let changes = tracker.finish();
                    (!changes.is_empty()).then(|| {
                        tracker.keep(&id, &changes);
                        crate::present::changes::present_changes(&changes, "Changed")
                    })
                })
                .await
                .ok()
                .flatten()
            }
            None => None,
        };
        // Recorded before the final update goes out: a client that saw the job end can load
        // the session and see the same end.
        let wire_id = self.wire.id().clone();
        let call_id = wire_id.0.to_string();
        self.log.job_finished(&call_id, &outcome, changes.as_ref());
        let presented = present_ended(
            self.job.cwd(),
            &self.wire.view().echo,
            &outcome.output,
            &outcome.status,
            Some(outcome.duration),
        );
        self.wire
            .end(&mut *self.sink, Some(&outcome.status), &presented, true);
        if let Some(view) = &changes {
            let id = wire_id;
            match self.v2 {
                true => self
                    .sink
                    .send_v2(super::changes_card::changes_call_v2(&id, view)),
                false => {
                    self.sink
                        .send(super::changes_card::changes_call(&id, view, self.features))
                }
            }
        }
        tracing::info!(call = %call_id, job = %self.job.id(), "job's call finished");
        self.done.send_replace(true);
        if let Some(after_end) = self.after_end.take() {
            after_end();
        }
    }
}
