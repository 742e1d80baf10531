import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BerthApi, type Caller, type FleetGpu } from '../src/api';
import { click, json, platformAdmin as admin, settle, startApp } from './support';

const blueMember: Caller = { ...admin, name: 'bob', platform_admin: false, tenants: { blue: 'member' } };

const node = {
  name: 'gpu-a1',
  hostname: 'gpu-a1',
  address: '10.0.0.7',
  state: 'Ready',
  state_changed_ms: 1,
  connected: true,
  last_heartbeat_ms: 2,
  gpus_total: 4,
  gpus_free: 2,
  models: ['H100-80GB'],
  cordon: null,
  gpus_cordoned: 0,
  gpu_provider: 'simulated',
};

const gpu = (index: number, extra: Partial<FleetGpu> = {}): FleetGpu => ({
  node: 'gpu-a1',
  node_state: 'Ready',
  index,
  uuid: `SIM-gpu-a1-${index}`,
  model: 'H100-80GB',
  memory_bytes: 85899345920,
  health: 'healthy',
  health_detail: '',
  cordon: null,
  job: null,
  sharing: null,
  ...extra,
});

// What berthd answers a member of blue: its own job by name, red's job as
// "another tenant" with no id.
const gpus = [
  gpu(0, { job: { id: 5, name: 'blue-train', tenant: 'blue', queue: 'blue/main', replica: 0, run_id: '5.0.1' } }),
  gpu(1, { job: { id: null, name: 'another tenant', tenant: null, queue: null, other_tenant: true } }),
  gpu(2),
  gpu(3, { cordon: { kind: 'cordon', reason: 'fan noise', by: 'alice', automatic: false, at_ms: 3 } }),
];

interface Call {
  method: string;
  url: string;
  headers: Record<string, string>;
}

function mount(who: Caller, path: string, refuse = '', list: FleetGpu[] = gpus) {
  const calls: Call[] = [];
  const api = new BerthApi(async (url, init) => {
    const method = init?.method ?? 'GET';
    calls.push({ method, url, headers: { ...(init?.headers as Record<string, string>) } });
    if (url === '/v1/console/session') return json(200, who);
    if (url === '/v1/nodes') return json(200, { nodes: [node] });
    if (url === '/v1/gpus') return json(200, { gpus: list });
    if (url === '/v1/nodes/gpu-a1' && method === 'GET') {
      return json(200, { ...node, gpus, events: [
        { time_ms: 10, event: 'Registered', message: 'first' },
        { time_ms: 20, event: 'Ready', message: 'second' },
      ] });
    }
    if (method === 'POST' && url.startsWith('/v1/nodes/gpu-a1/')) {
      if (refuse) return json(403, { error: { code: 'PermissionDenied', message: refuse } });
      return json(200, { node: 'gpu-a1' });
    }
    return json(404, { error: { message: 'no' } });
  });
  return { root: startApp(api, path), calls };
}

describe('the fleet map', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it('draws a labelled cell per GPU, links only jobs the caller can read, and sums up', async () => {
    const { root } = mount(blueMember, '/ui/fleet');
    await settle(() => root.querySelector('#fleet-map') !== null);
    const cells = root.querySelectorAll('#fleet-map .gpu');
    expect(cells.length).toBe(4);
    const own = root.querySelector('#fleet-map [data-gpu="0"]')!;
    expect(own.tagName).toBe('A');
    expect(own.getAttribute('href')).toBe('/ui/jobs/5');
    expect(own.getAttribute('aria-label')).toBe('gpu-a1 GPU 0, H100-80GB: Busy; job 5 blue-train/r0');
    const other = root.querySelector('#fleet-map [data-gpu="1"]')!;
    expect(other.tagName).toBe('SPAN');
    expect(other.getAttribute('aria-label')).toContain('another tenant');
    expect(root.querySelector('#fleet-map [data-gpu="3"]')!.getAttribute('title')).toContain('cordoned by alice: fan noise');
    expect(root.querySelector('#sum-free')!.textContent).toBe('1 free');
    expect(root.querySelector('#sum-busy')!.textContent).toBe('2 busy');
    expect(root.querySelector('#fleet-frag tr[data-free="1"] .num')!.textContent).toBe('1');
    expect(root.querySelector('nav a[aria-current="page"]')!.textContent).toBe('Fleet');
  });

  it("shows a held GPU's utilization as a bar and in its name, and marks, counts and filters the idle ones", async () => {
    const sample = (util: number) => ({
      at_ms: 1, util_pct: util, mem_util_pct: 5, memory_used_bytes: 1, memory_total_bytes: 2, temperature_c: 40, power_w: 90,
    });
    const withTelemetry = [
      { ...gpus[0], telemetry: sample(87.6), idle_allocated: false },
      { ...gpus[1], telemetry: sample(1), idle_allocated: true },
      { ...gpus[2], telemetry: sample(0), idle_allocated: false },
      { ...gpus[3], telemetry: null },
    ];
    const { root } = mount(blueMember, '/ui/fleet', '', withTelemetry);
    await settle(() => root.querySelector('#fleet-map') !== null);
    const busy = root.querySelector<HTMLElement>('#fleet-map [data-gpu="0"]')!;
    expect(busy.getAttribute('aria-label')).toBe('gpu-a1 GPU 0, H100-80GB: Busy; job 5 blue-train/r0; utilization 88%');
    expect(busy.classList.contains('util')).toBe(true);
    expect(busy.style.getPropertyValue('--u')).toBe('88%');
    expect(busy.classList.contains('idle')).toBe(false);
    const idle = root.querySelector<HTMLElement>('#fleet-map [data-gpu="1"]')!;
    expect(idle.getAttribute('aria-label')).toBe('gpu-a1 GPU 1, H100-80GB: Busy; job another tenant; utilization 1%; idle while allocated');
    expect(idle.classList.contains('idle')).toBe(true);
    // A free GPU's sample is named, but it gets no bar; no sample, nothing.
    const free = root.querySelector<HTMLElement>('#fleet-map [data-gpu="2"]')!;
    expect(free.getAttribute('aria-label')).toContain('utilization 0%');
    expect(free.classList.contains('util')).toBe(false);
    expect(root.querySelector('#fleet-map [data-gpu="3"]')!.getAttribute('aria-label')).not.toContain('utilization');
    expect(root.querySelector('#sum-idle')!.textContent).toBe('1 idle but allocated');
    expect(root.querySelector('#sum-util')!.textContent).toBe('allocated GPUs 45% utilized on average (2 sampled)');
    expect(root.querySelector('[data-node="gpu-a1"] .idle-count')!.textContent).toBe('1 idle but allocated');
    expect(root.querySelector('.legend')!.textContent).toContain('Idle but allocated');
    expect(root.querySelector('.legend')!.textContent).toContain('Utilization (the bar under a held GPU)');
    expect(root.querySelector<HTMLInputElement>('input[name="state"][value="idle"]')).not.toBeNull();
    document.body.innerHTML = '';
    const filtered = mount(blueMember, '/ui/fleet?state=idle', '', withTelemetry);
    await settle(() => filtered.root.querySelector('#fleet-map') !== null);
    expect(filtered.root.querySelector<HTMLInputElement>('input[value="idle"]')!.checked).toBe(true);
    expect([...filtered.root.querySelectorAll('#fleet-map .gpu.dim')].map((c) => c.getAttribute('data-gpu'))).toEqual(['0', '2', '3']);
  });

  it('works against a berthd that sends no telemetry: no bars, no mean, none idle', async () => {
    const { root } = mount(blueMember, '/ui/fleet');
    await settle(() => root.querySelector('#fleet-map') !== null);
    expect(root.querySelectorAll('#fleet-map .util, #fleet-map .idle').length).toBe(0);
    expect(root.querySelector('#sum-util')).toBeNull();
    expect(root.querySelector('#sum-idle')!.textContent).toBe('0 idle but allocated');
    expect(root.querySelector('#live-status')!.textContent).toBe('Refreshed every 10 s (live updates unavailable)');
  });

  it('applies a state filter from the URL and says when no node matches', async () => {
    const { root } = mount(blueMember, '/ui/fleet?state=unhealthy');
    await settle(() => root.querySelector('#fleet-empty') !== null);
    expect(root.querySelector<HTMLInputElement>('input[value="unhealthy"]')!.checked).toBe(true);
    // The summary still describes the whole fleet.
    expect(root.querySelector('#sum-gpus')!.textContent).toBe('4 GPUs');
  });

  it('speaks Chinese when asked', async () => {
    localStorage.setItem('berth.console.lang', 'zh');
    const { root } = mount(blueMember, '/ui/fleet');
    await settle(() => root.querySelector('#fleet-map') !== null);
    expect(root.querySelector('#sum-free')!.textContent).toBe('1 块空闲');
    expect(root.querySelector('#fleet-map [data-gpu="1"]')!.getAttribute('aria-label')).toContain('其他租户');
    expect(root.querySelector('#sum-idle')!.textContent).toBe('0 块已分配但空闲');
    expect(root.querySelector('#live-status')!.textContent).toBe('每 10 秒刷新一次（实时更新不可用）');
  });
});

describe('a node', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it('shows a member its GPUs, holders and events, and no cordon buttons', async () => {
    const { root } = mount(blueMember, '/ui/fleet/gpu-a1');
    await settle(() => root.querySelector('#node-gpus') !== null);
    expect(root.querySelector('#node-cordon-btn')).toBeNull();
    expect(root.querySelector('#node-drain-btn')).toBeNull();
    expect(root.querySelector('[data-action]')).toBeNull();
    const holder = (i: number) => root.querySelector(`#node-gpus tr[data-gpu="${i}"] .holder`)!;
    expect(holder(0).querySelector('a')!.getAttribute('href')).toBe('/ui/jobs/5');
    expect(holder(1).querySelector('a')).toBeNull();
    expect(holder(1).textContent).toBe('another tenant');
    expect(root.querySelector('#node-gpus tr[data-gpu="3"] .gpu-cordon')!.textContent).toBe('cordoned by alice: fan noise');
    // Newest event first.
    expect([...root.querySelectorAll('#node-events tbody strong')].map((e) => e.textContent)).toEqual(['Ready', 'Registered']);
  });

  it('gives an admin cordon with a reason, and drain only after confirming', async () => {
    const { root, calls } = mount(admin, '/ui/fleet/gpu-a1');
    await settle(() => root.querySelector('#node-cordon-btn') !== null);
    expect(root.querySelector('#node-uncordon-btn')).toBeNull();
    expect(root.querySelectorAll('[data-action="gpu-cordon"]').length).toBe(3);
    expect(root.querySelectorAll('[data-action="gpu-uncordon"]').length).toBe(1);

    const reason = root.querySelector<HTMLInputElement>('#cordon-reason')!;
    reason.value = 'kernel upgrade';
    click(root.querySelector('#node-cordon-btn'));
    await settle(() => root.querySelector('#node-notice')?.textContent === 'Cordoned gpu-a1.');
    const cordon = calls.find((c) => c.method === 'POST')!;
    expect(cordon.url).toBe('/v1/nodes/gpu-a1/cordon?reason=kernel%20upgrade');
    expect(cordon.headers['X-Berth-CSRF']).toBe('c5rf');

    const posts = () => calls.filter((c) => c.method === 'POST').length;
    click(root.querySelector('#node-drain-btn'));
    await settle(() => root.querySelector('#drain-yes') !== null);
    expect(posts()).toBe(1);
    click(root.querySelector('#drain-yes'));
    await settle(() => root.querySelector('#node-notice')?.textContent?.startsWith('Draining gpu-a1') === true);
    expect(posts()).toBe(2);
    expect(calls.filter((c) => c.method === 'POST')[1].url).toBe('/v1/nodes/gpu-a1/drain');

    click(root.querySelector('[data-action="gpu-uncordon"]'));
    await settle(() => posts() === 3);
    expect(calls.filter((c) => c.method === 'POST')[2].url).toBe('/v1/nodes/gpu-a1/gpus/3/uncordon');
  });

  it("shows the server's refusal with its message", async () => {
    const { root } = mount(admin, '/ui/fleet/gpu-a1', 'platform-admin is needed to cordon a node');
    await settle(() => root.querySelector('#node-cordon-btn') !== null);
    click(root.querySelector('#node-cordon-btn'));
    await settle(() => root.querySelector('#node-notice[role="alert"]') !== null);
    expect(root.querySelector('#node-notice')!.textContent).toBe(
      'The server refused: platform-admin is needed to cordon a node',
    );
  });

  it('says so when the node is not known', async () => {
    const { root } = mount(admin, '/ui/fleet/nope');
    await settle(() => root.querySelector('[role="alert"]') !== null);
    expect(root.textContent).toContain('Node nope is not known.');
  });
});

describe("a map row's signature", () => {
  // A row re-renders only when its signature changes: every change a cell
  // shows must change it.
  it('changes with each thing a cell shows, and only then', async () => {
    const { fleetView, NO_FLEET_FILTERS } = await import('../src/fleet');
    const { rowSig } = await import('../src/pages/fleet');
    const sig = (list: FleetGpu[], match = list.map(() => true), lang: 'en' | 'zh' = 'en') =>
      rowSig(fleetView([node], list, NO_FLEET_FILTERS)[0], match, lang);
    const base = sig(gpus);
    expect(sig(gpus.map((g) => ({ ...g })))).toBe(base);
    const changed = (i: number, extra: Partial<FleetGpu>) => sig(gpus.map((g, j) => (j === i ? { ...g, ...extra } : g)));
    expect(changed(2, { health: 'unhealthy' })).not.toBe(base);
    expect(changed(2, { health_detail: 'XID 48' })).not.toBe(base);
    expect(changed(2, { job: { id: 6, name: 'x', tenant: 'blue', queue: 'q', replica: 1 } })).not.toBe(base);
    expect(changed(0, { job: { ...gpus[0].job!, replica: 1 } })).not.toBe(base);
    expect(changed(3, { cordon: { ...gpus[3].cordon!, reason: 'other' } })).not.toBe(base);
    expect(changed(2, { node_state: 'NotReady' })).not.toBe(base);
    expect(sig(gpus, [true, false, true, true])).not.toBe(base);
    expect(sig(gpus, undefined, 'zh')).not.toBe(base);
  });
});
