import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Alert, BerthApi, type Caller } from '../src/api';
import { LANG_STORAGE_KEY } from '../src/i18n';
import { opsReport } from './ops-fixture';
import { click, json, platformAdmin as root, settle, startApp } from './support';

const blueMember: Caller = { ...root, name: 'bob', platform_admin: false, tenants: { blue: 'member' } };

const alert = (id: number, extra: Partial<Alert> = {}): Alert => ({
  id,
  kind: 'queue_wait',
  severity: 'warning',
  node: '',
  gpu: null,
  message: `queue blue/main: job ${id + 100} has waited 5m (threshold 1m), reason NoNodeFits`,
  raised_ms: 1_700_000_000_000 + id,
  resolved_ms: null,
  resolved_by: '',
  rule: 'waits',
  subject: 'blue/main',
  ...extra,
});
// The newest page, oldest first as berthd sends it, and the page before.
const newest = [
  alert(3, { kind: 'gpu_hardware', severity: 'critical', node: 'h1.example.com', gpu: 2, rule: 'gpu-health', subject: 'h1.example.com/2', message: 'GPU 2 on h1.example.com: XID 79' }),
  alert(4),
  alert(5, { kind: 'node_not_ready', node: 'n7', rule: 'node-down', subject: 'n7', message: 'node n7 has been NotReady for 2m' }),
];
const older = [alert(1, { resolved_ms: 1_700_000_001_000, resolved_by: 'berth' }), alert(2, { resolved_ms: 1_700_000_002_000, resolved_by: 'ann' })];
const rules = {
  version: 2, default: false, applied_ms: 1_700_000_000_000, applied_by: 'root', comment: 'page on waits', yaml: 'rules: []\n',
  sinks: [{ name: 'ops', type: 'webhook', url: 'https://hooks.example.com/berth', secret_file: 'hook.token', send_secret_over_http: false, header: 'Authorization', timeout_ms: 5000 }],
  rules: [
    { name: 'gpu-health', kind: 'gpu_health', severity: 'critical', enabled: true, sinks: ['ops'] },
    { name: 'node-down', kind: 'node_not_ready', severity: 'warning', enabled: true, sinks: [], for_ms: 120000 },
    { name: 'waits', kind: 'queue_wait', severity: 'warning', enabled: false, sinks: ['ops'], queue: '*', threshold_ms: 60000 },
  ],
};
const deliveries = [
  { id: 9, alert_id: 5, sink: 'ops', event: 'raised', attempts: 1, next_attempt_ms: 0, last_error: '', delivered_ms: 1_700_000_000_500, state: 'delivered', created_ms: 1_700_000_000_400 },
  { id: 8, alert_id: 3, sink: 'ops', event: 'raised', attempts: 20, next_attempt_ms: 0, last_error: 'HTTP 500', delivered_ms: null, state: 'failed', created_ms: 1_700_000_000_300 },
];

interface Call {
  method: string;
  url: string;
  headers: Record<string, string>;
}

// berthd's rules: alerts, rules and deliveries for a platform admin only;
// the report to everyone, without the fleet for anyone else.
function mount(who: Caller, path: string, opts: { resolveStatus?: number; reportError?: { status: number; message: string } } = {}) {
  const calls: Call[] = [];
  const api = new BerthApi(async (url, init) => {
    const method = init?.method ?? 'GET';
    calls.push({ method, url, headers: { ...(init?.headers as Record<string, string>) } });
    if (url === '/v1/console/session') return json(200, who);
    const refused = () => json(403, { error: { code: 'PermissionDenied', message: `${who.name} is not a platform-admin` } });
    if (url.startsWith('/v1/alerts?')) {
      if (!who.platform_admin) return refused();
      return url.includes('after=older') ? json(200, { alerts: older }) : json(200, { alerts: newest, next: 'older' });
    }
    const r = /^\/v1\/alerts\/(\d+)\/resolve$/.exec(url);
    if (r && method === 'POST') {
      if (!who.platform_admin) return refused();
      if (opts.resolveStatus) return json(opts.resolveStatus, { error: { message: `alert ${r[1]} was resolved already, by ann`, field: 'id' } });
      const a = [...newest, ...older].find((x) => x.id === Number(r[1]))!;
      return json(200, { ...a, resolved_ms: 1_700_000_009_000, resolved_by: who.name });
    }
    if (url === '/v1/alert-rules') return who.platform_admin ? json(200, rules) : refused();
    if (url.startsWith('/v1/alert-deliveries?')) return who.platform_admin ? json(200, { deliveries }) : refused();
    if (url.startsWith('/v1/reports/ops')) {
      if (opts.reportError) return json(opts.reportError.status, { error: { message: opts.reportError.message, field: 'from' } });
      return json(200, who.platform_admin ? opsReport() : opsReport({ fleet: null, tenants: [opsReport().tenants[0]] }));
    }
    if (url.startsWith('/v1/jobs?')) return json(200, { jobs: [] });
    return json(404, { error: { message: 'no' } });
  });
  return { root: startApp(api, path), calls };
}

const text = (el: Element | null) => el?.textContent?.trim() ?? '';
const gets = (calls: Call[], prefix: string) => calls.filter((c) => c.method === 'GET' && c.url.startsWith(prefix)).map((c) => c.url);

describe('the alerts page', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it('shows a platform admin the open alerts newest first, with what each names linked', async () => {
    const { root: r, calls } = mount(root, '/ui/alerts');
    await settle(() => r.querySelector('#alerts-table') !== null);
    expect(text(r.querySelector('nav a[href="/ui/alerts"]'))).toBe('Alerts');
    expect(r.querySelector('nav a[href="/ui/alerts"]')!.getAttribute('aria-current')).toBe('page');
    expect(gets(calls, '/v1/alerts?')).toEqual(['/v1/alerts?limit=50']);
    expect([...r.querySelectorAll('#alerts-table tbody tr')].map((tr) => tr.getAttribute('data-alert'))).toEqual(['5', '4', '3']);
    const row = (id: number) => r.querySelector(`#alerts-table tr[data-alert="${id}"]`)!;
    expect(text(row(3).querySelector('.kind'))).toBe('GPU hardware');
    expect(text(row(3).querySelector('.severity'))).toBe('Critical');
    expect(row(3).querySelector('.concerns a')!.getAttribute('href')).toBe('/ui/fleet/h1.example.com');
    expect(text(row(3).querySelector('.concerns a'))).toBe('h1.example.com GPU 2');
    expect(text(row(5).querySelector('.concerns a'))).toBe('node n7');
    expect(row(4).querySelector('.concerns a')!.getAttribute('href')).toBe('/ui/jobs/104');
    expect(text(row(4).querySelector('.subject'))).toBe('rule waits: blue/main');
    expect(text(row(4).querySelector('.resolved-at'))).toBe('open');
    expect(r.querySelectorAll('#alerts-table [data-action="resolve"]').length).toBe(3);
    // The rules (read-only) and the deliveries.
    await settle(() => r.querySelector('#alert-rules') !== null && r.querySelector('#alert-deliveries') !== null);
    expect(text(r.querySelector('#rules-version'))).toContain('Version 2, applied by root');
    expect(text(r.querySelector('#alert-rules tr[data-rule="node-down"] .params'))).toBe('for 2m');
    expect(text(r.querySelector('#alert-rules tr[data-rule="waits"] .params'))).toBe('queue *; threshold 1m');
    expect(text(r.querySelector('#alert-rules tr[data-rule="waits"] .enabled'))).toBe('no');
    expect(text(r.querySelector('#alert-sinks tr[data-sink="ops"]'))).toContain('https://hooks.example.com/berth');
    expect(text(r.querySelector('#alert-deliveries tr[data-delivery="8"]'))).toContain('HTTP 500');
    expect(text(r.querySelector('#alert-deliveries tr[data-delivery="8"] .state'))).toBe('failed');
    expect(r.querySelectorAll('#alert-rules button, #alert-rules input, #alert-rules textarea').length).toBe(0);
    // Older alerts follow the cursor and go below.
    click(r.querySelector('#alerts-more'));
    await settle(() => r.querySelectorAll('#alerts-table tbody tr').length === 5);
    expect(gets(calls, '/v1/alerts?')).toContain('/v1/alerts?limit=50&after=older');
    expect([...r.querySelectorAll('#alerts-table tbody tr')].map((tr) => tr.getAttribute('data-alert'))).toEqual(['5', '4', '3', '2', '1']);
    expect(text(r.querySelector('tr[data-alert="1"] .resolved-at'))).toMatch(/the condition cleared$/);
    expect(text(r.querySelector('tr[data-alert="2"] .resolved-at'))).toMatch(/, by ann$/);
    expect(r.querySelector('tr[data-alert="2"] [data-action="resolve"]')).toBeNull();
    expect(r.querySelector('#alerts-more')).toBeNull();
  });

  it('resolves only after a confirmation, with the CSRF token, and shows who resolved it', async () => {
    const { root: r, calls } = mount(root, '/ui/alerts');
    await settle(() => r.querySelector('tr[data-alert="4"] [data-action="resolve"]') !== null);
    click(r.querySelector('tr[data-alert="4"] [data-action="resolve"]'));
    await settle(() => r.querySelector('#resolve-no') !== null);
    expect(text(r.querySelector('#resolve-question-4'))).toMatch(/^Resolve alert 4\?/);
    click(r.querySelector('#resolve-no'));
    await settle(() => r.querySelector('#resolve-no') === null);
    expect(calls.filter((c) => c.method === 'POST')).toEqual([]);
    click(r.querySelector('tr[data-alert="4"] [data-action="resolve"]'));
    await settle(() => r.querySelector('#resolve-yes') !== null);
    click(r.querySelector('#resolve-yes'));
    await settle(() => text(r.querySelector('#alerts-notice')) === 'Alert 4 resolved.');
    const post = calls.find((c) => c.method === 'POST')!;
    expect(post.url).toBe('/v1/alerts/4/resolve');
    expect(post.headers['X-Berth-CSRF']).toBe('c5rf');
    expect(text(r.querySelector('tr[data-alert="4"] .resolved-at'))).toMatch(/, by root$/);
    expect(r.querySelector('tr[data-alert="4"] [data-action="resolve"]')).toBeNull();
  });

  it("shows the server's refusal of a resolve", async () => {
    const { root: r } = mount(root, '/ui/alerts', { resolveStatus: 409 });
    await settle(() => r.querySelector('tr[data-alert="5"] [data-action="resolve"]') !== null);
    click(r.querySelector('tr[data-alert="5"] [data-action="resolve"]'));
    await settle(() => r.querySelector('#resolve-yes') !== null);
    click(r.querySelector('#resolve-yes'));
    await settle(() => r.querySelector('#alerts-notice.error') !== null);
    expect(text(r.querySelector('#alerts-notice'))).toBe('Could not resolve alert 5: alert 5 was resolved already, by ann');
    expect(r.querySelector('#alerts-notice')!.getAttribute('role')).toBe('alert');
  });

  it('keeps its filters in the URL and asks the API with them', async () => {
    const { root: r, calls } = mount(root, '/ui/alerts?state=all&kind=queue_wait');
    await settle(() => r.querySelector('#alerts-table') !== null);
    expect(gets(calls, '/v1/alerts?')).toEqual(['/v1/alerts?all=true&kind=queue_wait&limit=50']);
    expect((r.querySelector('#filter-state') as HTMLSelectElement).value).toBe('all');
    const kind = r.querySelector('#filter-kind') as HTMLSelectElement;
    kind.value = 'budget';
    kind.dispatchEvent(new Event('change', { bubbles: true }));
    r.querySelector('form.filters')!.dispatchEvent(new Event('submit', { cancelable: true }));
    await settle(() => location.search === '?state=all&kind=budget');
    await settle(() => gets(calls, '/v1/alerts?').includes('/v1/alerts?all=true&kind=budget&limit=50'));
  });

  it("gives a member no Alerts link, and the server's refusal on the page, asking nothing more", async () => {
    const { root: r, calls } = mount(blueMember, '/ui/alerts');
    await settle(() => r.querySelector('#alerts-refused') !== null);
    expect(text(r.querySelector('#alerts-refused'))).toBe('Alerts cannot be shown: bob is not a platform-admin');
    expect(r.querySelector('nav a[href="/ui/alerts"]')).toBeNull();
    expect(r.querySelector('nav a[href="/ui/reports/ops"]')).not.toBeNull();
    expect(r.querySelector('[data-action="resolve"]')).toBeNull();
    expect(calls.filter((c) => /alert-rules|alert-deliveries/.test(c.url))).toEqual([]);
  });

  it('speaks Chinese', async () => {
    localStorage.setItem(LANG_STORAGE_KEY, 'zh');
    const { root: r } = mount(root, '/ui/alerts');
    await settle(() => r.querySelector('#alerts-table') !== null);
    expect(text(r.querySelector('h1'))).toBe('告警');
    expect(text(r.querySelector('tr[data-alert="3"] .kind'))).toBe('GPU 硬件故障');
    expect(text(r.querySelector('tr[data-alert="3"] .severity'))).toBe('严重');
    expect(text(r.querySelector('tr[data-alert="4"] [data-action="resolve"]'))).toBe('解决');
  });
});

describe('the ops report page', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it("renders a platform admin the report's sections with berthd's figures, and links its download", async () => {
    const { root: r, calls } = mount(root, '/ui/reports/ops');
    await settle(() => r.querySelector('#report-summary') !== null);
    expect(gets(calls, '/v1/reports/ops')).toEqual(['/v1/reports/ops?from=24h']);
    expect(r.querySelector('nav a[href="/ui/reports/ops"]')!.getAttribute('aria-current')).toBe('page');
    const fig = (k: string) => text(r.querySelector(`#report-summary tr[data-figure="${k}"] td`));
    expect([fig('gpus'), fig('capacity'), fig('fleetUtil')]).toEqual(['8', '192.000', 'not measured']);
    expect([fig('gpuHours'), fig('allocation'), fig('gpuUtil'), fig('avgWait'), fig('p95Wait')]).toEqual(['3.000', '1.6%', 'not measured', '1.5s', '1.5m']);
    expect([fig('started'), fig('waiting'), fig('runs'), fig('failed'), fig('evictions'), fig('lostGpuHours'), fig('cost'), fig('interventions')]).toEqual([
      '4', '1 (oldest 5.5m)', '8', '1 (12.5%)', '1', '0.100', '7.50', '2',
    ]);
    expect(text(r.querySelector('#report-summary tr[data-figure="cost"] th'))).toBe('Cost (EUR)');
    const tenant = (t: string, k: string) => text(r.querySelector(`#report-tenants tr[data-row="${t}"] td[data-figure="${k}"]`));
    expect([tenant('blue', 'gpuHours'), tenant('red', 'gpuHours'), tenant('red', 'avgWait'), tenant('red', 'failed')]).toEqual(['3.000', '0.000', '—', '0 (—)']);
    expect(text(r.querySelector('#report-inference tr[data-row="blue/chat"] th'))).toBe('blue/chat');
    expect([...r.querySelectorAll('#report-requests tr[data-row="blue/chat"] td')].map(text)).toEqual(['2000', '2.0%', '3', '12 ms', '80 ms', '141 ms', '90.0%']);
    expect(text(r.querySelector('#report-counts tr[data-tenant=""][data-kind="outcome"][data-name="reclaimed"]'))).toBe('alloutcomereclaimed1');
    expect(r.querySelector('#report-evictions tr[data-run="38.0.1"] a')!.getAttribute('href')).toBe('/ui/jobs/38');
    expect(text(r.querySelector('#report-by-action tr[data-action-name="alert.resolve"]'))).toBe('alert.resolve1');
    expect(text(r.querySelector('#report-interventions tr[data-object="alert/3"]'))).toContain('root');
    const dl = r.querySelector('#report-download')!;
    const rep = opsReport();
    expect(dl.getAttribute('href')).toBe(`/v1/reports/ops?from=${rep.from_ms}&to=${rep.to_ms}`);
    expect(dl.getAttribute('download')).toBe('berth-ops-report-20261130T120000Z-20261201T120000Z.json');
    expect(r.querySelector('#report-scoped')).toBeNull();
  });

  it('asks again for the window chosen, kept in the URL', async () => {
    const { root: r, calls } = mount(root, '/ui/reports/ops');
    await settle(() => r.querySelector('#report-summary') !== null);
    const sel = r.querySelector('#report-window') as HTMLSelectElement;
    expect(sel.value).toBe('24h');
    sel.value = '7d';
    sel.dispatchEvent(new Event('change', { bubbles: true }));
    r.querySelector('form.filters')!.dispatchEvent(new Event('submit', { cancelable: true }));
    await settle(() => location.search === '?from=7d');
    await settle(() => gets(calls, '/v1/reports/ops').includes('/v1/reports/ops?from=7d'));
  });

  it("shows a member its tenants only, saying why the fleet's figures are missing", async () => {
    const { root: r } = mount(blueMember, '/ui/reports/ops?from=7d');
    await settle(() => r.querySelector('#report-summary') !== null);
    expect(r.querySelector('#report-scoped')).not.toBeNull();
    expect(r.querySelector('#report-summary tr[data-figure="gpus"]')).toBeNull();
    expect(text(r.querySelector('#report-summary tr[data-figure="allocation"] td'))).toBe('—');
    expect([...r.querySelectorAll('#report-tenants tbody tr')].map((tr) => tr.getAttribute('data-row'))).toEqual(['blue']);
  });

  it("shows the server's refusal of a window, and a window from a link as it was given", async () => {
    const { root: r } = mount(root, '/ui/reports/ops?from=soon', { reportError: { status: 400, message: "'soon' is not a time" } });
    await settle(() => r.querySelector('#report-refused') !== null);
    expect(text(r.querySelector('#report-refused'))).toBe("The report cannot be shown: 'soon' is not a time");
    expect(text(r.querySelector('#report-window option'))).toBe('As linked: from soon to now');
  });

  it('speaks Chinese', async () => {
    localStorage.setItem(LANG_STORAGE_KEY, 'zh');
    const { root: r } = mount(root, '/ui/reports/ops');
    await settle(() => r.querySelector('#report-summary') !== null);
    expect(text(r.querySelector('h1'))).toBe('运维报告');
    expect(text(r.querySelector('#report-summary tr[data-figure="waiting"] td'))).toBe('1（最久 5.5m）');
    expect(text(r.querySelector('#report-download'))).toBe('下载（JSON）');
  });
});
