// Generated from memfit_jupyter/jupyter/protocol.py by `python -m memfit_jupyter.schema --write`.
// Do not edit: a test fails when this file and the Python protocol differ.

/** The actions the front end may ask for (`{action: name, ...}`). */
export type ActionName = 'sync' | 'step' | 'continue' | 'abort' | 'approve' | 'reject' | 'override' | 'choose' | 'more_trials' | 'open_diary' | 'stop' | 'fork';
export const ACTION_NAMES: ActionName[] = ['sync', 'step', 'continue', 'abort', 'approve', 'reject', 'override', 'choose', 'more_trials', 'open_diary', 'stop', 'fork'];

/** The figures of `run.estimate()` that the view shows. */
export const ESTIMATE_KEYS: (keyof Estimate)[] = ['model', 'priced', 'iteration_cost_usd', 'iteration_worst_case_usd', 'calls_per_iteration', 'prompt_tokens', 'iterations_affordable', 'budget_left_usd'];

/** What the next iteration is expected to cost (``run.estimate()``), or why that is unknown (``error`` alone). ``priced`` is False when the model has no known price. */
export interface Estimate {
  model?: string;
  priced?: boolean;
  iteration_cost_usd?: number;
  iteration_worst_case_usd?: number;
  calls_per_iteration?: number;
  prompt_tokens?: number;
  iterations_affordable?: number | null;
  budget_left_usd?: number;
  error?: string;
}

/** The tool call waiting for the person's approval. */
export interface Approval {
  tool: string;
  params: Record<string, unknown>;
  thought: string;
}

/** One alternative of a diverse synthesis the person may choose. */
export interface Choice {
  index: number;
  answer: string;
}

/** The failure diary's lessons, once the person asked for them. */
export interface Diary {
  lessons: string[];
  past: string[];
}

/** One message of the prompt the next action call will send (step mode). */
export interface PromptMessage {
  role: string;
  content: string;
}

/** One row of a comparison: ``kind`` says how to show the two values (text, count, money, seconds). */
export interface CompareRow {
  label: string;
  kind: string;
  values: unknown[];
}

/** The first iteration whose action differs, and the two actions. */
export interface Diverged {
  iteration: number;
  a: string;
  b: string;
}

/** What the "Fork from here" form asks for: the step ``at`` and the changes there (fields left empty are left out). ``params`` is the JSON text typed for ``tool``'s parameters. */
export interface ForkRequest {
  at?: number;
  guidance?: string;
  observation?: string;
  tool?: string;
  params?: string;
  model?: string;
  reflection?: string;
  spin_threshold?: number;
  max_iterations?: number;
}

/** ``compare(parent, child)`` without the two runs (the view has both). */
export interface ForkCompare {
  labels: string[];
  rows: CompareRow[];
  diverged: Diverged | null;
}

/** One fork of the run, for the run view's tree: the step it forked at, its changes, how it ended, the live widget that streams it (None when none does) and its comparison with the run. */
export interface ForkEntry {
  run: string;
  at: number;
  changes: Record<string, unknown>;
  status: string;
  answer: string | null;
  cost_usd: number;
  iterations: number;
  exact: boolean;
  live_widget: string | null;
  compare: ForkCompare | null;
}

/** A fork as the parent's saved output keeps it: the entry and the child's trace. */
export interface SavedFork {
  run: string;
  at: number;
  changes: Record<string, unknown>;
  status: string;
  answer: string | null;
  cost_usd: number;
  iterations: number;
  exact: boolean;
  live_widget: string | null;
  compare: ForkCompare | null;
  trace: Record<string, unknown>;
}

/** The metadata of a run's output (``application/vnd.memfit.run+json``): the live widget that streams the run (None: none), whether it is quiet, and its forks with their traces. */
export interface RunOutputMeta {
  version: unknown;
  live_widget: string | null;
  quiet: boolean;
  forks: SavedFork[];
}

/** The controls of a live run (the widget's synced ``controls``): status, the buttons to show by action name, what waits for the person, and the estimate of the next iteration. */
export interface Controls {
  status: string;
  busy: boolean;
  buttons: ActionName[];
  approval: Approval | null;
  choices: Choice[];
  override_cost: number | null;
  extra_trials: number;
  diary: Diary | null;
  prompt: PromptMessage[] | null;
  count: number;
  max_cards: number;
  estimate: Estimate | null;
  note: string | null;
  forks: ForkEntry[];
  fork_error: string | null;
}

/** A button of the front end: ``have`` with sync (the events it holds), ``max_cost_usd`` with override, ``index`` with choose, ``fork`` with fork. */
export interface ActionMessage {
  action?: ActionName;
  have?: number;
  max_cost_usd?: number;
  index?: number;
  fork?: ForkRequest;
}

/** Events from ``start`` on, and the trace's head (the trace without its events) when it changed. */
export interface BatchMessage {
  kind?: 'batch';
  start?: number;
  events?: Record<string, unknown>[];
  head?: Record<string, unknown>;
}

/** A piece of a reply as it streams in (a ``model_delta`` event). */
export interface DeltaMessage {
  kind: 'delta';
  event: Record<string, unknown>;
}

/** One ranked memory: the C.O.R.E. P.A.C.T. ``breakdown`` ends in ``final``, which ``score`` equals. */
export interface MemoryResult {
  rank: number;
  id: string;
  content: string;
  tags: string[];
  score: number;
  breakdown: Record<string, number>;
}

/** ``application/vnd.memfit.memory+json``: a ranking of memories for a query. */
export interface MemoryPayload {
  version: number;
  query: string;
  bytes_limit: number | null;
  bytes: number;
  dimensions: string[];
  results: MemoryResult[];
  score_label: string;
  floor: number | null;
  nothing_relevant: boolean;
}

/** ``application/vnd.memfit.compare+json``: two runs (each a ``Trace``) side by side. */
export interface ComparePayload {
  version: number;
  labels: string[];
  runs: Record<string, unknown>[];
  rows: CompareRow[];
  diverged: Diverged | null;
}
