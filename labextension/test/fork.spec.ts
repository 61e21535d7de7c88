/**
 * "Fork from here" and the tree of forks (src/fork.ts) in a run output, with a live run fed as
 * the kernel feeds it and with the saved output alone.
 */

import * as fs from 'fs';
import * as path from 'path';

import { eventCard } from '../src/events';
import { changesText, forkCall, forkLine } from '../src/fork';
import { Controls, LiveSource, registerLive, unregisterLive } from '../src/liveregistry';
import { MemfitEvent, RUN_MIME } from '../src/payload';
import { headOf } from '../src/run';
import { MemfitRenderer } from '../src/widget';

import { FakeLink } from './fakelink';

const TRACE_DIR = process.env.MEMFIT_TRACE_DIR || path.join(__dirname, 'fixtures');

function trace(name: string): any {
  return JSON.parse(fs.readFileSync(path.join(TRACE_DIR, `${name}.json`), 'utf8'));
}

class Source extends FakeLink implements LiveSource {
  constructor(
    readonly liveId: string,
    readonly head: Record<string, unknown>,
    readonly events: MemfitEvent[]
  ) {
    super();
  }
  controls: Controls = { status: 'done', busy: false, buttons: [], forks: [], fork_error: null };
  setControls(c: Partial<Controls>): void {
    this.controls = { ...this.controls, ...c };
    this.tell({ kind: 'controls' });
  }
}

function renderer(): MemfitRenderer {
  return new MemfitRenderer({ mimeType: RUN_MIME, sanitizer: {} as any, resolver: null, linkHandler: null, latexTyper: null } as any);
}

function entry(parent: any, child: any, at: number, liveWidget: string | null): any {
  return {
    run: child.run_id,
    at,
    changes: { guidance: 'read the file once' },
    status: child.status,
    answer: child.answer,
    cost_usd: 0.0123,
    iterations: child.totals.iterations,
    exact: true,
    live_widget: liveWidget,
    compare: {
      labels: ['this run', `fork at step ${at}`],
      rows: [{ label: 'outcome', kind: 'text', values: [parent.status, child.status] }],
      diverged: { iteration: at, a: 'shell(command=cat summary.txt)', b: 'finish(answer=42)' }
    }
  };
}

function type(form: Element, name: string, value: string): void {
  const input = form.querySelector(`[name=${name}]`) as HTMLInputElement;
  input.value = value;
  input.dispatchEvent(new Event('input', { bubbles: true }));
}

describe('the code a saved fork form writes', () => {
  it('is a %memfit fork line and a run.fork call with the changes filled in', () => {
    const req = { at: 3, guidance: "don't read it twice", tool: 'finish', params: '{"answer": "42", "ok": true}', spin_threshold: 2 };
    expect(forkLine('abc123', req)).toBe(
      `%memfit fork abc123 --at 3 --guidance "don't read it twice" --action '{"tool":"finish","params":{"answer":"42","ok":true}}' --spin-threshold 2`
    );
    // no quoting carries both kinds of quote through IPython's split: the line says so
    expect(forkLine('abc123', { at: 2, guidance: `say "hi", don't` })).toContain('run the run.fork call below');
    expect(forkCall(req)).toBe(
      `child = run.fork(at=3, guidance="don't read it twice", spin_threshold=2, action={"tool": "finish", "params": {"answer": "42", "ok": True}})\nchild.run()`
    );
    expect(forkLine('abc123', { at: 1 })).toBe('%memfit fork abc123 --at 1');
    // a saved trace's run id is shown as an id only: one that holds code is not copied into a cell
    expect(forkLine('x\nimport os; os.system("touch pwned") #', { at: 1 })).toBe('%memfit fork RUN --at 1');
    // a line break would end the magic line: the run.fork call is the way then
    expect(forkLine('abc123', { at: 2, guidance: 'one\nimport os' })).toContain('run the run.fork call below');
    expect(changesText({ action: { tool: 'read_file', params: { path: 'x' } }, max_iterations: 4 })).toBe('action read_file(path=x) · max_iterations 4');
  });
});

describe('the fork event', () => {
  it('says where the fork came from, what changed and how its files were restored', () => {
    const base = { type: 'fork', iteration: 3, ts: 0, parent: 'abc123', at: 3, changes: { guidance: 'read it once' }, memory: 'overlay' };
    const exact = eventCard({ ...base, workspace: { exact: true, files: 4, caveats: ['python variables are not restored'] } } as any);
    expect(exact.querySelector('.memfit-event-title')?.textContent).toBe('Forked from run abc123 at step 3');
    expect(exact.textContent).toContain('guidance “read it once”');
    expect(exact.textContent).toContain("the parent's files at step 3 (4 files)");
    expect(exact.textContent).toContain('python variables are not restored');
    const inexact = eventCard({ ...base, workspace: { exact: false, problems: ['step 2 wrote /etc/x outside the workdir'] } } as any);
    expect(inexact.textContent).toContain("not exactly the parent's files: step 2 wrote /etc/x outside the workdir");
  });
});

describe('Fork from here', () => {
  it('sends the form to the kernel while it holds the run, shows its one line of error, and closes once the fork is made', async () => {
    const parent = trace('spin-demo');
    const source = new Source('parent-model', headOf(parent), parent.events);
    registerLive(source);
    const widget = renderer();
    await widget.renderModel({ data: { [RUN_MIME]: parent }, trusted: true, metadata: { [RUN_MIME]: { live_widget: 'parent-model', forks: [] } }, setData: () => undefined } as any);
    const node = widget.node;
    expect(node.querySelector('.memfit-live')).not.toBeNull();
    const rows = Array.from(node.querySelectorAll('.memfit-run-host .memfit-iteration'));
    // every step of the run has the button, the setup has none
    expect(rows.filter(r => r.querySelector('.memfit-fork-open')).map(r => r.getAttribute('data-iteration'))).toEqual(
      rows.map(r => r.getAttribute('data-iteration')).filter(i => i !== '0')
    );
    (node.querySelector('.memfit-fork-open[data-at="2"]') as HTMLElement).click();
    const form = node.querySelector('.memfit-fork-form') as HTMLElement;
    expect(form.getAttribute('data-at')).toBe('2');
    expect(Array.from(form.querySelectorAll('select[name=tool] option')).map(o => o.textContent)).toContain('read_file');
    type(form, 'guidance', '  read the file once  ');
    type(form, 'params', '{nope');
    (form.querySelector('select[name=tool]') as HTMLSelectElement).value = 'read_file';
    type(form, 'max_iterations', '4');
    const button = form.querySelector('button[data-action=fork]') as HTMLButtonElement;
    button.click();
    expect(source.sent).toEqual([{ action: 'fork', fork: { at: 2, guidance: 'read the file once', tool: 'read_file', params: '{nope', max_iterations: 4 } }]);
    expect(button.disabled).toBe(true);
    source.setControls({ fork_error: null });
    source.setControls({ fork_error: "the action's parameters are not JSON" });
    expect(form.querySelector('.memfit-fork-error')?.textContent).toBe("the action's parameters are not JSON");
    expect(button.disabled).toBe(false);
    expect(node.querySelectorAll('.memfit-fork-node').length).toBe(0);

    // while the run executes the button waits, and says why
    source.setControls({ busy: true, status: 'running' });
    expect(button.disabled).toBe(true);
    expect(form.querySelector('.memfit-fork-busy')?.textContent).toContain('executing');
    source.setControls({ busy: false, status: 'done', fork_error: null });

    button.click();
    const child = trace('demo');
    source.setControls({ forks: [entry(parent, child, 2, 'child-model')] });
    expect(node.querySelector('.memfit-fork-form')).toBeNull();
    const tree = node.querySelector('.memfit-fork-tree') as HTMLElement;
    expect(tree.querySelector('.memfit-fork-node')?.getAttribute('data-at')).toBe('2');
    expect(tree.textContent).toContain('read the file once');
    expect(tree.textContent).toContain('$0.0123');
    // the child's view waits for its widget, then follows it live
    const kid = new Source('child-model', headOf(child), child.events);
    registerLive(kid);
    expect(node.querySelector('.memfit-fork-child .memfit-live')).not.toBeNull();
    (tree.querySelector('.memfit-fork-node-button') as HTMLElement).click();
    const compare = node.querySelector('.memfit-fork-compare .memfit-compare') as HTMLElement;
    expect(compare.querySelector('.memfit-diverged')?.textContent).toContain('Diverged at iteration 2');
    expect(compare.querySelectorAll('.memfit-diverged-row[data-iteration="2"]').length).toBe(2);
    unregisterLive('parent-model');
    unregisterLive('child-model');
    widget.dispose();
  });

  it('reopened with no kernel: the saved tree and child, and the form writes the code to run', async () => {
    const parent = trace('spin-demo');
    const child = trace('demo');
    const saved = { ...entry(parent, child, 3, 'gone-model'), trace: child };
    const widget = renderer();
    await widget.renderModel({ data: { [RUN_MIME]: parent }, trusted: true, metadata: { [RUN_MIME]: { live_widget: 'gone-parent', forks: [saved] } }, setData: () => undefined } as any);
    const node = widget.node;
    expect(node.querySelector('.memfit-live')).toBeNull();
    expect(node.querySelector('.memfit-fork-node')?.getAttribute('data-status')).toBe(child.status);
    expect(node.querySelector('.memfit-fork-child .memfit-run .memfit-header')?.textContent).toContain(child.answer);
    (node.querySelector('.memfit-fork-open[data-at="1"]') as HTMLElement).click();
    const form = node.querySelector('.memfit-fork-form') as HTMLElement;
    expect(form.querySelector('button[data-action=fork]')).toBeNull();
    type(form, 'guidance', 'add the numbers once');
    expect(form.querySelector('.memfit-fork-magic')?.textContent).toBe(`%memfit fork ${parent.run_id} --at 1 --guidance 'add the numbers once'`);
    expect(form.querySelector('.memfit-fork-call')?.textContent).toContain('run.fork(at=1, guidance="add the numbers once")');
    (node.querySelector('.memfit-fork-node-button') as HTMLElement).click();
    expect(node.querySelectorAll('.memfit-fork-compare .memfit-diverged-row').length).toBe(2);
    widget.dispose();
  });
});
