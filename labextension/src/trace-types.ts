// Generated from memfit_jupyter/events.py by `python -m memfit_jupyter.schema --write`.
// Do not edit: a test fails when this file and the Python event classes differ.

/** The run began: its task, model tiers, settings, tools and extensions. */
export interface RunStartEvent {
  type: 'run_start';
  iteration: number;
  ts: number;
  task: string;
  tiers: Record<string, string>;
  settings: Record<string, unknown>;
  tools: string[];
  extensions: string[];
}

/** The run ended (the one place: ``Run._finish``). */
export interface RunEndEvent {
  type: 'run_end';
  iteration: number;
  ts: number;
  status: string;
  answer: string | null;
  reason: string;
}

/** This run is a fork (``fork.py``): its steps before ``at`` are its parent's, answered from the recording; from ``at`` on it runs live, with ``changes`` (step changes and settings). */
export interface ForkEvent {
  type: 'fork';
  iteration: number;
  ts: number;
  parent: string;
  at: number;
  changes: Record<string, unknown>;
  workspace: Record<string, unknown>;
  memory: string;
}

/** An exception the loop (or a button callback) caught and survived. */
export interface ErrorEvent {
  type: 'error';
  iteration: number;
  ts: number;
  message: string;
  traceback?: string;
}

/** A message for the person; with ``timeline`` it is also put where the model reads it. */
export interface NoteEvent {
  type: 'note';
  iteration: number;
  ts: number;
  text: string;
  source?: string;
  files?: string[];
}

/** One attempt of one structured call: the reply is kept so a run can be replayed. */
export interface ModelCallEvent {
  type: 'model_call';
  iteration: number;
  ts: number;
  purpose: string;
  model: string;
  tier: string;
  attempt: number;
  ok: boolean;
  prompt_tokens: number;
  completion_tokens: number;
  cost_usd: number;
  latency_s: number;
  max_tokens: number | null;
  timeout_s: number | null;
  reply: string | Record<string, unknown> | unknown[] | null;
  error: string | null;
  error_kind: string | null;
  structured?: string;
  requested_max_tokens?: number | null;
  finish_reason?: string | null;
  cached_tokens?: number;
  partial_reply?: string;
}

/** A reply that did not fit its schema (the client asks again). */
export interface FormatErrorEvent {
  type: 'format_error';
  iteration: number;
  ts: number;
  purpose: string;
  attempt: number;
  error: string | null;
}

/** The action the model chose. */
export interface ActionEvent {
  type: 'action';
  iteration: number;
  ts: number;
  thought: string;
  action_type: string;
  tool: string;
  params: Record<string, unknown>;
  reflection: string | null;
}

/** What the action's tool gave back (or why no action could be taken). */
export interface ObservationEvent {
  type: 'observation';
  iteration: number;
  ts: number;
  tool: string;
  ok: boolean;
  output: string;
  error: string | null;
  duration_s: number;
  data: Record<string, unknown>;
}

/** A tool call waiting for the person, or the person's decision on it. */
export interface ApprovalEvent {
  type: 'approval';
  iteration: number;
  ts: number;
  state: string;
  tool: string;
  reason?: string;
}

/** A reflection on the last action (MECHANISMS.md §1.3). */
export interface ReflectionEvent {
  type: 'reflection';
  iteration: number;
  ts: number;
  level: number;
  level_name: string;
  trigger: string;
  action_type: string;
  tool: string;
  success: boolean;
  summary: string;
  suggestions: string[];
  impact: Record<string, unknown>;
  memory_used: string[];
  ok: boolean;
  error: string | null;
}

/** A spin detector's finding (layer 1, 2, 3 or a named detector). */
export interface SpinEvent {
  type: 'spin';
  iteration: number;
  ts: number;
  layer: number | string;
  detector: string;
  is_spinning: boolean;
  reason: string;
  suggestions: string[];
  next_actions: string[];
  action_type: string;
  consecutive_count: number;
  warning_count: number;
  is_task_progressing: boolean | null;
}

/** A limit ran out (``limit`` names it: max_cost_usd, max_duration_seconds, max_recursive_calls). */
export interface GuaranteeViolatedEvent {
  type: 'guarantee';
  iteration: number;
  ts: number;
  violated: boolean;
  message: string;
  limit: string;
  operation: string;
  prompt_tokens?: number;
  cost_usd: number;
  elapsed_s: number;
  recursive_calls: number;
}

/** The person raised limits (with explicit confirmation). */
export interface GuaranteeOverrideEvent {
  type: 'guarantee';
  iteration: number;
  ts: number;
  violated: boolean;
  override: boolean;
  confirmed: boolean;
  limit: string;
  message: string;
  limits: Record<string, unknown>;
  previous: Record<string, unknown>;
  cost_usd: number;
  elapsed_s: number;
  recursive_calls: number;
}

/** A guard of ``reliability/guards.py`` fired; ``refused`` names the tool call it turned away. */
export interface GuardEvent {
  type: 'guard';
  iteration: number;
  ts: number;
  guard: string;
  reason: string;
  refused?: string;
  refusals?: number;
  max_refusals?: number;
}

/** A tier's circuit breaker changed state. */
export interface BreakerTransitionEvent {
  type: 'breaker';
  iteration: number;
  ts: number;
  tier: string;
  model: string;
  failures: number;
  successes: number;
  rejected: number;
  opened_at: number | null;
  next_probe_at: number | null;
  from_state: string;
  to_state: string;
  reason: string;
}

/** A call was turned away from an open tier (``fallback_tier`` answers, or none). */
export interface BreakerRejectedEvent {
  type: 'breaker';
  iteration: number;
  ts: number;
  tier: string;
  model: string;
  failures: number;
  successes: number;
  rejected: boolean;
  opened_at: number | null;
  next_probe_at: number | null;
  rejected_count: number;
  fallback_tier: string | null;
  purpose: string;
  reason: string;
  open_tiers: Record<string, number | null>;
  state: string;
}

/** Sampled answers combined (MECHANISMS.md §4.2): clusters, the answer, its confidence. */
export interface SynthesisEvent {
  type: 'synthesis';
  iteration: number;
  ts: number;
  strategy: string;
  question: string;
  samples: Record<string, unknown>[];
  clusters: Record<string, unknown>[];
  answer: string | null;
  confidence: number;
  share: number;
  low_confidence: boolean;
  alternatives: Record<string, unknown>[];
  no_consensus: boolean;
  rationale: string;
  recursive_calls: number;
  cost: Record<string, unknown>;
}

/** The person chose one alternative of a diverse synthesis. */
export interface SynthesisChoiceEvent {
  type: 'synthesis';
  iteration: number;
  ts: number;
  strategy: string;
  question: string;
  samples: Record<string, unknown>[];
  clusters: Record<string, unknown>[];
  alternatives: Record<string, unknown>[];
  answer: string;
  confidence: number;
  low_confidence: boolean;
  choice: Record<string, unknown>;
  rationale: string;
}

/** The graceful degradation plan of a run that stopped short (MECHANISMS.md §4.4). */
export interface DegradationEvent {
  type: 'degradation';
  iteration: number;
  ts: number;
  reason: string;
  partial_result: string | null;
  explanation: string;
  recommendations: string[];
  cost_usd: number;
  duration_s: number;
  calls: number;
  iterations: number;
  tried: string[];
}

/** A memory operation and what it found or added. */
export interface MemoryEvent {
  type: 'memory';
  iteration: number;
  ts: number;
  op: string;
  query: string;
  results: Record<string, unknown>[];
  added: unknown[];
  bytes: number;
  source?: string | null;
  duplicates?: unknown;
  error?: string | null;
}

/** A measurement of the main context; at ``flush`` the oldest ``evicted`` entries left it. */
export interface ContextEvent {
  type: 'context';
  iteration: number;
  ts: number;
  used_tokens: number;
  window: number | null;
  ratio: number;
  watermark: string;
  evicted: number;
  recall_size: number;
  summary: string | null;
  reason?: string;
}

/** A failure-diary trial judged by the oracle. */
export interface TrialEvent {
  type: 'trial';
  iteration: number;
  ts: number;
  trial: number;
  max_trials: number;
  passed: boolean;
  oracle_output: string;
  lesson: string | null;
}

/** The person's answer to an escalated run. */
export interface EscalationEvent {
  type: 'escalation';
  iteration: number;
  ts: number;
  choice: string;
  extra_trials: number;
  max_trials: number | null;
}

/** A warning or log line raised while the run moved: the run's view shows it (not stderr). */
export interface LogEvent {
  type: 'log';
  iteration: number;
  ts: number;
  level: string;
  logger: string;
  message: string;
}

/** The answer of an ended run changed: the person chose an alternative of a diverse synthesis. */
export interface AnswerChangedEvent {
  type: 'answer';
  iteration: number;
  ts: number;
  answer: string;
  reason: string;
}

/** Any event of a trace. */
export type TraceEvent =
  | RunStartEvent
  | RunEndEvent
  | ForkEvent
  | ErrorEvent
  | NoteEvent
  | ModelCallEvent
  | FormatErrorEvent
  | ActionEvent
  | ObservationEvent
  | ApprovalEvent
  | ReflectionEvent
  | SpinEvent
  | GuaranteeViolatedEvent
  | GuaranteeOverrideEvent
  | GuardEvent
  | BreakerTransitionEvent
  | BreakerRejectedEvent
  | SynthesisEvent
  | SynthesisChoiceEvent
  | DegradationEvent
  | MemoryEvent
  | ContextEvent
  | TrialEvent
  | EscalationEvent
  | LogEvent
  | AnswerChangedEvent;

/** A saved run: `Run.trace()`, the application/vnd.memfit.run+json payload. */
export interface Trace {
  version: 1;
  run_id?: string;
  task: string;
  model?: string;
  tiers?: Record<string, string>;
  status?: string;
  answer?: string | null;
  reason?: string;
  started_at?: string | null;
  settings?: Record<string, unknown>;
  workdir?: string;
  limits?: Record<string, number>;
  totals?: Record<string, unknown>;
  events: TraceEvent[];
  source?: Record<string, unknown>;
  analysis?: Record<string, unknown>;
  parent?: Record<string, unknown>;
  forks?: Record<string, unknown>[];
  oracle?: Record<string, unknown>;
  memory_store?: Record<string, unknown>;
}

/** Live only, never in a trace: Text the loop puts into the timeline for the model (not part of trace version 1). ``kind`` names the timeline entry: reflection, logic_spin_warning, memory_pressure, note. */
export interface GuidanceEvent {
  type: 'guidance';
  iteration: number;
  ts: number;
  kind: string;
  text: string;
}

/** Live only, never in a trace: A piece of a reply as it streams in (live only: the model_call that follows holds it all). */
export interface ModelDeltaEvent {
  type: 'model_delta';
  iteration: number;
  ts: number;
  purpose: string;
  model: string;
  text: string;
  chars: number;
}
