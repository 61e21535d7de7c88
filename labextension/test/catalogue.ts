/**
 * A run trace holding one event of every catalogued type (memfit_jupyter/events.py)
 * plus one type no renderer knows, for the renderer tests and the saved notebook.
 */

export function catalogueTrace(): Record<string, any> {
  const ev = (type: string, iteration: number, fields: Record<string, unknown>) => ({
    type,
    iteration,
    ts: iteration * 1.5,
    ...fields
  });
  const row = (id: string, content: string, final: number) => ({
    id,
    content,
    tags: ['csv', 'parsing'],
    score: final,
    breakdown: { r: 0.9, c: 0.4, t: 0.6, a: 0.8, p: 0.1, o: 0.7, e: 0.05, keyword_bonus: 0.18, semantic: 0.71, final }
  });
  return {
    version: 1,
    run_id: 'cat0123456789',
    task: 'summarise the quarterly report in data/',
    model: 'memfit/catalogue',
    tiers: { primary: 'memfit/catalogue', fast: 'memfit/fast', fallback: 'memfit/backup' },
    status: 'degraded',
    answer: 'Revenue grew 12% (partial: Q4 missing)',
    reason: 'max_cost_usd reached',
    started_at: '2026-01-01T00:00:00+00:00',
    settings: { strategy: 'diverse', samples: 3 },
    limits: { max_cost_usd: 0.05, max_duration_seconds: 300, max_recursive_calls: 20, max_iterations: 20 },
    totals: {
      cost_usd: 0.0512,
      tokens: { prompt: 12000, completion: 3400, total: 15400 },
      calls: 14,
      iterations: 3,
      recursive_calls: 4,
      duration_s: 42.5
    },
    events: [
      ev('run_start', 0, { task: 'summarise', tiers: {}, settings: {}, tools: ['read_file', 'python', 'finish'], extensions: ['memory', 'reflection'] }),
      ev('memory', 0, { op: 'task_search', query: 'quarterly report', results: [row('m1', 'CSV files here use semicolons', 0.82), row('m2', 'Q4 data arrives late', 0.41)], added: [], bytes: 512 }),
      ev('model_call', 1, { purpose: 'action', model: 'memfit/catalogue', tier: 'primary', attempt: 1, ok: true, prompt_tokens: 300, completion_tokens: 40, cost_usd: 0.002, latency_s: 0.4, reply: '{"thought": "read"}', error: null, error_kind: null }),
      ev('action', 1, { thought: 'Read the report first.', action_type: 'read', tool: 'read_file', params: { path: 'data/q.csv' }, reflection: null }),
      ev('observation', 1, { tool: 'read_file', ok: false, output: '', error: 'no such file: data/q.csv', duration_s: 0.001, data: {} }),
      ev('reflection', 1, { level: 4, level_name: 'CRITICAL', trigger: 'execution failure', action_type: 'read', tool: 'read_file', success: false, summary: 'The path was wrong; list the folder first.', suggestions: ['list data/ before reading'], impact: { state_changes: [], side_effects: [], positive_effects: [], negative_effects: ['wasted a call'], resource_usage: {} }, memory_used: ['m1'], ok: true, error: null }),
      ev('model_call', 2, { purpose: 'action', model: 'memfit/catalogue', tier: 'primary', attempt: 1, ok: false, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0, latency_s: 1.2, reply: null, error: 'rate limited', error_kind: 'rate_limit' }),
      ev('breaker', 2, { tier: 'primary', model: 'memfit/catalogue', from_state: 'CLOSED', to_state: 'OPEN', failures: 3, successes: 0, rejected: false, opened_at: 3.0, next_probe_at: 63.0, reason: '3 failures in a row' }),
      ev('breaker', 2, { tier: 'primary', rejected: true, fallback_tier: 'fallback', reason: 'breaker open' }),
      ev('action', 2, { thought: 'Same read again.', action_type: 'read', tool: 'read_file', params: { path: 'data/q.csv' }, reflection: 2 }),
      ev('observation', 2, { tool: 'read_file', ok: true, output: 'q1,q2,q3\n10,11,12', error: null, duration_s: 0.001, data: {} }),
      ev('spin', 2, { layer: 1, detector: 'same_action', is_spinning: true, reason: 'the same read_file call 3 times in a row', suggestions: ['try python to parse'], next_actions: ['python'], action_type: 'read', consecutive_count: 3, warning_count: 1, is_task_progressing: false }),
      ev('context', 2, { used_tokens: 5800, window: 8000, ratio: 0.725, watermark: 'warning', evicted: 0, recall_size: 3, summary: '' }),
      ev('synthesis', 3, { strategy: 'diverse', question: 'what grew?', samples: [{ answer: 'revenue', confidence: 0.8, cluster: 0 }, { answer: 'costs', confidence: 0.6, cluster: 1 }], clusters: [{ answer: 'revenue', weight: 0.6, share: 0.6, size: 2, confidence: 0.8 }, { answer: 'costs', weight: 0.4, share: 0.4, size: 1, confidence: 0.6 }], answer: 'revenue', confidence: 0.55, low_confidence: true, alternatives: [{ answer: 'revenue' }, { answer: 'costs' }], choice: 'revenue', rationale: 'the person picked revenue' }),
      ev('guarantee', 3, { violated: true, limit: 'max_cost_usd', message: 'spent $0.0512 of $0.05', cost_usd: 0.0512, elapsed_s: 42.5, recursive_calls: 4 }),
      ev('degradation', 3, { reason: 'cost limit reached', partial_result: 'Revenue grew 12%', explanation: 'Stopped before reading Q4.', recommendations: ['raise --max-cost', 'use a cheaper fast model'], cost_usd: 0.0512, duration_s: 42.5, calls: 14, iterations: 3, tried: ['primary', 'fallback'] }),
      ev('trial', 3, { trial: 1, max_trials: 3, passed: false, oracle_output: 'AssertionError: Q4 missing', lesson: 'check every quarter is present' }),
      ev('approval', 3, { state: 'approved', tool: 'shell', reason: 'read-only command' }),
      ev('error', 3, { message: 'tool crashed', traceback: 'Traceback...' }),
      ev('future_event', 3, { gizmo: 'sprocket', level: 7 }),
      ev('run_end', 3, { status: 'degraded', answer: 'Revenue grew 12% (partial: Q4 missing)', reason: 'max_cost_usd reached' })
    ]
  };
}
