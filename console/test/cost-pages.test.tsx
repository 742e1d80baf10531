import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BerthApi, type Caller, type UsageRow } from '../src/api';
import { files } from '../src/pages/cost';
import { click, json, platformAdmin as root, settle, startApp } from './support';

const blueMember: Caller = { ...root, name: 'bob', platform_admin: false, tenants: { blue: 'member' } };

// A row as berthd sends it: 1 GPU-hour is 3.6e9 mGPU-ms.
const row = (key: Record<string, string>, hours: number, idleHours: number | null, cost: string, runs: number): UsageRow => ({
  key,
  mgpu_ms: hours * 3.6e9,
  allocated_gpu_hours: hours,
  measured_mgpu_ms: idleHours === null ? null : hours * 3.6e9,
  used_mgpu_ms: idleHours === null ? null : (hours - idleHours) * 3.6e9,
  idle_mgpu_ms: idleHours === null ? null : idleHours * 3.6e9,
  used_gpu_hours: idleHours === null ? null : hours - idleHours,
  idle_gpu_hours: idleHours,
  cost_micros: Math.round(Number(cost) * 1e6),
  cost,
  idle_cost_micros: idleHours === null ? null : 0,
  idle_cost: idleHours === null ? null : '0.50',
  runs,
  idle_runs: idleHours === null ? null : 0,
});

// What berthd has metered this month: blue 12 GPU-hours (3 idle), and a
// tenant with a Chinese name and a comma, so the CSV must quote it.
const tenants: Record<string, UsageRow> = {
  blue: row({ tenant: 'blue' }, 12, 3, '30.00', 3),
  '红队,二组': row({ tenant: '红队,二组' }, 4, 0, '10.00', 1),
};
const days: UsageRow[] = [
  row({ day: '2026-03-01', tenant: 'blue' }, 8, 2, '20.00', 2),
  row({ day: '2026-03-01', tenant: '红队,二组' }, 4, 0, '10.00', 1),
  row({ day: '2026-03-02', tenant: 'blue' }, 4, 1, '10.00', 1),
];
const budgets = [
  { tenant: 'blue', unit: 'gpu_hours', currency: null, limit: '10.000000', limit_micros: 10_000_000, used: '12.000000',
    used_micros: 12_000_000, month: '2026-03', alerts: [80, 100], crossed: [80, 100], enforce: true, over: true },
  { tenant: '红队,二组', unit: 'currency', currency: 'EUR', limit: '100.00', limit_micros: 100_000_000, used: '10.00',
    used_micros: 10_000_000, month: '2026-03', alerts: [80, 100], crossed: [], enforce: false, over: false },
];

// berthd's rules: usage and budgets of the caller's tenants only (every
// tenant for a platform admin), whatever the request names.
function mount(who: Caller, path: string, opts: { telemetry?: boolean } = {}) {
  const urls: string[] = [];
  const sees = (t: string) => who.platform_admin || t in who.tenants;
  const total = (rows: UsageRow[]) =>
    rows.reduce((a, r) => ({
      ...a,
      mgpu_ms: a.mgpu_ms + r.mgpu_ms,
      allocated_gpu_hours: a.allocated_gpu_hours + r.allocated_gpu_hours,
      measured_mgpu_ms: a.measured_mgpu_ms! + r.measured_mgpu_ms!,
      idle_mgpu_ms: a.idle_mgpu_ms! + r.idle_mgpu_ms!,
      used_gpu_hours: a.used_gpu_hours! + r.used_gpu_hours!,
      idle_gpu_hours: a.idle_gpu_hours! + r.idle_gpu_hours!,
      cost: (Number(a.cost) + Number(r.cost)).toFixed(2),
      idle_cost: '0.50',
      runs: a.runs + r.runs,
    }), row({}, 0, 0, '0', 0));
  const strip = (r: UsageRow): UsageRow =>
    opts.telemetry === false
      ? { ...r, measured_mgpu_ms: null, used_mgpu_ms: null, idle_mgpu_ms: null, used_gpu_hours: null, idle_gpu_hours: null, idle_cost: null }
      : r;
  const api = new BerthApi(async (url) => {
    urls.push(url);
    if (url === '/v1/console/session') return json(200, who);
    if (url.startsWith('/v1/usage?')) {
      const q = new URLSearchParams(url.slice(url.indexOf('?') + 1));
      const from = Number(q.get('from'));
      const to = q.has('to') ? Number(q.get('to')) : Date.now();
      const rows = (q.get('by') === 'day,tenant' ? days : Object.values(tenants)).filter((r) => sees(r.key.tenant));
      return json(200, { from_ms: from, to_ms: to, by: q.get('by')!.split(','), currency: 'EUR', records: 4,
        telemetry: opts.telemetry !== false, rows: rows.map(strip), total: strip({ ...total(rows), key: {} }) });
    }
    if (url === '/v1/budgets') return json(200, { budgets: budgets.filter((b) => sees(b.tenant)) });
    return json(404, { error: { message: 'no' } });
  });
  return { root: startApp(api, path), urls };
}

const text = (el: Element | null) => el?.textContent?.trim() ?? '';
const cells = (tr: Element) => [...tr.children].map(text);
const monthStart = () => {
  const d = new Date();
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
};

// What the page would save: the file's name and text.
let saved: { name: string; blob: Blob }[] = [];
const original = files.save;

describe('the cost page', () => {
  beforeEach(() => {
    localStorage.clear();
    saved = [];
    files.save = (name, blob) => saved.push({ name, blob });
  });
  afterEach(() => {
    document.body.innerHTML = '';
    files.save = original;
  });

  it("shows a platform admin every tenant's figures, as berthd sent them, per tenant and per day, with budgets", async () => {
    const { root: r, urls } = mount(root, '/ui/cost');
    await settle(() => r.querySelector('#cost-by-tenant') !== null);
    expect(text(r.querySelector('nav a[aria-current="page"]'))).toBe('Cost');
    expect([...r.querySelectorAll('#cost-by-tenant thead th')].map(text)).toEqual([
      'Tenant', 'Allocated GPU-hours', 'Used GPU-hours', 'Idle GPU-hours', 'GPU waste', 'Cost (EUR)', 'Idle cost (EUR)', 'Runs',
    ]);
    expect([...r.querySelectorAll('#cost-by-tenant tbody tr')].map(cells)).toEqual([
      ['blue', '12', '9', '3', '25.0%', '30.00', '0.50', '3'],
      ['红队,二组', '4', '4', '0', '0.0%', '10.00', '0.50', '1'],
    ]);
    expect(cells(r.querySelector('#cost-by-tenant tfoot tr')!)).toEqual(['Total', '16', '13', '3', '18.8%', '40.00', '0.50', '4']);
    expect([...r.querySelectorAll('#cost-by-day tbody tr')].map(cells)).toEqual([
      ['2026-03-01', 'blue', '8', '6', '2', '25.0%', '20.00', '0.50', '2'],
      ['2026-03-01', '红队,二组', '4', '4', '0', '0.0%', '10.00', '0.50', '1'],
      ['2026-03-02', 'blue', '4', '3', '1', '25.0%', '10.00', '0.50', '1'],
    ]);
    // The chart: a named image whose bars add a day's tenants together.
    const chart = r.querySelector('#cost-chart')!;
    expect(chart.getAttribute('role')).toBe('img');
    expect(text(chart.querySelector('title'))).toBe('Allocated GPU-hours per day');
    expect(text(r.querySelector('#cost-chart g[data-day="2026-03-01"] title'))).toBe('2026-03-01: 12 GPU-hours allocated, 2 idle');
    expect([...r.querySelectorAll('#cost-by-tenant tbody tr')].map((tr) => tr.getAttribute('data-tenant'))).toEqual(['blue', '红队,二组']);
    // Budgets: limit, use, share, over or not, enforced or not.
    expect([...r.querySelectorAll('#cost-budgets tbody tr')].map(cells)).toEqual([
      ['blue', '2026-03', '10.000000 GPU-hours', '12.000000 GPU-hours', '120.0%', 'over budget',
        'yes: low-priority jobs wait while over it', '80%, 100%'],
      ['红队,二组', '2026-03', '100.00 EUR', '10.00 EUR', '10.0%', 'within budget', 'no', '—'],
    ]);
    // This UTC month, by tenant and by day, naming no tenant: berthd scopes it.
    expect(urls.filter((u) => u !== '/v1/console/session').sort()).toEqual([
      '/v1/budgets',
      `/v1/usage?by=day,tenant&from=${monthStart()}`,
      `/v1/usage?by=tenant&from=${monthStart()}`,
    ]);
  });

  it('shows a member of blue only what berthd sent for blue, and asks for nothing of another tenant', async () => {
    const { root: r, urls } = mount(blueMember, '/ui/cost');
    await settle(() => r.querySelector('#cost-by-tenant') !== null);
    expect([...r.querySelectorAll('#cost-by-tenant tbody tr')].map((tr) => tr.getAttribute('data-tenant'))).toEqual(['blue']);
    expect([...r.querySelectorAll('#cost-by-day tbody tr')].map((tr) => tr.getAttribute('data-tenant'))).toEqual(['blue', 'blue']);
    expect([...r.querySelectorAll('#cost-budgets tbody tr')].map((tr) => tr.getAttribute('data-tenant'))).toEqual(['blue']);
    expect(r.textContent).not.toContain('红队');
    expect(urls.length).toBeGreaterThan(1);
    for (const u of urls) {
      expect(u).not.toMatch(/tenant=|红|%E7%BA%A2/);
    }
  });

  it('downloads exactly the rows shown as CSV: a BOM, the headings, unformatted figures, quoted names, the total', async () => {
    const { root: r } = mount(root, '/ui/cost');
    await settle(() => r.querySelector('#cost-by-tenant') !== null);
    click(r.querySelector('#cost-by-tenant-csv'));
    expect(saved.length).toBe(1);
    const today = new Date().toISOString().slice(0, 10);
    expect(saved[0].name).toBe(`berth-cost-by-tenant-${new Date(monthStart()).toISOString().slice(0, 10)}-to-${today}.csv`);
    expect(saved[0].blob.type).toBe('text/csv;charset=utf-8');
    const bytes = new Uint8Array(await saved[0].blob.arrayBuffer());
    expect([...bytes.slice(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    expect(new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes)).toBe(
      '\uFEFFTenant,Allocated GPU-hours,Used GPU-hours,Idle GPU-hours,GPU waste,Cost (EUR),Idle cost (EUR),Runs\r\n' +
        'blue,12,9,3,25,30.00,0.50,3\r\n' +
        '"红队,二组",4,4,0,0,10.00,0.50,1\r\n' +
        'Total,16,13,3,18.75,40.00,0.50,4\r\n',
    );
    click(r.querySelector('#cost-by-day-csv'));
    expect(await saved[1].blob.text()).toBe(
      '\uFEFFDay (UTC),Tenant,Allocated GPU-hours,Used GPU-hours,Idle GPU-hours,GPU waste,Cost (EUR),Idle cost (EUR),Runs\r\n' +
        '2026-03-01,blue,8,6,2,25,20.00,0.50,2\r\n' +
        '2026-03-01,"红队,二组",4,4,0,0,10.00,0.50,1\r\n' +
        '2026-03-02,blue,4,3,1,25,10.00,0.50,1\r\n',
    );
  });

  it('asks for last month and for a range of UTC days from the picker, and refuses a range backwards', async () => {
    const { root: r, urls } = mount(root, '/ui/cost');
    await settle(() => r.querySelector('#cost-by-tenant') !== null);
    click(r.querySelector('#period-last-month'));
    click(r.querySelector('#cost-show'));
    await settle(() => location.search === '?period=last-month');
    const end = monthStart();
    const d = new Date(end - 1);
    const start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
    await settle(() => urls.includes(`/v1/usage?by=tenant&from=${start}&to=${end}`));
    expect(urls).toContain(`/v1/usage?by=day,tenant&from=${start}&to=${end}`);
    await settle(() => r.querySelector('#cost-by-tenant') !== null);
    expect(text(r.querySelector('#cost-window'))).not.toContain('Refreshed');

    click(r.querySelector('#period-range'));
    await settle(() => !(r.querySelector('#cost-from') as HTMLInputElement).disabled);
    (r.querySelector('#cost-from') as HTMLInputElement).value = '2026-03-05';
    (r.querySelector('#cost-to') as HTMLInputElement).value = '2026-03-06';
    click(r.querySelector('#cost-show'));
    await settle(() => location.search === '?from=2026-03-05&to=2026-03-06');
    await settle(() => urls.includes(`/v1/usage?by=tenant&from=${Date.UTC(2026, 2, 5)}&to=${Date.UTC(2026, 2, 7)}`));

    const before = urls.length;
    history.pushState(null, '', '/ui/cost?from=2026-03-06&to=2026-03-01');
    dispatchEvent(new PopStateEvent('popstate'));
    await settle(() => r.querySelector('#cost-invalid') !== null);
    expect(text(r.querySelector('#cost-invalid'))).toBe('The last day comes before the first.');
    await new Promise((ok) => setTimeout(ok, 30));
    expect(urls.length).toBe(before);
  });

  it('says used and idle are not measured without telemetry, and speaks Chinese, CSV headings included', async () => {
    localStorage.setItem('berth.console.lang', 'zh');
    const { root: r } = mount(root, '/ui/cost', { telemetry: false });
    await settle(() => r.querySelector('#cost-by-tenant') !== null);
    expect(text(r.querySelector('h1'))).toBe('费用');
    expect(text(r.querySelector('nav a[aria-current="page"]'))).toBe('费用');
    expect(cells(r.querySelector('#cost-by-tenant tbody tr')!)).toEqual(['blue', '12', '—', '—', '—', '30.00', '—', '3']);
    expect(r.textContent).toContain('使用与空闲 GPU 小时未测量');
    expect(text(r.querySelector('#cost-budgets tr[data-tenant="blue"] .state'))).toBe('已超出预算');
    expect(text(r.querySelector('#cost-chart g[data-day="2026-03-01"] title'))).toBe('2026-03-01：分配 12 GPU 小时');
    click(r.querySelector('#cost-by-tenant-csv'));
    const csv = await saved[0].blob.text();
    expect(csv.split('\r\n')[0]).toBe('\uFEFF租户,分配 GPU 小时,使用 GPU 小时,空闲 GPU 小时,GPU 浪费率,费用（EUR）,空闲费用（EUR）,运行次数');
    expect(csv.split('\r\n')[1]).toBe('blue,12,,,,30.00,,3');
  });
});
