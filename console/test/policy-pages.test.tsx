import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BerthApi, type Caller } from '../src/api';
import { click, json, platformAdmin as root, settle, startApp } from './support';

const blueMember: Caller = { ...root, name: 'bob', platform_admin: false, tenants: { blue: 'member' } };
const blueAdmin: Caller = { ...root, name: 'ann', platform_admin: false, tenants: { blue: 'tenant-admin' } };

const YAML = `# as applied\nqueues:\n  - name: blue\n    quota:\n      gpus: {guaranteed: 4}\n    children:\n      - name: main\n`;
const NORMALIZED = `usage_half_life: 1h\nqueues:\n  - name: blue\n    quota:\n      gpus: {guaranteed: 4}\n    children:\n      - name: main\n        quota:\n          gpus: {guaranteed: 2, borrow_limit: 3}\n      - name: dev\n  - name: red\n    children:\n      - name: main\n`;
const q = (path: string, gpus?: { guaranteed: number; borrow_limit: number | null }) => ({
  path, tenant: path.split('/')[0], parent: path.includes('/') ? path.split('/')[0] : '', kind: 'training', pools: [],
  quota: gpus ? { gpus: { weight: 1, lending_limit: 0, ...gpus } } : {}, over_quota: 'borrow', preemptible: true,
});
const info = (version: number, extra: Record<string, unknown> = {}) => ({
  version, active: version === 3, applied_at_ms: 1000 * version, applied_by: version === 1 ? 'berthd' : 'root',
  comment: `change ${version}`, rolled_back_from: null, restores: null, ...extra,
});
const full = (version: number) => ({
  ...info(version), yaml: version === 3 ? YAML : `queues:\n  - name: v${version}\n`, normalized: NORMALIZED,
  policy: { queues: [q('blue', { guaranteed: 4000, borrow_limit: null }), q('blue/main', { guaranteed: 2000, borrow_limit: 3000 }), q('blue/dev'), q('red'), q('red/main')] },
});
const none = { queues_added: [], queues_removed: [], quota_changes: [], queue_changes: [], settings_changed: [], tenant_changes: [] };
const DIFF = {
  from: 2, to: 3,
  diff: '--- policy v2\n+++ policy v3\n@@ -1,3 +1,4 @@\n queues:\n   - name: blue\n+    quota:\n+      gpus: {guaranteed: 4}\n-    kind: x\n',
  changes: { ...none, queues_added: ['blue/main'], quota_changes: [{ queue: 'blue', resource: 'gpus', field: 'guaranteed', from: 0, to: 4000 }, { queue: 'blue', resource: 'gpus', field: 'borrow_limit', from: 3000, to: null }], settings_changed: ['pools'] },
};
const col = (jobs: number, wait: number, h: number) => ({ jobs, finished: jobs, mean_wait_s: wait, p95_wait_s: wait * 2, mean_jct_s: wait + 60, gpu_hours: h, evictions: 0, lost_gpu_hours: 0, cost: null });
const PREVIEW = {
  from: 3, to: 4, applied: false, window: { duration: '7d', since_ms: 1, until_ms: 2 }, jobs: 5, never_ran: 0, still_running: 0,
  cluster_gpus: 8, nodes: 1, priced: false, never_started: { current: 0, proposed: 1 },
  overall: { current: col(5, 10, 1.5), proposed: col(5, 12.25, 1.5), change: { mean_wait_s: 2.25, p95_wait_s: 4.5, mean_jct_s: 2.25, gpu_hours: 0, cost: null } },
  tenants: [{ tenant: 'blue', current: col(3, 4, 1), proposed: col(3, 2, 1), change: { mean_wait_s: -2, p95_wait_s: -4, mean_jct_s: -2, gpu_hours: 0, cost: null } }],
  changes: none,
};

interface Call {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

// berthd's policy routes as it answers them: reads for anyone signed in;
// preview and rollback for a platform admin; apply for a platform admin, or
// a tenant-admin (the server checks the scope; this fake only records).
function mount(
  who: Caller,
  path: string,
  opts: { applyError?: { status: number; field?: string; message: string }; previewMessage?: string } = {},
) {
  const calls: Call[] = [];
  const api = new BerthApi(async (url, init) => {
    const method = init?.method ?? 'GET';
    calls.push({ method, url, headers: { ...(init?.headers as Record<string, string>) }, body: init?.body as string });
    const denied = () => json(403, { error: { code: 'PermissionDenied', message: `${url} needs a platform-admin` } });
    if (url === '/v1/console/session') return json(200, who);
    if (url === '/v1/policy/versions') return json(200, { active: 3, versions: [info(1), info(2), info(3)] });
    if (url === '/v1/policy' && method === 'GET') return json(200, full(3));
    const v = /^\/v1\/policy\/versions\/(\d+)$/.exec(url);
    if (v) return Number(v[1]) <= 3 ? json(200, full(Number(v[1]))) : json(404, { error: { code: 'NotFound', message: `policy version ${v[1]} not found` } });
    if (url.startsWith('/v1/policy/diff')) return json(200, DIFF);
    if (url.startsWith('/v1/policy/preview')) {
      if (!who.platform_admin) return denied();
      if (opts.previewMessage) return json(200, { ...PREVIEW, jobs: 0, message: opts.previewMessage, overall: undefined, tenants: undefined });
      return json(200, PREVIEW);
    }
    if (url.startsWith('/v1/policy/rollback')) return who.platform_admin ? json(201, { version: 4, restores: 2 }) : denied();
    if (url.startsWith('/v1/policy') && method === 'POST') {
      if (opts.applyError) return json(opts.applyError.status, { error: { code: 'InvalidArgument', ...opts.applyError } });
      if (url.includes('dry_run=true')) return json(200, { ...DIFF, dry_run: true, from: 3, to: 4 });
      return json(201, { version: 4 });
    }
    return json(404, { error: { message: 'no' } });
  });
  return { root: startApp(api, path), calls };
}

const type = (el: Element | null, value: string) => {
  const input = el as HTMLInputElement;
  input.value = value;
  input.dispatchEvent(new Event('input', { bubbles: true }));
};
const text = (el: Element | null) => el?.textContent?.trim() ?? '';
const posts = (calls: Call[]) => calls.filter((c) => c.method === 'POST');

describe('the policy page', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it('shows a member the versions, newest first, with links, and no control that changes anything', async () => {
    const { root: r, calls } = mount(blueMember, '/ui/policy');
    await settle(() => r.querySelector('#policy-versions') !== null);
    expect([...r.querySelectorAll('#policy-versions tbody tr')].map((tr) => tr.getAttribute('data-version'))).toEqual(['3', '2', '1']);
    expect(r.querySelector('#policy-versions tr[data-version="2"] a')!.getAttribute('href')).toBe('/ui/policy/versions/2');
    expect(text(r.querySelector('#policy-versions tr[data-version="3"] .note'))).toBe('active');
    expect(text(r.querySelector('#policy-versions tr[data-version="2"] .comment'))).toBe('change 2');
    expect(text(r.querySelector('#policy-active'))).toMatch(/^Version 3 is active: applied by root/);
    expect(text(r.querySelector('nav a[aria-current="page"]'))).toBe('Policy');
    expect(r.querySelector('#policy-editor, #editor-preview, #editor-apply, #qe-form, #rollback')).toBeNull();
    expect(posts(calls)).toEqual([]);
  });

  it('opens a version by its deep link: text, author, time and comment as the API gives them', async () => {
    const { root: r } = mount(blueMember, '/ui/policy/versions/2');
    await settle(() => r.querySelector('#version-yaml') !== null);
    expect(text(r.querySelector('h1'))).toBe('Policy version 2');
    expect(r.querySelector('#version-yaml')!.textContent).toBe('queues:\n  - name: v2\n');
    expect(text(r.querySelector('#version-by'))).toBe('root');
    expect(text(r.querySelector('#version-comment'))).toBe('change 2');
    expect(text(r.querySelector('#version-state'))).toBe('not active');
    expect(r.querySelector('a[href="/ui/policy/diff?from=1&to=2"]')).not.toBeNull();
    expect(r.querySelector('#rollback')).toBeNull(); // a member rolls nothing back
  });

  it('says a version that does not exist does not', async () => {
    const { root: r } = mount(blueMember, '/ui/policy/versions/9');
    await settle(() => r.querySelector('#version-missing') !== null);
    expect(text(r.querySelector('#version-missing'))).toBe('Policy version 9 does not exist.');
  });

  it('renders the diff of the two versions its URL names, summary and numbered lines', async () => {
    const { root: r, calls } = mount(blueMember, '/ui/policy/diff?from=2&to=3');
    await settle(() => r.querySelector('#diff-lines') !== null);
    expect(calls.some((c) => c.url === '/v1/policy/diff?from=2&to=3')).toBe(true);
    expect(text(r.querySelector('h1'))).toBe('Policy diff: version 2 to 3');
    expect([...r.querySelectorAll('#diff-summary li')].map(text)).toEqual([
      'Queues added: blue/main',
      'blue: gpus guarantee from 0 to 4',
      'blue: gpus borrow limit from 3 to no limit',
      'Settings changed: pools',
    ]);
    const rows = [...r.querySelectorAll('#diff-lines tbody tr')];
    expect(rows.map((tr) => tr.getAttribute('data-kind'))).toEqual(['file', 'file', 'hunk', 'ctx', 'ctx', 'add', 'add', 'del']);
    expect([...rows[5].querySelectorAll('td')].map((td) => td.textContent)).toEqual(['', '3', 'added: +     quota:']);
    expect([...rows[7].querySelectorAll('td')].map((td) => td.textContent)).toEqual(['3', '', 'removed: -     kind: x']);
    expect((r.querySelector('#diff-from') as HTMLSelectElement).value).toBe('2');
    // Choosing other versions is a navigation to their link.
    const from = r.querySelector('#diff-from') as HTMLSelectElement;
    from.value = '1';
    from.dispatchEvent(new Event('change', { bubbles: true }));
    click(r.querySelector('#diff-show'));
    await settle(() => location.pathname + location.search === '/ui/policy/diff?from=1&to=3');
    await settle(() => calls.some((c) => c.url === '/v1/policy/diff?from=1&to=3'));
  });

  it("gives a platform admin the active policy's text to edit; Preview shows the replay's figures and the diff", async () => {
    const { root: r, calls } = mount(root, '/ui/policy');
    await settle(() => r.querySelector('#policy-editor') !== null);
    expect((r.querySelector('#policy-editor') as HTMLTextAreaElement).value).toBe(YAML);
    const proposed = YAML.replace('guaranteed: 4', 'guaranteed: 6');
    type(r.querySelector('#policy-editor'), proposed);
    type(r.querySelector('#editor-window'), '1d');
    click(r.querySelector('#editor-preview'));
    await settle(() => r.querySelector('#policy-preview') !== null);
    const sent = posts(calls);
    expect(sent.map((c) => c.url)).toEqual(['/v1/policy?dry_run=true', '/v1/policy/preview?window=1d']);
    for (const c of sent) {
      expect(c.body).toBe(proposed);
      expect(c.headers['Content-Type']).toBe('application/yaml');
      expect(c.headers['X-Berth-CSRF']).toBe('c5rf');
    }
    const cell = (tenant: string, metric: string) => r.querySelector(`#policy-preview tr[data-tenant="${tenant}"] td[data-metric="${metric}"]`)!;
    expect(text(cell('blue', 'mean_wait_s'))).toBe('4.0 → 2.0 (-2.0)');
    expect(text(cell('blue', 'jobs'))).toBe('3 → 3 (0)');
    expect(text(cell('*', 'mean_wait_s'))).toBe('10.0 → 12.3 (+2.3)');
    expect(text(cell('*', 'p95_wait_s'))).toBe('20.0 → 24.5 (+4.5)');
    expect(text(cell('*', 'mean_jct_s'))).toBe('70.0 → 72.3 (+2.3)');
    expect(text(cell('*', 'gpu_hours'))).toBe('1.5 → 1.5 (0)');
    expect(text(cell('*', 'cost'))).toBe('not priced');
    expect(cell('*', 'mean_wait_s').getAttribute('data-proposed')).toBe('12.25');
    expect(text(r.querySelector('#policy-preview tr[data-tenant="*"] th'))).toBe('All tenants');
    expect(text(r.querySelector('#preview-never'))).toBe('Jobs that never start: 0 under the active policy, 1 under the proposed one.');
    expect(r.querySelector('#proposed-lines')).not.toBeNull();
    expect(text(r.querySelector('#proposed-view .hint'))).toBe('From version 3 to what would be version 4 (not applied).');
    // Nothing was applied.
    expect(sent.some((c) => c.url.startsWith('/v1/policy?') && !c.url.includes('dry_run'))).toBe(false);
  });

  it("shows the server's message when no job ran in the window", async () => {
    const message = 'no job ran in the last 7d (0 submitted that never started); there is nothing to replay';
    const { root: r } = mount(root, '/ui/policy', { previewMessage: message });
    await settle(() => r.querySelector('#editor-preview') !== null);
    click(r.querySelector('#editor-preview'));
    await settle(() => r.querySelector('#preview-message') !== null);
    expect(text(r.querySelector('#preview-message'))).toBe(`Nothing to compare. ${message}`);
    expect(r.querySelector('#policy-preview')).toBeNull();
  });

  it('applies only after the confirmation, based on the version read, with the comment', async () => {
    const { root: r, calls } = mount(root, '/ui/policy');
    await settle(() => r.querySelector('#editor-apply') !== null);
    type(r.querySelector('#editor-comment'), 'more for blue');
    click(r.querySelector('#editor-apply'));
    await settle(() => r.querySelector('#editor-apply-no') !== null);
    click(r.querySelector('#editor-apply-no'));
    await settle(() => r.querySelector('#editor-apply-yes') === null);
    expect(posts(calls)).toEqual([]);
    click(r.querySelector('#editor-apply'));
    await settle(() => r.querySelector('#editor-apply-yes') !== null);
    click(r.querySelector('#editor-apply-yes'));
    await settle(() => text(r.querySelector('#editor-notice')) === 'Applied: policy version 4 is active.');
    expect(posts(calls).map((c) => c.url)).toEqual(['/v1/policy?comment=more+for+blue&base_version=3']);
    expect(posts(calls)[0].body).toBe(YAML);
    // The page reads the versions again.
    await settle(() => calls.filter((c) => c.url === '/v1/policy/versions').length === 2);
  });

  it("puts a refusal next to the editor with the field it names and that field's line", async () => {
    const message = "'lots' is not a GPU amount";
    const { root: r } = mount(root, '/ui/policy', { applyError: { status: 400, field: 'queues[0].quota.gpus.guaranteed', message } });
    await settle(() => r.querySelector('#editor-preview') !== null);
    click(r.querySelector('#editor-preview'));
    await settle(() => r.querySelector('#editor-error') !== null);
    expect(text(r.querySelector('#editor-error p'))).toBe(`Berth refused it: ${message}`);
    expect(text(r.querySelector('#editor-error .refused-field'))).toBe('Field: queues[0].quota.gpus.guaranteed');
    // Line 5 of the text sent: "      gpus: {guaranteed: 4}" (line 1 is a comment).
    expect(text(r.querySelector('#editor-error .refused-line'))).toBe('Line 5 of the text.');
    expect(r.querySelector('#policy-editor')!.getAttribute('aria-invalid')).toBe('true');
    expect(r.querySelector('#policy-editor')!.getAttribute('aria-describedby')).toBe('editor-error');
    expect(r.querySelector('#policy-preview')).toBeNull();
  });

  it('rolls back to a version from its page after the confirmation', async () => {
    const { root: r, calls } = mount(root, '/ui/policy/versions/2');
    await settle(() => r.querySelector('#rollback') !== null);
    click(r.querySelector('#rollback'));
    await settle(() => r.querySelector('#rollback-yes') !== null);
    expect(posts(calls)).toEqual([]);
    type(r.querySelector('#rollback-comment'), 'undo 3');
    click(r.querySelector('#rollback-yes'));
    await settle(() => r.querySelector('#rollback-notice') !== null);
    expect(posts(calls).map((c) => c.url)).toEqual(['/v1/policy/rollback?to=2&comment=undo+3']);
    expect(posts(calls)[0].headers['X-Berth-CSRF']).toBe('c5rf');
    expect(text(r.querySelector('#rollback-notice'))).toBe('Rolled back: version 4 restores version 2. Open version 4');
    expect(r.querySelector('#rollback-notice a')!.getAttribute('href')).toBe('/ui/policy/versions/4');
  });

  it('offers no rollback to the active version', async () => {
    const { root: r } = mount(root, '/ui/policy/versions/3');
    await settle(() => r.querySelector('#version-yaml') !== null);
    expect(r.querySelector('#rollback')).toBeNull();
  });

  it("gives a tenant-admin its queues below its tenant's own, previews the diff, then applies that text", async () => {
    const { root: r, calls } = mount(blueAdmin, '/ui/policy');
    await settle(() => r.querySelector('#qe-form') !== null);
    expect(r.querySelector('#policy-editor')).toBeNull();
    expect([...r.querySelectorAll<HTMLOptionElement>('#qe-queue option')].map((o) => o.value)).toEqual(['blue/main', 'blue/dev']);
    expect((r.querySelector('#qe-guaranteed') as HTMLInputElement).value).toBe('2');
    expect((r.querySelector('#qe-borrow') as HTMLInputElement).value).toBe('3');
    expect(r.querySelector('#qe-apply')).toBeNull(); // a preview comes first
    type(r.querySelector('#qe-guaranteed'), 'lots');
    click(r.querySelector('#qe-preview'));
    await settle(() => r.querySelector('#qe-guaranteed-error') !== null);
    expect(text(r.querySelector('#qe-guaranteed-error'))).toBe('Write GPUs as a number: 4, 0.5 or 500m.');
    expect(posts(calls)).toEqual([]);
    type(r.querySelector('#qe-guaranteed'), '3');
    type(r.querySelector('#qe-borrow'), '');
    click(r.querySelector('#qe-preview'));
    await settle(() => r.querySelector('#qe-apply') !== null);
    const dry = posts(calls)[0];
    expect(dry.url).toBe('/v1/policy?dry_run=true');
    // berthd's normalized text with blue/main's one line changed.
    expect(dry.body).toBe(NORMALIZED.replace('gpus: {guaranteed: 2, borrow_limit: 3}', 'gpus: {guaranteed: 3}'));
    expect(r.querySelector('#qe-diff-lines')).not.toBeNull();
    click(r.querySelector('#qe-apply'));
    await settle(() => r.querySelector('#qe-yes') !== null);
    click(r.querySelector('#qe-yes'));
    await settle(() => text(r.querySelector('#qe-notice')) === 'Applied: policy version 4 is active.');
    const applied = posts(calls)[1];
    expect(applied.url).toBe('/v1/policy?base_version=3');
    expect(applied.body).toBe(dry.body);
  });

  it("shows a tenant-admin the server's refusal beside its form", async () => {
    const message = 'ann may change only the queues below the tenants it administers';
    const { root: r } = mount(blueAdmin, '/ui/policy', { applyError: { status: 403, field: 'body', message } });
    await settle(() => r.querySelector('#qe-form') !== null);
    click(r.querySelector('#qe-preview'));
    await settle(() => r.querySelector('#qe-error') !== null);
    expect(text(r.querySelector('#qe-error p'))).toBe(`Berth refused it: ${message}`);
    expect(r.querySelector('#qe-error .refused-line')).toBeNull();
  });

  it('speaks Chinese', async () => {
    localStorage.setItem('berth.console.lang', 'zh');
    const { root: r } = mount(root, '/ui/policy');
    await settle(() => r.querySelector('#policy-versions') !== null);
    expect(text(r.querySelector('h1'))).toBe('调度策略');
    expect(text(r.querySelector('nav a[aria-current="page"]'))).toBe('策略');
    expect(text(r.querySelector('#editor-preview'))).toBe('预览');
    expect(text(r.querySelector('#policy-versions tr[data-version="3"] .note'))).toBe('生效中');
  });
});
