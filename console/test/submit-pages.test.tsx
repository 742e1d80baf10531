import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BerthApi, type Caller } from '../src/api';
import { POLL_MS } from '../src/pages/job';
import { click, json, platformAdmin as root, settle, startApp } from './support';

const blueMember: Caller = { ...root, name: 'bob', platform_admin: false, tenants: { blue: 'member' } };
const blueViewer: Caller = { ...root, name: 'vic', platform_admin: false, tenants: { blue: 'viewer' } };

const queueRow = (queue: string, parent: string | null) => ({
  queue, tenant: 'blue', parent, kind: 'training', over_quota: 'borrow', used_mgpu: 0, running_jobs: 0,
  guaranteed_mgpu: null, borrow_limit_mgpu: null, lending_limit_mgpu: null, borrowed_mgpu: null,
  idle_guaranteed_mgpu: null, lendable_mgpu: null,
});
const blueQueues = { policy_version: 2, queues: [queueRow('blue', null), queueRow('blue/main', 'blue'), queueRow('blue/dev', 'blue')] };

// One job as GET /v1/jobs/{id} (and POST /v1/jobs) answer it: priority,
// replicas and resources in its spec only.
const job = (state: string) => ({
  id: 42, name: 'demo', tenant: 'blue', queue: 'main', submitted_by: 'bob', state,
  reason: { code: state === 'Pending' ? 'NoNodeFits' : state, message: `why ${state}` },
  submitted_at_ms: 1, started_at_ms: state === 'Pending' ? null : 2, finished_at_ms: state === 'Succeeded' ? 3 : null,
  cancel_requested: false,
  spec: { name: 'demo', tenant: 'blue', queue: 'main', command: ['sh'], priority: 'high', replicas: 2, resources: { gpus: 3, gpu_model: '' } },
});

interface Call {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
}

interface Opts {
  // The answer to POST /v1/jobs: [status, body]; default 201 and job 42.
  submit?: [number, unknown];
  // Job 42's state, read on every GET.
  state?: () => string;
  // The log route's answer: a stream the test writes to, or a refusal.
  logs?: () => Response;
}

function mount(who: Caller, path: string, opts: Opts = {}) {
  const calls: Call[] = [];
  const api = new BerthApi(async (url, init) => {
    const method = init?.method ?? 'GET';
    calls.push({ method, url, headers: { ...(init?.headers as Record<string, string>) }, body: init?.body as string, signal: init?.signal ?? undefined });
    if (url === '/v1/console/session') return json(200, who);
    if (url === '/v1/queues') return json(200, blueQueues);
    if (url.startsWith('/v1/jobs?')) return json(200, { jobs: [] });
    if (url === '/v1/jobs' && method === 'POST') {
      const [status, body] = opts.submit ?? [201, job('Pending')];
      return json(status, body);
    }
    const state = opts.state?.() ?? 'Pending';
    if (url === '/v1/jobs/42') return json(200, job(state));
    if (url.startsWith('/v1/jobs/42/why')) {
      const zh = url.endsWith('lang=zh');
      return json(200, { id: 42, state, lang: zh ? 'zh' : 'en', reason: { code: 'X', message: zh ? `原因 ${state}` : `why ${state}` }, timeline: [] });
    }
    if (url === '/v1/jobs/42/logs?follow=true') return opts.logs ? opts.logs() : new Response(new ReadableStream());
    return json(404, { error: { message: 'no' } });
  });
  return { root: startApp(api, path), calls };
}

const type = (el: Element | null, value: string, event = 'input') => {
  expect(el).not.toBeNull();
  const input = el as HTMLInputElement;
  input.value = value;
  input.dispatchEvent(new Event(event, { bubbles: true }));
};
const text = (el: Element | null) => el?.textContent?.trim() ?? '';
const posts = (calls: Call[]) => calls.filter((c) => c.method === 'POST');

describe('the submit page', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it("is linked from a member's jobs page; the form's job is posted as JSON and its page opens", async () => {
    const { root: r, calls } = mount(blueMember, '/ui/jobs');
    await settle(() => r.querySelector('#submit-link') !== null);
    click(r.querySelector('#submit-link'));
    await settle(() => r.querySelector('#submit-target') !== null);
    expect(location.pathname).toBe('/ui/submit');
    // The queues below blue's root, where a job can go.
    expect([...r.querySelectorAll<HTMLOptionElement>('#submit-target option')].map((o) => o.value)).toEqual(['blue/main', 'blue/dev']);
    expect(calls.filter((c) => c.url.startsWith('/v1/queues')).map((c) => c.url)).toEqual(['/v1/queues']);
    type(r.querySelector('#submit-name'), 'demo');
    type(r.querySelector('#submit-target'), 'blue/dev', 'change');
    type(r.querySelector('#submit-command'), "sh -c 'echo hello; sleep 2; echo done'");
    type(r.querySelector('#submit-gpus'), '2');
    type(r.querySelector('#submit-max-runtime'), '10m');
    type(r.querySelector('#submit-priority'), 'high', 'change');
    click(r.querySelector('#submit-job'));
    await settle(() => r.querySelector('#job-title') !== null);
    expect(location.pathname).toBe('/ui/jobs/42');
    const post = posts(calls)[0];
    expect(post.url).toBe('/v1/jobs');
    expect(post.headers['Content-Type']).toBe('application/json');
    expect(post.headers['X-Berth-CSRF']).toBe('c5rf');
    expect(JSON.parse(post.body!)).toEqual({
      name: 'demo',
      tenant: 'blue',
      queue: 'dev',
      command: ['sh', '-c', 'echo hello; sleep 2; echo done'],
      resources: { gpus: 2 },
      max_runtime: '10m',
      priority: 'high',
    });
  });

  it("puts a 400's message on the field it names, and one the form lacks above the form with its name", async () => {
    const message = "'lots' is not an integer";
    const { root: r, calls } = mount(blueMember, '/ui/submit', {
      submit: [400, { error: { code: 'InvalidArgument', field: 'resources.gpus', message } }],
    });
    await settle(() => r.querySelector('#submit-gpus') !== null);
    type(r.querySelector('#submit-name'), 'demo');
    type(r.querySelector('#submit-command'), 'true');
    type(r.querySelector('#submit-gpus'), 'lots');
    click(r.querySelector('#submit-job'));
    await settle(() => r.querySelector('#submit-gpus-error') !== null);
    expect(text(r.querySelector('#submit-gpus-error'))).toBe(message);
    expect(r.querySelector('#submit-gpus')!.getAttribute('aria-invalid')).toBe('true');
    expect(r.querySelector('#submit-gpus')!.getAttribute('aria-describedby')).toBe('submit-gpus-error');
    expect(r.querySelector('#submit-name')!.getAttribute('aria-invalid')).toBeNull();
    expect(JSON.parse(posts(calls)[0].body!).resources).toEqual({ gpus: 'lots' });
    expect(location.pathname).toBe('/ui/submit');
  });

  it('names a field the form has no input for above the form', async () => {
    const { root: r } = mount(blueMember, '/ui/submit', {
      submit: [400, { error: { code: 'InvalidArgument', field: 'resources.cpu', message: 'too many' } }],
    });
    await settle(() => r.querySelector('#submit-name') !== null);
    type(r.querySelector('#submit-command'), 'true');
    click(r.querySelector('#submit-job'));
    await settle(() => r.querySelector('#submit-error') !== null);
    expect(text(r.querySelector('#submit-error'))).toBe('resources.cpu: too many');
  });

  it('refuses an open quote in the command before asking the server', async () => {
    const { root: r, calls } = mount(blueMember, '/ui/submit');
    await settle(() => r.querySelector('#submit-command') !== null);
    type(r.querySelector('#submit-command'), "sh -c 'echo");
    click(r.querySelector('#submit-job'));
    await settle(() => r.querySelector('#submit-command-error') !== null);
    expect(text(r.querySelector('#submit-command-error'))).toBe('A quote is opened and not closed.');
    expect(posts(calls)).toEqual([]);
  });

  it('sends the YAML as written, and shows a refusal beside the editor with the field it names', async () => {
    const { root: r, calls } = mount(blueMember, '/ui/submit', {
      submit: [400, { error: { code: 'InvalidArgument', field: 'resources.gpus', message: '99 GPUs per replica is not allowed; use 0 to 64' } }],
    });
    await settle(() => r.querySelector('#mode-yaml') !== null);
    type(r.querySelector('#submit-name'), 'from-form');
    type(r.querySelector('#submit-command'), 'python3 train.py');
    click(r.querySelector('#mode-yaml'));
    await settle(() => r.querySelector('#spec-yaml') !== null);
    // It starts as the form was filled in.
    expect((r.querySelector('#spec-yaml') as HTMLTextAreaElement).value).toBe(
      'name: from-form\ntenant: blue\nqueue: main\ncommand: [python3, train.py]\nresources:\n  gpus: 1\n',
    );
    const spec = 'name: big\ntenant: blue\nqueue: main\ncommand: [sleep, "60"]\nresources:\n  gpus: 99\n';
    type(r.querySelector('#spec-yaml'), spec);
    click(r.querySelector('#submit-job'));
    await settle(() => r.querySelector('#submit-error') !== null);
    expect(text(r.querySelector('#submit-error'))).toBe('resources.gpus: 99 GPUs per replica is not allowed; use 0 to 64');
    expect(r.querySelector('#submit-error')!.getAttribute('data-field')).toBe('resources.gpus');
    expect(r.querySelector('#spec-yaml')!.getAttribute('aria-invalid')).toBe('true');
    const post = posts(calls)[0];
    expect(post.body).toBe(spec);
    expect(post.headers['Content-Type']).toBe('application/yaml');
    expect(post.headers['X-Berth-CSRF']).toBe('c5rf');
  });

  it('names the spec as a whole for an error with no field (text that is not YAML)', async () => {
    const message = 'the spec is not a valid YAML document: line 2, column 1: end of sequence flow not found';
    const { root: r } = mount(blueMember, '/ui/submit', { submit: [400, { error: { code: 'InvalidArgument', message } }] });
    await settle(() => r.querySelector('#mode-yaml') !== null);
    click(r.querySelector('#mode-yaml'));
    await settle(() => r.querySelector('#spec-yaml') !== null);
    expect((r.querySelector('#spec-yaml') as HTMLTextAreaElement).value).toContain('queue: main');
    type(r.querySelector('#spec-yaml'), 'name: [bad\n');
    click(r.querySelector('#submit-job'));
    await settle(() => r.querySelector('#submit-error') !== null);
    expect(text(r.querySelector('#submit-error'))).toBe(`the spec: ${message}`);
  });

  it("shows a 429's or a 409's message as the server wrote it", async () => {
    for (const [status, code] of [
      [429, 'ResourceExhausted'],
      [409, 'FailedPrecondition'],
    ] as const) {
      const message = `${code}: bob has 100 pending jobs in tenant blue`;
      const { root: r } = mount(blueMember, '/ui/submit', { submit: [status, { error: { code, message } }] });
      await settle(() => r.querySelector('#submit-command') !== null);
      type(r.querySelector('#submit-command'), 'true');
      click(r.querySelector('#submit-job'));
      await settle(() => r.querySelector('#submit-refused') !== null);
      expect(text(r.querySelector('#submit-refused'))).toBe(`The server refused the job: ${message}`);
      document.body.innerHTML = '';
    }
  });

  it('gives a viewer no link and no form, and asks for nothing', async () => {
    const { root: r, calls } = mount(blueViewer, '/ui/jobs');
    await settle(() => r.querySelector('#jobs-empty') !== null);
    expect(r.querySelector('#submit-link')).toBeNull();
    document.body.innerHTML = '';
    const { root: s, calls: asked } = mount(blueViewer, '/ui/submit');
    await settle(() => s.querySelector('#submit-denied') !== null);
    expect(s.querySelector('#submit-form')).toBeNull();
    expect([...calls, ...asked].filter((c) => c.url !== '/v1/console/session' && !c.url.startsWith('/v1/jobs?'))).toEqual([]);
  });

  it('speaks Chinese', async () => {
    localStorage.setItem('berth.console.lang', 'zh');
    const { root: r } = mount(blueMember, '/ui/submit');
    await settle(() => r.querySelector('#submit-target') !== null);
    expect(text(r.querySelector('h1'))).toBe('提交作业');
    expect(text(r.querySelector('label[for="submit-command"]'))).toBe('命令');
    expect(text(r.querySelector('#submit-job'))).toBe('提交');
  });
});

describe('the job page, live', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    vi.useRealTimers();
    document.body.innerHTML = '';
  });

  it('follows Pending, Running and Succeeded without a reload, appends the output as it arrives, and then stops asking', async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    let state = 'Pending';
    let out!: ReadableStreamDefaultController<Uint8Array>;
    const logs = () =>
      new Response(
        new ReadableStream<Uint8Array>({
          start(c) {
            out = c;
          },
        }),
      );
    const { root: r, calls } = mount(blueMember, '/ui/jobs/42', { state: () => state, logs });
    await settle(() => text(r.querySelector('#job-state')) === 'Pending');
    // Its shape from its spec.
    expect(text(r.querySelector('#job-gpus'))).toBe('3');
    expect(text(r.querySelector('dl.summary'))).toContain('Replicas2');
    expect(text(r.querySelector('dl.summary'))).toContain('Priorityhigh');
    await settle(() => r.querySelector('#log-status')?.getAttribute('data-state') === 'following');
    expect(text(r.querySelector('#log-empty'))).toBe('No output yet.');
    const jobReads = () => calls.filter((c) => c.url === '/v1/jobs/42').length;
    const whyReads = () => calls.filter((c) => c.url.startsWith('/v1/jobs/42/why')).length;
    expect([jobReads(), whyReads()]).toEqual([1, 1]);

    // Nothing moved: one request a poll, the job's; no why.
    await vi.advanceTimersByTimeAsync(POLL_MS);
    await settle(() => jobReads() === 2);
    expect(whyReads()).toBe(1);

    state = 'Running';
    await vi.advanceTimersByTimeAsync(POLL_MS);
    await settle(() => text(r.querySelector('#job-state')) === 'Running');
    await settle(() => text(r.querySelector('#why-message')) === 'why Running');
    expect(whyReads()).toBe(2);

    const enc = new TextEncoder();
    out.enqueue(enc.encode('hello\n'));
    await settle(() => text(r.querySelector('#job-log')) === 'hello');
    out.enqueue(enc.encode('done\n'));
    await settle(() => r.querySelector('#job-log')?.textContent === 'hello\ndone\n');
    expect(r.querySelector('#job-log')!.getAttribute('tabindex')).toBe('0');

    // The job ends; its stream ends; the page asks for the job at once.
    state = 'Succeeded';
    const before = jobReads();
    out.close();
    await settle(() => text(r.querySelector('#job-state')) === 'Succeeded');
    expect(jobReads()).toBe(before + 1);
    await settle(() => r.querySelector('#log-status')?.getAttribute('data-state') === 'ended');
    expect(text(r.querySelector('#log-status'))).toBe('The job has finished; this is all of its output.');

    // Finished: no more polls, and the log is not asked again.
    const settled = calls.length;
    await vi.advanceTimersByTimeAsync(POLL_MS * 5);
    expect(calls.length).toBe(settled);
    expect(calls.filter((c) => c.url.includes('/logs')).length).toBe(1);
  });

  it("shows the server's refusal of the log, and still the job", async () => {
    const { root: r } = mount(blueMember, '/ui/jobs/42', {
      logs: () => json(403, { error: { code: 'PermissionDenied', message: 'bob may not read the logs of tenant blue' } }),
    });
    await settle(() => r.querySelector('#log-refused') !== null);
    expect(text(r.querySelector('#log-refused'))).toBe('The output cannot be shown: bob may not read the logs of tenant blue');
    expect(text(r.querySelector('#job-state'))).toBe('Pending');
  });

  it('stops the stream when the reader leaves the page', async () => {
    const { root: r, calls } = mount(blueMember, '/ui/jobs/42');
    await settle(() => r.querySelector('#log-status')?.getAttribute('data-state') === 'following');
    const signal = calls.find((c) => c.url.includes('/logs'))!.signal!;
    expect(signal.aborted).toBe(false);
    click(r.querySelector('a[href="/ui/jobs"]'));
    await settle(() => r.querySelector('#jobs-empty') !== null);
    expect(signal.aborted).toBe(true);
  });
});
