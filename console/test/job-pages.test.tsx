import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BerthApi, type Caller, type RunInfo } from '../src/api';
import { layerLines, layerSentence } from '../src/jobdetail';
import { TELEMETRY_MS } from '../src/pages/job-detail';
import { json, platformAdmin as root, settle, startApp } from './support';

const member: Caller = { ...root, name: 'bob', platform_admin: false, tenants: { blue: 'member' } };
const GiB = 1024 ** 3;
const T0 = Date.parse('2026-03-10T15:00:00Z');

const run = (replica: number, attempt: number, over: Partial<RunInfo> = {}): RunInfo => ({
  replica,
  attempt,
  run_id: `7.${replica}.${attempt}`,
  node: replica === 0 ? 'gpu-a.example.com' : 'gpu-b',
  gpus: replica === 0 ? [2, 3] : [0, 1],
  gpu_uuids: [`GPU-${replica}a`, `GPU-${replica}b`],
  state: 'Running',
  exit_code: null,
  signal: null,
  stopped_for: '',
  started_at_ms: T0 + 60_000,
  finished_at_ms: null,
  ...over,
});

// A job as GET /v1/jobs/{id} answers it: spec, placement, runs, timeline.
function jobOf(id: number, state: string, over: Record<string, unknown> = {}) {
  return {
    id, name: `job-${id}`, tenant: 'blue', queue: 'main', submitted_by: 'bob', state,
    reason: { code: state === 'Pending' ? 'BehindInQueue' : state, counts: {}, detail: '', message: state },
    submitted_at_ms: T0, started_at_ms: state === 'Pending' ? null : T0 + 60_000, finished_at_ms: null,
    cancel_requested: false, exit_code: null, signal: null,
    spec: { name: `job-${id}`, priority: 'normal', replicas: 2, resources: { gpus: 2 } },
    placement: [], runs: [], timeline: [], utilization: null,
    ...over,
  };
}

const running = jobOf(7, 'Running', {
  placement: [run(0, 1), run(1, 1)],
  runs: [
    run(0, 0, { state: 'Exited', signal: 15, stopped_for: 'preempted', finished_at_ms: T0 + 120_000 }),
    run(1, 0, { state: 'Exited', signal: 15, stopped_for: 'gang', finished_at_ms: T0 + 120_000 }),
    run(0, 1),
    run(1, 1),
  ],
  timeline: [
    { time_ms: T0 + 180_000, state: 'Running', event: 'Started', message: 'all replicas running' },
    { time_ms: T0, state: 'Pending', event: 'Submitted', message: 'submitted by bob' },
    { time_ms: T0 + 120_000, state: 'Pending', event: 'Preempting', message: 'preempted by job 3' },
  ],
  utilization: {
    avg_util_pct: 61.25, max_util_pct: 99, avg_memory_used_bytes: 12 * GiB, max_memory_used_bytes: 20 * GiB,
    memory_total_bytes: 80 * GiB, idle_fraction: 0.125, longest_idle_ms: 0, samples: 48, first_ms: T0, last_ms: T0 + 240_000,
  },
});

const bucket = (start: number, util: number, samples = 6) => ({
  start_ms: start, width_ms: 60_000, run_ids: ['7.0.1'], samples, util_sum: util * samples, avg_util_pct: util,
  max_util_pct: util + 5, avg_mem_util_pct: util / 2, avg_memory_used_bytes: 10 * GiB, max_memory_used_bytes: 16 * GiB,
  memory_total_bytes: 80 * GiB,
});
const telemetry = {
  from_ms: T0, to_ms: T0 + 600_000, step_ms: 0, job: 7,
  runs: [],
  gpus: [
    { uuid: 'GPU-0a', node: 'gpu-a.example.com', gpu: 2, buckets: [bucket(T0 + 120_000, 40), bucket(T0 + 180_000, 80)] },
    { uuid: 'GPU-0b', node: 'gpu-a.example.com', gpu: 3, buckets: [bucket(T0 + 180_000, 20)] },
    { uuid: 'GPU-1a', node: 'gpu-b', gpu: 0, buckets: [] },
  ],
};

const layers = [
  { layer: 'order', code: 'BehindInQueue' },
  { layer: 'nodes', nodes: 2, could_take: 0, excluded: [{ cause: 'node_selector_mismatch', nodes: 2 }] },
];
// Job 10 waits for nodes with a verified hint (berthd's reason.hint, also
// the end of its message); its only layer is the nodes.
const modelCounts = { nodes: 1, gpu_model_mismatch: 1, gpus_per_replica: 1 };
const modelHint = { en: 'it would run now with gpu_model H100-80GB', zh: '若改用 H100-80GB 型号的 GPU，现在即可运行' };
const behindCounts = { position: 2, ahead_jobs: 1, ahead_gpus: 16, not_before_ms: T0 + 3_600_000, not_before_in_ms: 3_600_000, blocked_by: 5 };

interface Opts {
  // Job 7's state on each read; its telemetry's answer.
  state?: () => string;
  telemetry?: () => Response;
}

function mount(who: Caller, path: string, opts: Opts = {}) {
  const calls: string[] = [];
  const api = new BerthApi(async (url) => {
    calls.push(url);
    const zh = url.endsWith('lang=zh');
    if (url === '/v1/console/session') return json(200, who);
    if (url.startsWith('/v1/jobs?')) return json(200, { jobs: [] });
    if (url === '/v1/jobs/7') {
      const state = opts.state?.() ?? 'Running';
      return json(200, { ...running, state, finished_at_ms: state === 'Succeeded' ? T0 + 300_000 : null });
    }
    if (url.startsWith('/v1/jobs/7/why')) {
      return json(200, { id: 7, state: 'Running', lang: zh ? 'zh' : 'en', reason: { code: 'Running', counts: {}, message: zh ? '运行中' : 'running' }, failure: null, timeline: [] });
    }
    if (url.startsWith('/v1/jobs/7/telemetry')) return opts.telemetry ? opts.telemetry() : json(200, telemetry);
    if (url === '/v1/jobs/8') return json(200, jobOf(8, 'Pending', { reason: { code: 'BehindInQueue', counts: behindCounts, detail: '', message: 'behind' } }));
    if (url.startsWith('/v1/jobs/8/why')) {
      return json(200, {
        id: 8, state: 'Pending', lang: zh ? 'zh' : 'en', failure: null, timeline: [],
        reason: { code: 'BehindInQueue', counts: behindCounts, detail: '', message: zh ? '排在后面' : 'behind job 5 in its queue', layers },
      });
    }
    if (url === '/v1/jobs/10') return json(200, jobOf(10, 'Pending', { reason: { code: 'NoNodeFits', counts: modelCounts, detail: 'gpu_model=H100-80GB', message: 'no node' } }));
    if (url.startsWith('/v1/jobs/10/why')) {
      const hint = zh ? modelHint.zh : modelHint.en;
      return json(200, {
        id: 10, state: 'Pending', lang: zh ? 'zh' : 'en', failure: null, timeline: [],
        reason: {
          code: 'NoNodeFits', counts: modelCounts, detail: 'gpu_model=H100-80GB', hint,
          message: zh ? `0/1 个节点可以容纳副本：1 个没有所需型号的 GPU；${hint}` : `0/1 nodes fit a replica: 1 no GPU of the requested model; ${hint}`,
          layers: [{ layer: 'nodes', code: 'NoNodeFits' }],
        },
      });
    }
    if (url === '/v1/jobs/9') {
      return json(200, jobOf(9, 'Failed', {
        exit_code: 1, finished_at_ms: T0 + 200_000,
        runs: [run(0, 0, { run_id: '9.0.0', state: 'Exited', exit_code: 1, finished_at_ms: T0 + 200_000 })],
        placement: [run(0, 0, { run_id: '9.0.0', state: 'Exited', exit_code: 1, finished_at_ms: T0 + 200_000 })],
      }));
    }
    if (url.startsWith('/v1/jobs/9/why')) {
      return json(200, {
        id: 9, state: 'Failed', lang: zh ? 'zh' : 'en', timeline: [],
        reason: { code: 'FailedExitCode', counts: { replica: 0 }, message: 'failed' },
        failure: {
          class: 'gpu_out_of_memory',
          message: zh ? '副本 0 的 GPU 显存不足。' : 'Replica 0 ran out of GPU memory.',
          evidence: 'torch.OutOfMemoryError: CUDA out of memory',
        },
      });
    }
    if (url.startsWith('/v1/jobs/9/telemetry')) return json(200, { ...telemetry, job: 9, gpus: [] });
    if (url.startsWith('/v1/usage/records?job=7&')) {
      return json(200, {
        currency: 'USD', total_records: 4, records: [],
        total: { key: {}, mgpu_ms: 9_000_000, allocated_gpu_hours: 2.5, cost_micros: 7_500_000, cost: '7.50', runs: 4, idle_gpu_hours: 0.25, idle_cost: '0.75' },
      });
    }
    if (url.startsWith('/v1/usage/records?job=9&')) {
      return json(200, { currency: 'USD', total_records: 0, records: [], total: { key: {}, mgpu_ms: 0, allocated_gpu_hours: 0, cost_micros: 0, cost: '0.00', runs: 0 } });
    }
    if (url.includes('/logs')) return new Response(new ReadableStream());
    return json(404, { error: { message: 'no' } });
  });
  return { root: startApp(api, path), calls };
}

const text = (el: Element | null | undefined) => el?.textContent?.trim() ?? '';

describe('the job page: placement, timeline and utilization', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    vi.useRealTimers();
    document.body.innerHTML = '';
  });

  it("shows the job's cost from its own usage records, idle part included, in both languages", async () => {
    const { root: r, calls } = mount(member, '/ui/jobs/7');
    await settle(() => r.querySelector('#job-cost') !== null);
    expect(text(r.querySelector('#job-cost'))).toBe('2.50 GPU-hours over 4 run(s): 7.50 USD');
    expect(text(r.querySelector('#job-cost-idle'))).toBe('Of which idle: 0.25 GPU-hours, 0.75 USD');
    // The job's records only, from its submission.
    expect(calls).toContain(`/v1/usage/records?job=7&from=${T0}&limit=1`);
    localStorage.setItem('berth.console.lang', 'zh');
    document.body.innerHTML = '';
    const { root: zh } = mount(member, '/ui/jobs/7');
    await settle(() => zh.querySelector('#job-cost') !== null);
    expect(text(zh.querySelector('#job-cost'))).toBe('4 次运行共 2.50 GPU 小时：7.50 USD');
  });

  it('says when no GPU time is recorded for the job', async () => {
    const { root: r } = mount(member, '/ui/jobs/9');
    await settle(() => r.querySelector('#job-cost-none') !== null);
    expect(text(r.querySelector('#job-cost-none'))).toBe('No GPU time recorded for this job yet.');
    expect(r.querySelector('#job-cost')).toBeNull();
  });

  it("shows every attempt's replicas with node links and GPU indices, the newest attempt first", async () => {
    const { root: r } = mount(member, '/ui/jobs/7');
    await settle(() => r.querySelector('#placement-1') !== null);
    const tables = [...r.querySelectorAll('table.placement')];
    expect(tables.map((t) => [t.getAttribute('data-attempt'), t.getAttribute('data-current')])).toEqual([
      ['1', 'true'],
      ['0', 'false'],
    ]);
    expect(text(tables[0].querySelector('caption'))).toBe('Attempt 1 (the current one)');
    const rows = [...tables[0].querySelectorAll('tbody tr')];
    expect(rows.map((tr) => [text(tr.querySelector('th')), text(tr.querySelector('.node')), text(tr.querySelector('.gpus')), text(tr.querySelector('.run-state'))])).toEqual([
      ['0', 'gpu-a.example.com', '2, 3', 'Running'],
      ['1', 'gpu-b', '0, 1', 'Running'],
    ]);
    expect(rows[0].querySelector('.node a')!.getAttribute('href')).toBe('/ui/fleet/gpu-a.example.com');
    expect(rows[0].querySelector('.gpus')!.getAttribute('data-gpus')).toBe('2,3');
    const before = [...tables[1].querySelectorAll('tbody tr .outcome')].map((td) => text(td));
    expect(before).toEqual(['signal 15, stopped: preempted', 'signal 15, stopped: another replica of its gang ended']);
  });

  it('lists the whole timeline, oldest first and newest last', async () => {
    const { root: r } = mount(member, '/ui/jobs/7');
    await settle(() => r.querySelector('#job-timeline') !== null);
    expect([...r.querySelectorAll('#job-timeline li')].map((li) => li.getAttribute('data-event'))).toEqual(['Submitted', 'Preempting', 'Started']);
    const last = r.querySelector('#job-timeline li:last-child')!;
    expect(last.querySelector('time')!.getAttribute('datetime')).toBe(new Date(T0 + 180_000).toISOString());
    expect(text(last)).toContain('all replicas running');
  });

  it('draws a line per GPU with samples in an SVG with a title and description, with figures per GPU and over all runs', async () => {
    const { root: r } = mount(member, '/ui/jobs/7');
    await settle(() => r.querySelector('#util-chart') !== null);
    const svg = r.querySelector('#util-chart')!;
    expect(svg.getAttribute('role')).toBe('img');
    expect(svg.getAttribute('aria-labelledby')).toBe('util-chart-title util-chart-desc');
    expect(text(svg.querySelector('title#util-chart-title'))).toBe('GPU utilization over time');
    expect(text(svg.querySelector('desc'))).toMatch(/^One line per GPU the job held/);
    const lines = [...svg.querySelectorAll('g[data-gpu]')];
    expect(lines.map((g) => [g.getAttribute('data-gpu'), g.getAttribute('data-points')])).toEqual([
      ['gpu-a.example.com/2', '2'],
      ['gpu-a.example.com/3', '1'],
    ]);
    expect(lines[0].querySelector('path')!.getAttribute('d')).toMatch(/^M [\d.]+ [\d.]+ L [\d.]+ [\d.]+$/);
    const rows = [...r.querySelectorAll('#util-gpus tbody tr')];
    expect(rows.map((tr) => [text(tr.querySelector('th')), text(tr.querySelector('.mean')), text(tr.querySelector('.max'))])).toEqual([
      ['gpu-a.example.com GPU 2', '60.0%', '85.0%'],
      ['gpu-a.example.com GPU 3', '20.0%', '25.0%'],
    ]);
    // berthd's own summary over every run.
    expect(text(r.querySelector('#util-mean'))).toBe('61.3%');
    expect(text(r.querySelector('#util-max'))).toBe('99.0%');
    expect(text(r.querySelector('#util-summary'))).toContain('20 GiB of 80 GiB');
  });

  it('asks for the telemetry every 10 s while the job runs, once more when it has finished, then no more', async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    let state = 'Running';
    const { root: r, calls } = mount(member, '/ui/jobs/7', { state: () => state });
    const reads = () => calls.filter((c) => c.startsWith('/v1/jobs/7/telemetry')).length;
    await settle(() => r.querySelector('#util-chart') !== null);
    expect(reads()).toBe(1);
    await vi.advanceTimersByTimeAsync(TELEMETRY_MS);
    await settle(() => reads() === 2);
    state = 'Succeeded';
    await vi.advanceTimersByTimeAsync(3000);
    await settle(() => text(r.querySelector('#job-state')) === 'Succeeded');
    await settle(() => reads() === 3);
    await vi.advanceTimersByTimeAsync(TELEMETRY_MS * 3);
    expect(reads()).toBe(3);
  });

  it('says so when berthd keeps no telemetry, and does not ask again', async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    const { root: r, calls } = mount(member, '/ui/jobs/7', {
      telemetry: () => json(503, { error: { code: 'Unavailable', message: 'this berthd keeps no GPU telemetry' } }),
    });
    await settle(() => r.querySelector('#util-off') !== null);
    expect(text(r.querySelector('#util-off'))).toBe('GPU utilization is not measured: this berthd keeps no GPU telemetry.');
    await vi.advanceTimersByTimeAsync(TELEMETRY_MS * 2);
    expect(calls.filter((c) => c.startsWith('/v1/jobs/7/telemetry')).length).toBe(1);
    expect(r.querySelector('#util-chart')).toBeNull();
  });
});

describe('the job page: why it waits and why it failed', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    vi.useRealTimers();
    document.body.innerHTML = '';
  });

  it("ranks the layers under the reason's message with their numbers, and shows when it could start", async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(T0);
    const { root: r, calls } = mount(member, '/ui/jobs/8');
    await settle(() => r.querySelector('#why-layers') !== null);
    expect(text(r.querySelector('#why-message'))).toBe('behind job 5 in its queue');
    const items = [...r.querySelectorAll('#why-layers li')];
    expect(items.map((li) => li.getAttribute('data-layer'))).toEqual(['order', 'nodes']);
    const lines = layerLines(layers, { code: 'BehindInQueue', message: '', counts: behindCounts }, 'en');
    expect(text(items[0])).toBe(`${layerSentence(lines[0], 'en')} (holds it now)`);
    expect(text(items[1])).toBe('Nodes: 0 of 2 could ever take a replica — 2 with labels not matching the node selector');
    expect([items[1].getAttribute('data-nodes'), items[1].getAttribute('data-could-take')]).toEqual(['2', '0']);
    expect([...items[1].querySelectorAll('[data-cause]')].map((c) => [c.getAttribute('data-cause'), c.getAttribute('data-nodes')])).toEqual([
      ['node_selector_mismatch', '2'],
    ]);
    expect(r.querySelector('#why-eta')!.getAttribute('data-kind')).toBe('not_before');
    // An hour from the reader's now, on the reader's clock.
    expect(text(r.querySelector('#why-eta-when'))).toMatch(/\d\d:\d\d \(in about 60 min\)$/);
    expect(text(r.querySelector('#why-eta-basis'))).toBe('not before job 5, first in its queue, starts');
    // Never placed: no placement, no telemetry asked for.
    expect(text(r.querySelector('#placement-none'))).toBe('No replica has been placed yet.');
    expect(calls.some((c) => c.includes('/telemetry'))).toBe(false);
    expect(r.querySelector('#failure-class')).toBeNull();
  });

  it("leads with the verified hint, then berthd's sentence, then the layers, in both languages", async () => {
    const { root: r } = mount(member, '/ui/jobs/10');
    await settle(() => r.querySelector('#why-layers') !== null);
    const order = (root: ParentNode) => [...root.querySelector('.why')!.children].map((el) => el.id).filter((id) => id.startsWith('why-'));
    expect(order(r)).toEqual(['why-hint', 'why-message', 'why-layers-h', 'why-layers']);
    expect(text(r.querySelector('#why-hint'))).toBe(`Smallest change, checked by the scheduler: ${modelHint.en}`);
    expect(r.querySelector('#why-hint')!.getAttribute('data-hint')).toBe(modelHint.en);
    expect(text(r.querySelector('#why-message'))).toMatch(/^0\/1 nodes fit/);
    expect([...r.querySelectorAll('#why-layers li')].map((li) => li.getAttribute('data-layer'))).toEqual(['nodes']);
    document.body.innerHTML = '';
    localStorage.setItem('berth.console.lang', 'zh');
    const { root: z } = mount(member, '/ui/jobs/10');
    await settle(() => z.querySelector('#why-layers') !== null);
    expect(order(z)[0]).toBe('why-hint');
    expect(text(z.querySelector('#why-hint'))).toBe(`最小改动（已由调度器验证）：${modelHint.zh}`);
    expect(z.querySelector('#why-hint')!.getAttribute('lang')).toBe('zh-CN');
  });

  it('has no hint line for a job whose reason carries none', async () => {
    const { root: r } = mount(member, '/ui/jobs/8');
    await settle(() => r.querySelector('#why-layers') !== null);
    expect(r.querySelector('#why-hint')).toBeNull();
    expect(r.querySelector('.why')!.firstElementChild!.id).toBe('why-message');
  });

  it('speaks Chinese: the layers, the placement and the timeline', async () => {
    localStorage.setItem('berth.console.lang', 'zh');
    const { root: r } = mount(member, '/ui/jobs/8');
    await settle(() => r.querySelector('#why-layers') !== null);
    expect(text(r.querySelector('#why-message'))).toBe('排在后面');
    expect(text(r.querySelector('#why-layers li[data-layer="nodes"]'))).toBe('节点：2 个节点中有 0 个能够容纳它的副本——2 个标签与节点选择器不匹配');
    expect(text(r.querySelector('#why-layers li[data-layer="order"]'))).toMatch(/^队列顺序：在队列等待的作业中排第 2 位.*（当前原因）$/);
    expect(text(r.querySelector('#placement-h'))).toBe('放置位置');
    expect(text(r.querySelector('#history-h'))).toBe('时间线');
    expect(text(r.querySelector('#why-eta dt'))).toBe('预计开始时间');
  });

  it("shows a failed job's class, berthd's sentence and the evidence, in both languages", async () => {
    const { root: r } = mount(member, '/ui/jobs/9');
    await settle(() => r.querySelector('#failure-class') !== null);
    expect(r.querySelector('#failure-class')!.getAttribute('data-class')).toBe('gpu_out_of_memory');
    expect(text(r.querySelector('#failure-class'))).toBe('GPU out of memory');
    expect(text(r.querySelector('#failure-message'))).toBe('Replica 0 ran out of GPU memory.');
    expect(text(r.querySelector('#failure-evidence'))).toBe('torch.OutOfMemoryError: CUDA out of memory');
    expect(text(r.querySelector('#placement-0 .outcome'))).toBe('exit code 1');
    await settle(() => r.querySelector('#util-none') !== null);
    expect(text(r.querySelector('#util-none'))).toBe('No GPU samples yet.');
    document.body.innerHTML = '';
    localStorage.setItem('berth.console.lang', 'zh');
    const { root: z } = mount(member, '/ui/jobs/9');
    await settle(() => z.querySelector('#failure-class') !== null);
    expect(text(z.querySelector('#failure-h'))).toBe('失败原因');
    expect(text(z.querySelector('#failure-class'))).toBe('GPU 显存不足');
    expect(text(z.querySelector('#failure-message'))).toBe('副本 0 的 GPU 显存不足。');
    expect(z.querySelector('#failure-message')!.getAttribute('lang')).toBe('zh-CN');
  });

  it('shows no failure for a job that runs', async () => {
    const { root: r } = mount(member, '/ui/jobs/7');
    await settle(() => r.querySelector('#why-message') !== null);
    expect(r.querySelector('#failure-h')).toBeNull();
    expect(r.querySelector('#why-layers')).toBeNull();
    expect(r.querySelector('#why-eta')).toBeNull();
  });
});
