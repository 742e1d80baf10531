// The console in real headless Chromium against a real berthd (all-in-one,
// simulated node, plain HTTP on loopback): sign in with the bootstrap
// token, see a submitted job in the list, read its reason in Chinese after
// switching language, cancel it from the page and see it Cancelled; a
// member of another tenant sees none of the first tenant's jobs in the page
// or in any API answer the page received; a viewer gets no Cancel; axe-core
// finds no serious or critical violation on the sign-in, jobs and job pages.
// The fleet: the admin sees a running job's GPUs on the map with its
// holder, opens the node, cordons and uncordons it from the page (and the
// API agrees); a member of another tenant sees that holder only as "another
// tenant", with no link and no cordon buttons; axe checks the fleet and node
// pages; and a map of 10,000 GPUs (1,250 intercepted nodes of 8) is timed
// from navigation to every cell in the DOM, printed, not asserted.
// The tenant page: a member of blue sees blue's queues with a running job's
// GPU counted as used in its queue and the parent, as GET /v1/queues says,
// and no answer its page got holds red's queues or jobs, and the chart of
// its queues' use over the last 14 days (an image per queue with a title
// and a description) with its table alternative showing the figures of the
// GET /v1/usage?by=queue,day answer it got; blue's tenant-admin files a quota request from the
// form (a bad amount gets the server's message on its field); the platform
// admin rejects nothing without a comment and approves it, and the API
// shows the new policy version; a member of red gets an error for blue's
// page and no answer holding blue's data; axe checks each of them.
// The policy page: the platform admin opens it from the header and sees
// the API's versions; a bad proposal gets the server's message, field and
// line beside the editor; Preview shows the figures of the preview answer
// the page received; Apply makes a new version (the API agrees); Roll back
// from the older version's page makes another whose text is the old one; the
// diff of two versions opens from its link; a member of blue sees the
// versions and no control that changes anything; blue's tenant-admin changes
// blue/main's guarantee from the queue form (previewing the diff first) and
// the API has it; axe checks the policy pages, one in Chinese.
// Submit and follow: a member of blue submits from YAML a job that cannot
// fit (16 GPUs on the node of 8), lands on its page and reads its reason
// with its estimated start in Chinese; the form puts the server's refusal
// of a bad value on that field; a small job that prints two lines goes
// Pending/Running -> Succeeded on its page without a reload while its lines
// arrive in the live log; a viewer gets no Submit link, no form, and a
// refusal from the server; axe checks the submit page.
// Alerts and the ops report: a queue_wait rule of 1 s with a webhook this
// test listens on, and a job that never fits, make berthd raise a real
// alert and deliver it; the platform admin sees it on /ui/alerts (linked to
// the waiting job, with the rules and the delivery), resolves it from the
// page and the API has it resolved by that admin; the ops report page shows
// the figures of the answer it received, lists that resolve among the
// interventions, and its download is berthd's JSON for the same window; a
// member of blue has no Alerts link, gets the refusal on the page and from
// the API, and reads a report of blue without fleet-wide figures; axe checks
// both pages, the report also in Chinese.
// Cost: after the jobs above ran (red's 2-GPU holder and blue's 1-GPU job
// still running, priced from a price table applied here), the platform
// admin opens the Cost page from the header and every figure of the table
// by tenant (and its total) is that of the GET /v1/usage answer the page
// received, the table by day has that answer's rows, and the budgets are
// GET /v1/budgets'; Download CSV saves a UTF-8 file with a byte-order mark
// whose rows are the rows shown, with the answer's figures unformatted; a
// member of blue sees only blue's rows and budget, no request of its page
// names a tenant and no answer it got holds red's usage or budget; axe
// checks the page in English and in Chinese.
//
// Job detail: a running 2-GPU job's page shows each replica's node (linked
// to its page) and GPU indices, equal to GET /v1/jobs/ID's placement and to
// the GPUs GET /v1/gpus says it holds, and, once the simulated node's
// telemetry arrives, its GPU utilization chart with a line per GPU of the
// job; a job behind its queue's head (an 8-GPU job waiting for the node)
// naming a node selector no node matches shows the why answer's layers,
// ranked, with the node layer "0 of N" and node_selector_mismatch, in
// English and Chinese; axe checks both pages in both languages; a job
// asking for more memory per GPU than the node's GPUs have gets berthd's
// verified hint (the node's GPU memory), and its page leads with it ("Smallest change, checked by
// the scheduler: ..." as berthd sent it), before berthd's sentence and the
// node layer, in English and Chinese.
// Live updates: with the admin's jobs list open (blue's finished jobs) and the
// page live, 10 quiet seconds bring no list request that a job event heard
// by the test's own GET /v1/events watcher does not explain; a job held
// Pending by a cordon and then let go is shown Pending, Running and
// Succeeded on the list and on its own page (a second tab) without a
// reload, the indicator saying Live throughout. The fleet map names each
// held GPU's utilization from berthd's reading, with its bar, and the
// hatching and the summary's count follow idle_allocated.
//
// Run by ctest (console_browser_test, label integration) or by hand:
//   BERTH_BIN_DIR=build/dev/bin node console/e2e/console.e2e.mjs
// Exits 77 (ctest's skip) saying why when Chromium, node_modules, the built
// console or berthd is missing.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  chromiumPath,
  requirePrerequisites,
  skipper,
  sleep,
  startBerthd,
  waitFor,
} from './support.mjs';

const uiDir = requirePrerequisites(skipper('console browser test'));

const { chromium } = await import('playwright-core');
const { default: AxeBuilder } = await import('@axe-core/playwright');

const RED_BLUE = `queues:
  - name: default
    children:
      - name: default
  - name: red
    children:
      - name: main
  - name: blue
    children:
      - name: main
`;

const dir = mkdtempSync(join(tmpdir(), 'berth-console-e2e-'));
const { berthd, base, log } = await startBerthd(dir, uiDir);

let browser;
let failed = false;
try {
  await waitFor('berthd /healthz', async () => (await fetch(`${base}/healthz`)).ok);
  const admin = await waitFor('the bootstrap token', () =>
    readFileSync(join(dir, 'data/bootstrap-token'), 'utf8').trim(),
  );

  async function call(token, method, path, body, type = 'application/json') {
    const res = await fetch(base + path, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': type } : {}) },
      body,
    });
    const text = await res.text();
    return { status: res.status, text, json: text ? JSON.parse(text) : null };
  }
  const expectStatus = (r, status, what) => assert.equal(r.status, status, `${what}: ${r.text}`);

  expectStatus(await call(admin, 'POST', '/v1/policy', RED_BLUE, 'application/yaml'), 201, 'policy');
  async function member(name, tenant, role) {
    expectStatus(
      await call(admin, 'POST', '/v1/identities', JSON.stringify({ name, tenants: { [tenant]: role } })),
      201,
      `identity ${name}`,
    );
    const t = await call(admin, 'POST', '/v1/tokens', JSON.stringify({ identity: name }));
    expectStatus(t, 201, `token for ${name}`);
    return t.json.token;
  }
  const blueMember = await member('blue-member', 'blue', 'member');
  const redViewer = await member('red-viewer', 'red', 'viewer');

  // 16 GPUs on a node of 8: each job waits, with a reason, until cancelled.
  async function submit(name, tenant) {
    const spec = { name, command: ['sleep', '300'], resources: { gpus: 16 }, tenant, queue: 'main' };
    const r = await call(admin, 'POST', '/v1/jobs', JSON.stringify(spec));
    expectStatus(r, 201, `submit ${name}`);
    return r.json.id;
  }
  const redJob = await submit('red-secret-training', 'red');
  const blueJob = await submit('blue-visible-training', 'blue');
  await waitFor('a reason for the red job', async () => {
    const w = await call(admin, 'GET', `/v1/jobs/${redJob}/why?lang=zh`);
    return w.json?.reason?.code && w.json.reason.code !== 'Submitted' && w.json.reason.code !== '' ? w : null;
  });

  // The console's own headers.
  const index = await fetch(`${base}/ui/`);
  assert.equal(index.status, 200);
  const csp = index.headers.get('content-security-policy') ?? '';
  assert.match(csp, /^default-src 'self'/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.doesNotMatch(csp, /unsafe-inline/);
  assert.equal(index.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(index.headers.get('referrer-policy'), 'no-referrer');
  const redirect = await fetch(`${base}/ui`, { redirect: 'manual' });
  assert.equal(redirect.status, 308);
  assert.equal(redirect.headers.get('location'), '/ui/');
  const deep = await fetch(`${base}/ui/jobs/${redJob}`);
  assert.equal(deep.status, 200);
  assert.match(await deep.text(), /<div id="app">/);
  const api404 = await fetch(`${base}/v1/no-such-route`);
  assert.doesNotMatch(await api404.text(), /<div id="app">/);
  for (const bad of ['/ui/%2e%2e/data/bootstrap-token', '/ui/..%2f..%2fetc%2fpasswd']) {
    const r = await fetch(base + bad);
    assert.equal(r.status, 404, bad);
    assert.doesNotMatch(await r.text(), new RegExp(admin), bad);
  }

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true });

  // A browser context with the page's API answers and CSP reports recorded.
  async function open(locale) {
    const context = await browser.newContext({ locale });
    const page = await context.newPage();
    const answers = [];
    const problems = [];
    page.on('response', async (r) => {
      if (!new URL(r.url()).pathname.startsWith('/v1/')) return;
      try {
        answers.push({ url: r.url(), body: await r.text() });
      } catch {
        // a body already gone (navigation) tells nothing
      }
    });
    page.on('console', (m) => {
      if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text());
    });
    page.on('pageerror', (e) => problems.push(String(e)));
    return { context, page, answers, problems };
  }
  async function axe(page, where) {
    const result = await new AxeBuilder({ page }).analyze();
    const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    assert.deepEqual(
      bad.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
      [],
      `axe on ${where}`,
    );
    console.log(`axe ${where}: ${result.violations.length} violations, none serious or critical`);
  }
  async function signIn(page, token) {
    await page.goto(`${base}/ui/`);
    await page.waitForSelector('#token');
    await page.fill('#token', token);
    await page.click('button[type=submit]');
  }

  // --- the platform admin, in an English browser --------------------------
  const a = await open('en-US');
  await a.page.goto(`${base}/ui/`);
  await a.page.waitForSelector('#token');
  await axe(a.page, 'sign-in');
  await signIn(a.page, admin);
  await a.page.waitForSelector(`#jobs-table tr[data-job="${redJob}"]`);
  // Chromium keeps the Secure cookie on http://127.0.0.1 (a potentially
  // trustworthy origin): the session survives a reload.
  const cookies = await a.context.cookies();
  const session = cookies.find((c) => c.name === 'berth_session');
  assert.ok(session, 'the session cookie is kept');
  assert.equal(session.httpOnly, true);
  assert.equal(session.secure, true);
  assert.equal(session.sameSite, 'Strict');
  assert.equal(await a.page.evaluate(() => document.cookie.includes('berth_session')), false);
  await a.page.reload();
  await a.page.waitForSelector(`#jobs-table tr[data-job="${redJob}"]`);
  assert.ok(await a.page.isVisible(`#jobs-table tr[data-job="${blueJob}"]`));
  await axe(a.page, 'jobs');
  // The token is in no storage the page can read.
  const stored = await a.page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
  assert.doesNotMatch(stored, new RegExp(admin));
  // A filter narrows the list through the API (tenant=blue).
  await a.page.fill('#filter-tenant', 'blue');
  await a.page.click('.filters button[type=submit]');
  await waitFor('the blue filter', async () =>
    (await a.page.isVisible(`#jobs-table tr[data-job="${blueJob}"]`)) &&
    !(await a.page.isVisible(`#jobs-table tr[data-job="${redJob}"]`)),
  );
  assert.match(a.page.url(), /\/ui\/jobs\?tenant=blue$/);

  await a.page.goto(`${base}/ui/jobs`);
  await a.page.click(`#jobs-table tr[data-job="${redJob}"] td a`);
  await a.page.waitForSelector('#why-message');
  const enWhy = await call(admin, 'GET', `/v1/jobs/${redJob}/why?lang=en`);
  assert.equal((await a.page.textContent('#why-message')).trim(), enWhy.json.reason.message);
  await axe(a.page, 'job');

  await a.page.selectOption('#lang-select', 'zh');
  const zhWhy = await call(admin, 'GET', `/v1/jobs/${redJob}/why?lang=zh`);
  assert.match(zhWhy.json.reason.message, /[\u4e00-\u9fff]/, 'the server has a Chinese reason');
  await a.page.waitForFunction(
    (m) => document.querySelector('#why-message')?.textContent?.trim() === m,
    zhWhy.json.reason.message,
  );
  assert.equal(await a.page.getAttribute('html', 'lang'), 'zh-CN');
  assert.equal((await a.page.textContent('#cancel')).trim(), '取消作业');
  assert.ok(a.answers.some((r) => r.url.endsWith(`/v1/jobs/${redJob}/why?lang=zh`)));
  await axe(a.page, 'job (zh)');

  await a.page.click('#cancel');
  await a.page.click('#cancel-yes');
  await a.page.waitForFunction(() => document.querySelector('#job-state')?.textContent?.trim() === '已取消', null, {
    timeout: 30000,
  });
  const cancelled = await call(admin, 'GET', `/v1/jobs/${redJob}`);
  assert.equal(cancelled.json.state, 'Cancelled');
  assert.equal(await a.page.isVisible('#cancel'), false);
  // The choice of language outlives a reload.
  await a.page.reload();
  await a.page.waitForSelector('#why-message');
  assert.equal((await a.page.textContent('h2')).trim(), '概要');

  await a.page.click('#sign-out');
  await a.page.waitForSelector('#token');
  const after = await a.page.evaluate(async () => (await fetch('/v1/console/session')).status);
  assert.equal(after, 401, 'signed out: the cookie no longer works');
  assert.deepEqual(a.problems, [], 'no CSP refusal or script error');
  await a.context.close();

  // --- a member of blue sees nothing of red ---------------------------------
  const b = await open('zh-CN');
  await signIn(b.page, blueMember);
  await b.page.waitForSelector(`#jobs-table tr[data-job="${blueJob}"]`);
  assert.equal((await b.page.textContent('h1')).trim(), '作业', 'a Chinese browser gets Chinese');
  assert.equal(await b.page.isVisible(`#jobs-table tr[data-job="${redJob}"]`), false);
  await b.page.goto(`${base}/ui/jobs/${redJob}`);
  await b.page.waitForSelector('[role=alert]');
  await b.page.goto(`${base}/ui/jobs?tenant=red`);
  await b.page.waitForSelector('#jobs-empty, #jobs-table, [role=alert]');
  await b.page.goto(`${base}/ui/jobs/${blueJob}`);
  await b.page.waitForSelector('#cancel');
  assert.ok(b.answers.length >= 4, 'the page asked the API');
  for (const r of b.answers) {
    assert.doesNotMatch(r.body, /red-secret-training/, `blue saw red in ${r.url}`);
  }
  assert.doesNotMatch(await b.page.content(), /red-secret-training/);
  assert.deepEqual(b.problems, []);
  await b.context.close();

  // --- a viewer of red reads the job and gets no Cancel ---------------------
  const redSecond = await submit('red-viewer-sees-this', 'red');
  const v = await open('en-US');
  await signIn(v.page, redViewer);
  await v.page.waitForSelector(`#jobs-table tr[data-job="${redSecond}"]`);
  assert.equal(await v.page.isVisible(`#jobs-table tr[data-job="${blueJob}"]`), false);
  await v.page.goto(`${base}/ui/jobs/${redSecond}`);
  await v.page.waitForSelector('#why-message');
  assert.equal(await v.page.isVisible('#cancel'), false, 'a viewer has no Cancel');
  await v.context.close();

  // --- submit and follow ---------------------------------------------------
  const sm = await open('en-US');
  await signIn(sm.page, blueMember);
  await sm.page.waitForSelector('#jobs-table, #jobs-empty');
  await sm.page.click('#submit-link');
  await sm.page.waitForSelector('#submit-form');
  assert.match(sm.page.url(), /\/ui\/submit$/);
  assert.deepEqual(
    await sm.page.locator('#submit-target option').evaluateAll((os) => os.map((o) => o.value)),
    ['blue/main'],
    "blue's queue below its root, and nothing of red's",
  );
  await axe(sm.page, 'submit (form)');
  // From YAML: 16 GPUs on a node of 8, so it waits with a reason.
  await sm.page.check('#mode-yaml');
  await sm.page.waitForSelector('#spec-yaml');
  const tooBig = 'name: e2e-too-big\ntenant: blue\nqueue: main\ncommand: [sleep, "300"]\nresources:\n  gpus: 16\n';
  await sm.page.fill('#spec-yaml', tooBig);
  await axe(sm.page, 'submit (YAML)');
  await sm.page.click('#submit-job');
  await sm.page.waitForURL(/\/ui\/jobs\/\d+$/);
  const bigId = Number(/\/ui\/jobs\/(\d+)$/.exec(sm.page.url())[1]);
  const big = await call(admin, 'GET', `/v1/jobs/${bigId}`);
  assert.equal(big.json.name, 'e2e-too-big');
  assert.equal(big.json.submitted_by, 'blue-member');
  assert.equal(big.json.spec.resources.gpus, 16);
  await sm.page.waitForSelector('#why-message');
  assert.equal((await sm.page.textContent('#job-gpus')).trim(), '16', "the job's GPUs, from its spec");
  // In Chinese: the server's reason, with its estimated start.
  const bigWhy = await waitFor('a reason for the 16-GPU job', async () => {
    const w = await call(blueMember, 'GET', `/v1/jobs/${bigId}/why?lang=zh`);
    return w.json.reason.code === 'NoNodeFits' ? w : null;
  });
  assert.match(bigWhy.json.reason.message, /[\u4e00-\u9fff]/);
  assert.match(bigWhy.json.reason.message, /开始时间/, 'the reason says when it could start');
  await sm.page.selectOption('#lang-select', 'zh');
  await sm.page.waitForFunction(
    (m) => document.querySelector('#why-message')?.textContent?.trim() === m,
    bigWhy.json.reason.message,
  );
  assert.equal((await sm.page.textContent('#why-code')).trim(), 'NoNodeFits');
  assert.equal((await sm.page.textContent('#job-state')).trim(), '等待中');
  assert.equal((await sm.page.textContent('#log-empty')).trim(), '暂无输出。');
  await sm.page.selectOption('#lang-select', 'en');

  // From the form: a bad GPU count gets the server's message on its field.
  await sm.page.goto(`${base}/ui/jobs`);
  await sm.page.click('#submit-link');
  await sm.page.waitForSelector('#submit-name');
  await sm.page.fill('#submit-name', 'e2e-hello');
  await sm.page.fill('#submit-command', "sh -c 'echo hello; sleep 5; echo done'");
  await sm.page.fill('#submit-gpus', 'lots');
  await sm.page.click('#submit-job');
  await sm.page.waitForSelector('#submit-gpus-error');
  const badGpus = await call(blueMember, 'POST', '/v1/jobs', JSON.stringify({
    name: 'e2e-hello', tenant: 'blue', queue: 'main', command: ['sh', '-c', 'echo hello; sleep 5; echo done'], resources: { gpus: 'lots' },
  }));
  expectStatus(badGpus, 400, 'a bad GPU count');
  assert.equal(badGpus.json.error.field, 'resources.gpus');
  assert.equal((await sm.page.textContent('#submit-gpus-error')).trim(), badGpus.json.error.message);
  assert.equal(await sm.page.getAttribute('#submit-gpus', 'aria-invalid'), 'true');
  assert.match(sm.page.url(), /\/ui\/submit$/);
  await axe(sm.page, 'submit (a refused value)');
  // Fixed, it goes; the page records each state and log it shows, and a
  // marker that a reload would lose.
  await sm.page.evaluate(() => {
    window.__seen = [];
    const note = () => {
      const state = document.querySelector('#job-state')?.textContent?.trim() ?? '';
      const log = document.querySelector('#job-log')?.textContent ?? '';
      const last = window.__seen[window.__seen.length - 1];
      if (state && (!last || last.state !== state || last.log !== log)) window.__seen.push({ state, log });
    };
    new MutationObserver(note).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await sm.page.fill('#submit-gpus', '1');
  await sm.page.click('#submit-job');
  await sm.page.waitForURL(/\/ui\/jobs\/\d+$/);
  const helloId = Number(/\/ui\/jobs\/(\d+)$/.exec(sm.page.url())[1]);
  await sm.page.waitForFunction(() => document.querySelector('#job-state')?.textContent?.trim() === 'Succeeded', null, {
    timeout: 60000,
  });
  await sm.page.waitForFunction(() => document.querySelector('#log-status')?.getAttribute('data-state') === 'ended');
  assert.equal(await sm.page.textContent('#job-log'), 'hello\ndone\n');
  const seen = await sm.page.evaluate(() => window.__seen);
  assert.ok(seen, 'the page was not reloaded');
  const states = [...new Set(seen.map((x) => x.state))];
  assert.ok(['Pending', 'Scheduled', 'Running'].includes(states[0]), `first state shown: ${states}`);
  assert.equal(states[states.length - 1], 'Succeeded');
  assert.ok(states.includes('Running'), `the page showed it running: ${states}`);
  assert.ok(
    seen.some((x) => x.log === 'hello\n' && x.state !== 'Succeeded'),
    `the first line arrived while the job ran: ${JSON.stringify(seen)}`,
  );
  const hello = await call(admin, 'GET', `/v1/jobs/${helloId}`);
  assert.equal(hello.json.state, 'Succeeded');
  assert.equal(hello.json.name, 'e2e-hello');
  assert.deepEqual(hello.json.spec.command, ['sh', '-c', 'echo hello; sleep 5; echo done'], 'the command split as a shell splits it');
  await axe(sm.page, 'job (finished, with its output)');
  assert.deepEqual(sm.problems, [], 'no CSP refusal or script error on the submit and job pages');
  await sm.context.close();
  // The 16-GPU job goes: the fleet below counts the node's GPUs.
  expectStatus(await call(admin, 'POST', `/v1/jobs/${bigId}/cancel`), 200, 'cancel the 16-GPU job');

  // A viewer of red: no link, no form, and the server refuses it anyway.
  const sv = await open('en-US');
  await signIn(sv.page, redViewer);
  await sv.page.waitForSelector('#jobs-table, #jobs-empty');
  assert.equal(await sv.page.locator('#submit-link').count(), 0, 'a viewer has no Submit link');
  await sv.page.goto(`${base}/ui/submit`);
  await sv.page.waitForSelector('#submit-denied');
  assert.equal(await sv.page.locator('#submit-form').count(), 0);
  await axe(sv.page, 'submit (viewer)');
  const viewerSubmit = await call(redViewer, 'POST', '/v1/jobs',
    JSON.stringify({ name: 'viewer-try', tenant: 'red', queue: 'main', command: ['true'] }));
  assert.ok([403, 404].includes(viewerSubmit.status), `a viewer's submit is refused: ${viewerSubmit.text}`);
  assert.deepEqual(sv.problems, []);
  await sv.context.close();

  // --- job detail ------------------------------------------------------------
  // A 2-GPU job of blue runs on the simulated node; in default/default an
  // 8-GPU head waits for the node (the runner holds 2 of its 8 GPUs) and,
  // behind it, a job names a node selector no node matches.
  async function submitSpec(spec) {
    const r = await call(admin, 'POST', '/v1/jobs', JSON.stringify({ command: ['sleep', '300'], ...spec }));
    expectStatus(r, 201, `submit ${spec.name}`);
    return r.json.id;
  }
  const placedId = await submitSpec({ name: 'e2e-placed', resources: { gpus: 2 }, tenant: 'blue', queue: 'main' });
  const placedJob = await waitFor('the placed job running', async () => {
    const j = (await call(admin, 'GET', `/v1/jobs/${placedId}`)).json;
    return j.state === 'Running' && j.placement.length > 0 ? j : null;
  });
  const headId = await submitSpec({ name: 'e2e-head', resources: { gpus: 8 }, tenant: 'default', queue: 'default' });
  const selId = await submitSpec({
    name: 'e2e-no-such-zone', resources: { gpus: 1 }, node_selector: { zone: 'nowhere' }, tenant: 'default', queue: 'default',
  });
  const selWhy = await waitFor('the selector job behind its head, with the node layer', async () => {
    const w = (await call(admin, 'GET', `/v1/jobs/${selId}/why?lang=en`)).json;
    return w.reason?.code === 'BehindInQueue' && w.reason.layers?.length === 2 ? w : null;
  });
  const nodeLayer = selWhy.reason.layers[1];
  assert.deepEqual(selWhy.reason.layers[0], { layer: 'order', code: 'BehindInQueue' });
  assert.equal(nodeLayer.layer, 'nodes');
  assert.ok(nodeLayer.nodes >= 1, 'the node layer counts the node');
  assert.equal(nodeLayer.could_take, 0);
  // The selector is every node's only cause: lifting it alone opens them all.
  assert.deepEqual(nodeLayer.excluded, [
    { cause: 'node_selector_mismatch', nodes: nodeLayer.nodes, alone: nodeLayer.nodes },
  ]);

  const jd = await open('en-US');
  await signIn(jd.page, admin);
  await jd.page.waitForSelector('#jobs-table');
  // The running job: each replica's node (linked to its page) and GPU
  // indices, as GET /v1/jobs/ID and GET /v1/gpus have them.
  await jd.page.goto(`${base}/ui/jobs/${placedId}`);
  await jd.page.waitForSelector('table.placement[data-current="true"] tbody tr');
  const placedRows = await jd.page.locator('table.placement[data-current="true"] tbody tr').evaluateAll((trs) =>
    trs.map((tr) => ({
      replica: Number(tr.getAttribute('data-replica')),
      node: tr.querySelector('.node').textContent.trim(),
      href: tr.querySelector('.node a').getAttribute('href'),
      gpus: tr.querySelector('.gpus').textContent.trim(),
    })),
  );
  assert.deepEqual(
    placedRows,
    placedJob.placement.map((r) => ({ replica: r.replica, node: r.node, href: `/ui/fleet/${encodeURIComponent(r.node)}`, gpus: r.gpus.join(', ') })),
  );
  const heldByPlaced = (await call(admin, 'GET', '/v1/gpus')).json.gpus.filter((g) => g.job?.id === placedId);
  assert.deepEqual(
    heldByPlaced.map((g) => `${g.node}/${g.index}`).sort(),
    placedJob.placement.flatMap((r) => r.gpus.map((i) => `${r.node}/${i}`)).sort(),
    'the GPUs the page names are the ones the job holds',
  );
  assert.ok((await jd.page.locator('#job-timeline li').count()) >= 2, 'the timeline lists the events');
  // Its GPU utilization once the node's telemetry (every 10 s) has arrived:
  // a line for each GPU of the job with samples.
  await waitFor('telemetry of the placed job', async () => {
    const tel = (await call(admin, 'GET', `/v1/jobs/${placedId}/telemetry`)).json;
    return tel.gpus.some((g) => g.buckets.length > 0);
  }, 45000);
  await jd.page.waitForSelector('#util-chart g[data-gpu]', { timeout: 30000 });
  assert.equal((await jd.page.textContent('#util-chart-title')).trim(), 'GPU utilization over time');
  const chartGpus = await jd.page.locator('#util-chart g[data-gpu]').evaluateAll((gs) => gs.map((g) => g.getAttribute('data-gpu')));
  assert.ok(chartGpus.length >= 1 && chartGpus.every((g) => heldByPlaced.some((h) => `${h.node}/${h.index}` === g)), `chart lines: ${chartGpus}`);
  assert.equal(await jd.page.locator('#util-gpus tbody tr').count(), chartGpus.length, 'a table row per line');
  // Its cost: the runs' GPU time from its own usage records, as the API
  // totals them for this job and no other.
  await jd.page.waitForSelector('#job-cost');
  const jobUsage = (await call(admin, 'GET', `/v1/usage/records?job=${placedId}&from=0&limit=1`)).json;
  assert.ok(jobUsage.total_records >= 1, 'a record for its run');
  assert.match((await jd.page.textContent('#job-cost')).trim(), new RegExp(`over ${jobUsage.total.runs} run\\(s\\): `));
  const otherUsage = (await call(admin, 'GET', `/v1/usage/records?job=${headId}&from=0&limit=1`)).json;
  assert.equal(otherUsage.total_records, 0, 'a job that never ran has no records');
  await axe(jd.page, 'job (running, placement and utilization)');
  await jd.page.selectOption('#lang-select', 'zh');
  await jd.page.waitForFunction(() => document.querySelector('#placement-h')?.textContent?.trim() === '放置位置');
  await axe(jd.page, 'job (running, zh)');
  await jd.page.selectOption('#lang-select', 'en');

  // The job behind its head: the why answer's layers, ranked, with the node
  // layer's numbers and its cause.
  await jd.page.goto(`${base}/ui/jobs/${selId}`);
  await jd.page.waitForSelector('#why-layers li[data-layer="nodes"]');
  const pageWhy = JSON.parse(jd.answers.filter((r) => r.url.endsWith(`/v1/jobs/${selId}/why?lang=en`)).pop().body);
  assert.deepEqual(pageWhy.reason.layers, selWhy.reason.layers);
  const shownLayers = await jd.page.locator('#why-layers li').evaluateAll((lis) =>
    lis.map((li) => ({
      layer: li.getAttribute('data-layer'),
      nodes: li.getAttribute('data-nodes'),
      could_take: li.getAttribute('data-could-take'),
      excluded: [...li.querySelectorAll('[data-cause]')].map((c) => ({
        cause: c.getAttribute('data-cause'),
        nodes: Number(c.getAttribute('data-nodes')),
        ...(c.hasAttribute('data-alone') ? { alone: Number(c.getAttribute('data-alone')) } : {}),
      })),
    })),
  );
  assert.deepEqual(
    shownLayers,
    pageWhy.reason.layers.map((l) => ({
      layer: l.layer,
      nodes: l.nodes === undefined ? null : String(l.nodes),
      could_take: l.could_take === undefined ? null : String(l.could_take),
      excluded: l.excluded ?? [],
    })),
  );
  const n = nodeLayer.nodes;
  assert.equal(
    (await jd.page.textContent('#why-layers li[data-layer="nodes"]')).trim(),
    `Nodes: 0 of ${n} could ever take a replica — ${n} with labels not matching the node selector (${n} would open if only this changed)`,
  );
  assert.match((await jd.page.textContent('#why-layers li[data-layer="order"]')).trim(), /^Queue order: number \d+ among its queue's waiting jobs.* \(holds it now\)$/);
  assert.equal((await jd.page.textContent('#placement-none')).trim(), 'No replica has been placed yet.');
  await axe(jd.page, 'job (behind its head, layers)');
  await jd.page.selectOption('#lang-select', 'zh');
  await jd.page.waitForFunction(
    (want) => document.querySelector('#why-layers li[data-layer="nodes"]')?.textContent?.trim() === want,
    `节点：${n} 个节点中有 0 个能够容纳它的副本——${n} 个标签与节点选择器不匹配（只改这一项即可开放 ${n} 个）`,
  );
  await axe(jd.page, 'job (behind its head, zh)');
  assert.deepEqual(jd.problems, [], 'no CSP refusal or script error on the job pages');
  await jd.context.close();
  // They go: the fleet below counts the node's GPUs.
  for (const id of [selId, headId, placedId]) expectStatus(await call(admin, 'POST', `/v1/jobs/${id}/cancel`), 200, `cancel job ${id}`);
  await waitFor('the placed job to free its GPUs', async () =>
    (await call(admin, 'GET', '/v1/gpus')).json.gpus.every((g) => g.job?.id !== placedId && g.job?.id !== headId),
  );

  // A job asking for more memory per GPU than the node's GPUs have: berthd
  // verifies the hint "it would run now with gpu_memory <the node's GPU
  // memory> per GPU" by a second scheduling run, and the page leads with it
  // as `berth why` does, before berthd's sentence and the node layer, in
  // English and Chinese.
  const hintId = await submitSpec({
    name: 'e2e-more-memory', resources: { gpus: 1, gpu_memory: '100Gi' }, tenant: 'blue', queue: 'main',
  });
  const hintWhy = await waitFor('the more-memory job with its verified hint', async () => {
    const w = (await call(admin, 'GET', `/v1/jobs/${hintId}/why?lang=en`)).json;
    return w.reason?.code === 'NoNodeFits' && w.reason.hint ? w : null;
  });
  assert.match(hintWhy.reason.detail, /^gpu_memory=\d+$/);
  assert.match(hintWhy.reason.hint, /^it would run now with gpu_memory \S+ GiB per GPU$/);
  assert.ok(hintWhy.reason.message.includes(hintWhy.reason.hint), 'the message says the hint too');
  const jh = await open('en-US');
  await signIn(jh.page, admin);
  await jh.page.waitForSelector('#jobs-table');
  await jh.page.goto(`${base}/ui/jobs/${hintId}`);
  await jh.page.waitForSelector('#why-hint');
  const hintPageWhy = JSON.parse(jh.answers.filter((r) => r.url.endsWith(`/v1/jobs/${hintId}/why?lang=en`)).pop().body);
  // The why's parts in page order, up to the layers (its estimated start follows).
  const whyOrder = async () =>
    (await jh.page.locator('.why > [id^="why-"]').evaluateAll((els) => els.map((el) => el.id))).slice(0, 4);
  assert.deepEqual(await whyOrder(), ['why-hint', 'why-message', 'why-layers-h', 'why-layers'], 'the hint leads, the layers follow');
  assert.equal(
    (await jh.page.textContent('#why-hint')).trim(),
    `Smallest change, checked by the scheduler: ${hintPageWhy.reason.hint}`,
  );
  assert.equal(await jh.page.getAttribute('#why-hint', 'data-hint'), hintWhy.reason.hint);
  assert.equal((await jh.page.textContent('#why-message')).trim(), hintPageWhy.reason.message);
  assert.deepEqual(
    await jh.page.locator('#why-layers li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-layer'))),
    hintPageWhy.reason.layers.map((l) => l.layer),
  );
  await axe(jh.page, 'job (waiting, led by its verified hint)');
  const hintWhyZh = (await call(admin, 'GET', `/v1/jobs/${hintId}/why?lang=zh`)).json;
  assert.ok(hintWhyZh.reason.hint, 'the hint in Chinese');
  await jh.page.selectOption('#lang-select', 'zh');
  await jh.page.waitForFunction(
    (want) => document.querySelector('#why-hint')?.textContent?.trim() === want,
    `最小改动（已由调度器验证）：${hintWhyZh.reason.hint}`,
  );
  assert.deepEqual(await whyOrder(), ['why-hint', 'why-message', 'why-layers-h', 'why-layers']);
  await axe(jh.page, 'job (waiting, led by its verified hint, zh)');
  assert.deepEqual(jh.problems, [], 'no CSP refusal or script error on the hinted job page');
  await jh.context.close();
  expectStatus(await call(admin, 'POST', `/v1/jobs/${hintId}/cancel`), 200, 'cancel the more-memory job');

  // --- live updates: a job followed on the jobs list and its page by events --
  // A watcher of our own hears the job events berthd sends the admin, so a
  // request the page makes while nothing changes can be matched to one.
  const heard = [];
  const watch = new AbortController();
  const stream = await fetch(`${base}/v1/events?topics=job`, {
    headers: { Authorization: `Bearer ${admin}` },
    signal: watch.signal,
  });
  assert.equal(stream.status, 200, 'GET /v1/events');
  assert.match(stream.headers.get('content-type') ?? '', /^text\/event-stream/);
  void (async () => {
    const dec = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of stream.body) {
        buf += dec.decode(chunk, { stream: true }).replace(/\r\n?/g, '\n');
        for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const event = /^event: ?(.*)$/m.exec(block)?.[1];
          if (event) heard.push({ at: Date.now(), event, data: /^data: ?(.*)$/m.exec(block)?.[1] ?? '' });
        }
      }
    } catch {
      // aborted at the end of the section
    }
  })();
  await waitFor("the watcher's hello", () => heard.some((e) => e.event === 'hello'));

  const lv = await open('en-US');
  const listAsks = [];
  lv.page.on('request', (r) => {
    if (new URL(r.url()).pathname === '/v1/jobs') listAsks.push(Date.now());
  });
  await signIn(lv.page, admin);
  await lv.page.waitForSelector('#jobs-table');
  // Filters are navigations inside the page: the tab's stream stays open.
  // blue's finished jobs: no pending one, whose reason would be asked for
  // every minute (no event says when a pending job's reason moves).
  const filterJobs = async (states, tenant) => {
    for (const box of await lv.page.locator('.filters input[name=state]').all()) {
      await box.setChecked(states.includes(await box.getAttribute('value')));
    }
    await lv.page.fill('#filter-tenant', tenant);
    await lv.page.click('.filters button[type=submit]');
  };
  await filterJobs(['Succeeded', 'Cancelled'], 'blue');
  await lv.page.waitForURL(/\/ui\/jobs\?state=Succeeded%2CCancelled&tenant=blue$/);
  await lv.page.waitForSelector(`#jobs-table tr[data-job="${placedId}"]`);
  await lv.page.waitForFunction(() => document.querySelector('#live-status')?.getAttribute('data-live') === 'live');
  assert.equal((await lv.page.textContent('#live-status')).trim(), 'Live');
  // Nothing changes for 10 s: the page asks for the list only for a job event.
  await sleep(1000); // the one refetch after the stream's hello (300 ms) is done
  const quietFrom = Date.now();
  await sleep(10000);
  const quietAsks = listAsks.filter((t) => t >= quietFrom).length;
  const quietEvents = heard.filter((e) => e.event === 'job' && e.at >= quietFrom - 1000).length;
  console.log(`live jobs list: ${quietAsks} list requests in 10 s while live, ${quietEvents} job events heard`);
  assert.ok(quietAsks <= quietEvents, `the list was asked ${quietAsks} times in 10 s with ${quietEvents} job events`);

  // A job held Pending by a cordon, then let go: Pending, Running, Succeeded
  // on the list and on its own page (a second tab), without a reload.
  const liveNode = (await call(admin, 'GET', '/v1/nodes')).json.nodes[0].name;
  const nodeApi = `/v1/nodes/${encodeURIComponent(liveNode)}`;
  expectStatus(await call(admin, 'POST', `${nodeApi}/cordon?reason=e2e-live-updates`), 200, 'cordon the node');
  const liveJob = await submitSpec({
    name: 'e2e-live', command: ['sh', '-c', 'sleep 4; echo done'], resources: { gpus: 1 }, tenant: 'blue', queue: 'main',
  });
  await filterJobs([], 'blue');
  await lv.page.waitForURL(/\/ui\/jobs\?tenant=blue$/);
  // Each state a page shows, with the indicator beside it, and a marker a reload would lose.
  const record = (page, selector) =>
    page.evaluate((sel) => {
      window.__seen = [];
      const note = () => {
        const state = document.querySelector(sel)?.textContent?.trim() ?? '';
        const live = document.querySelector('#live-status')?.getAttribute('data-live') ?? '';
        const last = window.__seen[window.__seen.length - 1];
        if (state && (!last || last.state !== state || last.live !== live)) window.__seen.push({ state, live });
      };
      note();
      new MutationObserver(note).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    }, selector);
  const rowState = `#jobs-table tr[data-job="${liveJob}"] .state`;
  await lv.page.waitForFunction((sel) => document.querySelector(sel)?.textContent?.trim() === 'Pending', rowState, { timeout: 10000 });
  await record(lv.page, rowState);
  const jp = await lv.context.newPage();
  jp.on('pageerror', (e) => lv.problems.push(String(e)));
  await jp.goto(`${base}/ui/jobs/${liveJob}`);
  await jp.waitForFunction(() => document.querySelector('#job-state')?.textContent?.trim() === 'Pending');
  await jp.waitForFunction(() => document.querySelector('#live-status')?.getAttribute('data-live') === 'live');
  assert.equal((await jp.textContent('#live-status')).trim(), 'Live');
  await record(jp, '#job-state');
  expectStatus(await call(admin, 'POST', `${nodeApi}/uncordon`), 200, 'uncordon the node');
  for (const [page, sel] of [[lv.page, rowState], [jp, '#job-state']]) {
    await page.waitForFunction((s) => document.querySelector(s)?.textContent?.trim() === 'Succeeded', sel, { timeout: 60000 });
  }
  for (const [what, page] of [['jobs list', lv.page], ['job page', jp]]) {
    const seen = await page.evaluate(() => window.__seen);
    assert.ok(seen, `the ${what} was not reloaded`);
    const states = [...new Set(seen.map((x) => x.state))];
    assert.equal(states[0], 'Pending', `${what}: ${JSON.stringify(seen)}`);
    assert.ok(states.includes('Running'), `${what} showed it running: ${JSON.stringify(seen)}`);
    assert.equal(states[states.length - 1], 'Succeeded', `${what}: ${JSON.stringify(seen)}`);
    // Live whenever it showed the job unfinished (a finished job's page drops the indicator).
    assert.deepEqual(
      seen.filter((x) => x.state !== 'Succeeded' && x.live !== 'live'),
      [],
      `${what} live throughout: ${JSON.stringify(seen)}`,
    );
    console.log(`live ${what}: ${seen.map((x) => `${x.state} (${x.live || 'no indicator'})`).join(' -> ')}`);
  }
  assert.equal((await lv.page.textContent('#live-status')).trim(), 'Live');
  assert.equal((await call(admin, 'GET', `/v1/jobs/${liveJob}`)).json.state, 'Succeeded');
  await axe(lv.page, 'jobs (live)');
  await axe(jp, 'job (live, finished)');
  assert.deepEqual(lv.problems, [], 'no CSP refusal or script error on the live pages');
  watch.abort();
  await lv.context.close();

  // --- the fleet: the GPU map and a node, as the admin ---------------------
  // A 2-GPU job of red runs on the simulated node and holds two of its GPUs.
  const holderSpec = { name: 'red-fleet-holder', command: ['sleep', '300'], resources: { gpus: 2 }, tenant: 'red', queue: 'main' };
  const holderSubmit = await call(admin, 'POST', '/v1/jobs', JSON.stringify(holderSpec));
  expectStatus(holderSubmit, 201, 'submit the holder');
  const holderJob = holderSubmit.json.id;
  await waitFor('the holder running', async () => (await call(admin, 'GET', `/v1/jobs/${holderJob}`)).json.state === 'Running');
  const nodesNow = await call(admin, 'GET', '/v1/nodes');
  assert.equal(nodesNow.json.nodes.length, 1, 'one simulated node');
  const nodeName = nodesNow.json.nodes[0].name;
  const gpusNow = (await call(admin, 'GET', '/v1/gpus')).json.gpus;
  const heldIdx = gpusNow.filter((g) => g.job?.id === holderJob).map((g) => g.index);
  assert.equal(heldIdx.length, 2, 'the holder holds two GPUs');
  // The simulated node's readings (every 10 s) reach GET /v1/gpus.
  await waitFor("a reading on the holder's GPUs", async () =>
    (await call(admin, 'GET', '/v1/gpus')).json.gpus
      .filter((g) => g.job?.id === holderJob)
      .every((g) => typeof g.telemetry?.util_pct === 'number' && typeof g.idle_allocated === 'boolean'),
  );
  const adminName = (await call(admin, 'GET', '/v1/whoami')).json.name;
  const nodePath = `/ui/fleet/${encodeURIComponent(nodeName)}${nodeName.includes('.') ? '/' : ''}`;
  for (const deepLink of ['/ui/fleet', nodePath, '/ui/fleet?state=busy&min_free=2']) {
    const r = await fetch(base + deepLink);
    assert.equal(r.status, 200, deepLink);
    assert.match(await r.text(), /<div id="app">/, deepLink);
  }

  const f = await open('en-US');
  await signIn(f.page, admin);
  await f.page.waitForSelector('#jobs-table');
  await f.page.click('nav a[href="/ui/fleet"]');
  await f.page.waitForSelector(`#fleet-map li[data-node="${nodeName}"]`);
  assert.equal(await f.page.locator('#fleet-map .gpu').count(), gpusNow.length, 'a cell per GPU');
  for (const i of heldIdx) {
    const cell = f.page.locator(`#fleet-map li[data-node="${nodeName}"] [data-gpu="${i}"]`);
    assert.equal(await cell.getAttribute('href'), `/ui/jobs/${holderJob}`);
    assert.match(await cell.getAttribute('aria-label'), new RegExp(`Busy; job ${holderJob} red-fleet-holder/r0; utilization \\d+%`));
    // Its utilization as a bar, and the hatching where berthd finds it idle.
    assert.match(await cell.getAttribute('class'), /\butil\b/);
    const idle = /\bidle\b/.test(await cell.getAttribute('class'));
    assert.equal(idle, /idle while allocated/.test(await cell.getAttribute('aria-label')));
  }
  // The summary counts what the last /v1/gpus answer the page got calls idle.
  const lastGpus = JSON.parse(f.answers.filter((x) => new URL(x.url).pathname === '/v1/gpus').at(-1).body).gpus;
  assert.equal(
    (await f.page.textContent('#sum-idle')).trim(),
    `${lastGpus.filter((g) => g.idle_allocated === true).length} idle but allocated`,
  );
  assert.equal((await f.page.textContent('#sum-busy')).trim(), '2 busy');
  assert.equal((await f.page.textContent('#sum-free')).trim(), `${gpusNow.length - 2} free`);
  await axe(f.page, 'fleet');
  // A filter in the URL: nodes with at least 7 free GPUs; this one has 6.
  await f.page.fill('#filter-min-free', '7');
  await f.page.click('.filters button[type=submit]');
  await f.page.waitForSelector('#fleet-empty');
  assert.match(f.page.url(), /\/ui\/fleet\?min_free=7$/);
  await f.page.goto(`${base}/ui/fleet?state=busy`);
  await f.page.waitForSelector('#fleet-map');
  assert.equal(await f.page.locator('#fleet-map .gpu:not(.dim)').count(), 2, 'only the held GPUs are picked out');
  // A click on a held cell opens the job.
  await f.page.click(`#fleet-map [data-gpu="${heldIdx[0]}"]`);
  await f.page.waitForSelector('#why-message');
  assert.match(f.page.url(), new RegExp(`/ui/jobs/${holderJob}$`));
  await f.page.goto(`${base}/ui/fleet`);
  await f.page.click(`#fleet-map li[data-node="${nodeName}"] a.node-name`);
  await f.page.waitForSelector('#node-gpus');
  assert.equal(await f.page.locator('#node-gpus tbody tr').count(), gpusNow.length);
  assert.equal(
    await f.page.getAttribute(`#node-gpus tr[data-gpu="${heldIdx[0]}"] .holder a`, 'href'),
    `/ui/jobs/${holderJob}`,
  );
  assert.ok((await f.page.locator('#node-events tbody tr').count()) > 0, 'the node has events');
  await axe(f.page, 'node');
  // Cordon from the page: the page and the API both say so; then uncordon.
  await f.page.fill('#cordon-reason', 'e2e: fan noise');
  await f.page.click('#node-cordon-btn');
  await f.page.waitForFunction(
    (want) => document.querySelector('#node-cordon')?.textContent?.trim() === want,
    `cordoned by ${adminName}: e2e: fan noise`,
  );
  const cordoned = await call(admin, 'GET', `/v1/nodes/${encodeURIComponent(nodeName)}`);
  assert.equal(cordoned.json.cordon?.kind, 'cordon');
  assert.equal(cordoned.json.cordon?.reason, 'e2e: fan noise');
  assert.equal(cordoned.json.cordon?.by, adminName);
  await axe(f.page, 'node (cordoned)');
  await f.page.click('#node-uncordon-btn');
  await f.page.waitForFunction(() => document.querySelector('#node-cordon')?.textContent?.trim() === '—');
  assert.equal((await call(admin, 'GET', `/v1/nodes/${encodeURIComponent(nodeName)}`)).json.cordon, null);
  // The node's events now hold the cordon and the uncordon, newest first.
  await f.page.waitForFunction(() => document.querySelectorAll('#node-events tbody tr').length >= 2);
  // Drain asks first; "Do not drain" leaves the node as it was.
  await f.page.click('#node-drain-btn');
  await f.page.click('#drain-no');
  assert.equal((await call(admin, 'GET', `/v1/nodes/${encodeURIComponent(nodeName)}`)).json.cordon, null);
  assert.equal((await call(admin, 'GET', `/v1/jobs/${holderJob}`)).json.state, 'Running');
  assert.deepEqual(f.problems, [], 'no CSP refusal or script error on the fleet pages');

  // --- a member of blue sees red's holder as "another tenant", unlinked -----
  const bf = await open('zh-CN');
  await signIn(bf.page, blueMember);
  await bf.page.waitForSelector('#jobs-table, #jobs-empty');
  await bf.page.goto(`${base}/ui/fleet`);
  await bf.page.waitForSelector(`#fleet-map li[data-node="${nodeName}"]`);
  assert.equal(await bf.page.locator('#fleet-map a.gpu').count(), 0, 'no link to a job of red');
  assert.match(await bf.page.getAttribute(`#fleet-map [data-gpu="${heldIdx[0]}"]`, 'aria-label'), /其他租户/);
  assert.equal((await bf.page.textContent('#sum-busy')).trim(), '2 块占用');
  await axe(bf.page, 'fleet (member, zh)');
  await bf.page.goto(base + nodePath);
  await bf.page.waitForSelector('#node-gpus');
  assert.equal(await bf.page.locator('#node-gpus .holder a').count(), 0);
  assert.equal(await bf.page.locator('#node-cordon-btn, #node-drain-btn, [data-action]').count(), 0, 'no cordon buttons for a member');
  await axe(bf.page, 'node (member, zh)');
  // The server refuses a member's cordon whatever the page shows.
  const refused = await bf.page.evaluate(async (n) => (await fetch(`/v1/nodes/${encodeURIComponent(n)}/cordon`, { method: 'POST' })).status, nodeName);
  assert.ok(refused === 403 || refused === 401, `a member's cordon is refused (${refused})`);
  for (const r of bf.answers) {
    assert.doesNotMatch(r.body, /red-fleet-holder/, `blue saw red's holder in ${r.url}`);
  }
  assert.doesNotMatch(await bf.page.content(), /red-fleet-holder/);
  assert.deepEqual(bf.problems, []);
  await bf.context.close();

  // --- the tenant page ------------------------------------------------------
  // blue's 16-GPU job can never start on this node of 8 (its reason says
  // so; it holds nobody back); it goes, and a 1-GPU job of blue runs.
  expectStatus(await call(admin, 'POST', `/v1/jobs/${blueJob}/cancel`), 200, 'cancel the 16-GPU blue job');
  const blueRunSpec = { name: 'blue-tenant-running', command: ['sleep', '300'], resources: { gpus: 1 }, tenant: 'blue', queue: 'main' };
  const blueRun = await call(admin, 'POST', '/v1/jobs', JSON.stringify(blueRunSpec));
  expectStatus(blueRun, 201, 'submit the blue runner');
  await waitFor('the blue runner running', async () => (await call(admin, 'GET', `/v1/jobs/${blueRun.json.id}`)).json.state === 'Running');
  const blueAdmin = await member('blue-admin', 'blue', 'tenant-admin');
  const deepTenant = await fetch(`${base}/ui/tenants/blue`);
  assert.equal(deepTenant.status, 200);
  assert.match(await deepTenant.text(), /<div id="app">/);

  // A member of blue: the header's Tenants link, blue's queues with the
  // running job's GPU counted as used, no form and no decision buttons.
  const tm = await open('en-US');
  await signIn(tm.page, blueMember);
  await tm.page.waitForSelector('#jobs-table, #jobs-empty');
  await tm.page.click('nav a[href="/ui/tenants"]');
  await tm.page.waitForSelector('#tenant-list');
  assert.deepEqual(await tm.page.locator('#tenant-list a').allTextContents(), ['blue']);
  await tm.page.click('#tenant-list a');
  await tm.page.waitForSelector('#tenant-queues tr[data-queue="blue/main"]');
  assert.match(tm.page.url(), /\/ui\/tenants\/blue$/);
  const cell = (pg, q, c) => pg.textContent(`#tenant-queues tr[data-queue="${q}"] .${c}`).then((x) => x.trim());
  assert.equal(await cell(tm.page, 'blue/main', 'used'), '1', "the running job's GPU is used");
  assert.equal(await cell(tm.page, 'blue', 'used'), '1', "a parent counts its child's use");
  assert.equal(await cell(tm.page, 'blue/main', 'jobs'), '1', 'one running job in the queue');
  assert.equal(await cell(tm.page, 'blue', 'jobs'), '1', "and in its parent");
  assert.equal(await cell(tm.page, 'blue', 'guaranteed'), 'no GPU quota');
  assert.equal(await cell(tm.page, 'blue/main', 'borrowed'), '—', 'no quota, so nothing borrowed or lent');
  assert.equal(await tm.page.getAttribute('#tenant-queues tr[data-queue="blue/main"] th', 'class'), 'depth-1');
  assert.equal(await tm.page.locator('#tenant-queues tr[data-queue^="red"]').count(), 0);
  // The numbers are berthd's: one GET /v1/queues, no policy and no job
  // paging; red's 2-GPU holder runs (berthd counts it for red) and no answer
  // the page got names red's queues or jobs.
  const redNow = (await call(admin, 'GET', '/v1/queues?tenant=red')).json.queues;
  assert.equal(redNow.find((q) => q.queue === 'red/main')?.used_mgpu, 2000, "red's holder still holds 2 GPUs");
  const queuesAnswer = tm.answers.find((r) => new URL(r.url).pathname === '/v1/queues');
  assert.ok(queuesAnswer, 'the page asked GET /v1/queues');
  assert.equal(new URL(queuesAnswer.url).search, '?tenant=blue');
  const asked = JSON.parse(queuesAnswer.body).queues;
  assert.deepEqual(asked.map((q) => q.queue), ['blue', 'blue/main']);
  assert.deepEqual(asked.map((q) => [q.used_mgpu, q.running_jobs]), [[1000, 1], [1000, 1]]);
  assert.equal(tm.answers.filter((r) => /\/v1\/policy|\/v1\/jobs\?state=Scheduled/.test(r.url)).length, 0, 'no policy, no job paging');
  for (const r of tm.answers) {
    assert.doesNotMatch(r.body, /red-fleet-holder|red-secret-training|"red\/main"|"tenant":\s*"red"/, `blue saw red in ${r.url}`);
  }
  assert.ok(await tm.page.isVisible('#tenant-members tr[data-member="blue-member"]'));
  assert.equal(await tm.page.locator('#qr-form, [data-action]').count(), 0, 'a member files and decides nothing');
  // Its own tokens, and nobody else's.
  await tm.page.waitForSelector('#tenant-tokens tr[data-token]');
  const tokenOwnersSeen = await tm.page.locator('#tenant-tokens tbody tr td:first-child').allTextContents();
  assert.ok(tokenOwnersSeen.length >= 1 && tokenOwnersSeen.every((n) => n === 'blue-member'), `member's tokens: ${tokenOwnersSeen}`);
  const usageByQueue = await call(blueMember, 'GET', '/v1/usage?by=queue&tenant=blue');
  assert.equal(
    (await tm.page.textContent('#cost-by-queue tfoot td:nth-of-type(2)')).trim(),
    usageByQueue.json.total.cost,
    "the page's cost is the API's",
  );
  // Quota over the last 14 days: a chart per queue (an image with a title
  // and a description) and its table alternative, with the figures of the
  // GET /v1/usage?by=queue,day answer the page received.
  await tm.page.waitForSelector('#tenant-history .panel svg[role="img"]');
  assert.deepEqual(await tm.page.locator('#tenant-history .panel').evaluateAll((ps) => ps.map((p) => p.dataset.queue)), ['blue', 'blue/main']);
  for (const svg of await tm.page.locator('#tenant-history svg[role="img"]').all()) {
    const [titleId, descId] = (await svg.getAttribute('aria-labelledby')).split(' ');
    assert.ok((await tm.page.textContent(`[id="${titleId}"]`)).trim().length > 0, 'the chart has a title');
    assert.ok((await tm.page.textContent(`[id="${descId}"]`)).trim().length > 0, 'the chart has a description');
  }
  const historyAnswer = tm.answers.find((r) => new URL(r.url).pathname === '/v1/usage' && new URL(r.url).searchParams.get('by') === 'queue,day');
  assert.ok(historyAnswer, 'the page asked GET /v1/usage?by=queue,day');
  assert.equal(new URL(historyAnswer.url).search, '?by=queue,day&tenant=blue&from=14d');
  const history = JSON.parse(historyAnswer.body);
  await tm.page.click('#tenant-history-table summary');
  const dayRows = await tm.page.locator('#tenant-history-table tbody tr').evaluateAll((rs) => rs.map((r) => r.dataset.day));
  assert.ok(dayRows.length >= 14 && dayRows.length <= 15, `a row per day of the window: ${dayRows}`);
  const today = new Date(history.to_ms - 1).toISOString().slice(0, 10);
  assert.equal(dayRows[dayRows.length - 1], today, 'the last row is today (UTC)');
  const mainToday = history.rows.filter((r) => r.key.queue === 'blue/main' && r.key.day === today).reduce((n, r) => n + r.mgpu_ms, 0);
  assert.ok(mainToday > 0, "blue's runner's GPU time today is in the answer");
  assert.equal(
    (await tm.page.textContent(`#tenant-history-table tr[data-day="${today}"] td[data-queue="blue/main"]`)).trim(),
    String(Math.round((mainToday / 3_600_000_000) * 1000) / 1000),
    "the table's figure is the answer's (no GPU quota: the use alone)",
  );
  assert.ok(await tm.page.isVisible('#tenant-history-table table'), 'the table opens');
  await axe(tm.page, 'tenant (member)');
  assert.deepEqual(tm.problems, []);
  await tm.context.close();

  // blue's tenant-admin files a request from the form; a bad amount gets the
  // server's message on the field the 400 names.
  const ta = await open('en-US');
  await signIn(ta.page, blueAdmin);
  await ta.page.waitForSelector('#jobs-table, #jobs-empty');
  await ta.page.goto(`${base}/ui/tenants/blue`);
  await ta.page.waitForSelector('#qr-form');
  await ta.page.selectOption('#qr-queue', 'blue');
  await ta.page.fill('#qr-guaranteed', 'lots');
  await ta.page.fill('#qr-reason', 'e2e: bigger runs');
  await ta.page.click('#qr-submit');
  await ta.page.waitForSelector('#qr-guaranteed-error');
  const bad = await call(blueAdmin, 'POST', '/v1/quota-requests',
    JSON.stringify({ queue: 'blue', resource: 'gpus', guaranteed: 'lots', reason: 'e2e: bigger runs' }));
  expectStatus(bad, 400, 'a bad amount');
  assert.equal(bad.json.error.field, 'guaranteed');
  assert.equal((await ta.page.textContent('#qr-guaranteed-error')).trim(), bad.json.error.message);
  assert.equal(await ta.page.getAttribute('#qr-guaranteed', 'aria-invalid'), 'true');
  await axe(ta.page, 'tenant (tenant-admin, a refused request)');
  await ta.page.fill('#qr-guaranteed', '4');
  await ta.page.click('#qr-submit');
  await ta.page.waitForFunction(() => /^Filed request \d+/.test(document.querySelector('#qr-notice')?.textContent ?? ''));
  const filedId = Number(/Filed request (\d+)/.exec(await ta.page.textContent('#qr-notice'))[1]);
  const filed = await call(admin, 'GET', `/v1/quota-requests/${filedId}`);
  assert.equal(filed.json.state, 'Pending');
  assert.equal(filed.json.filed_by, 'blue-admin');
  assert.equal(filed.json.guaranteed, '4');
  await ta.page.waitForSelector(`#tenant-requests tr[data-request="${filedId}"] [data-action="withdraw"]`);
  assert.equal(await ta.page.locator('[data-action="approve"]').count(), 0, 'a tenant-admin does not approve');
  assert.deepEqual(ta.problems, []);
  await ta.context.close();

  // The platform admin: reject wants a comment; approve makes a new policy
  // version in which blue guarantees 4 GPUs.
  const versionBefore = (await call(admin, 'GET', '/v1/policy')).json.version;
  const pa = await open('en-US');
  await signIn(pa.page, admin);
  await pa.page.waitForSelector('#jobs-table, #jobs-empty');
  await pa.page.click('nav a[href="/ui/tenants"]');
  await pa.page.waitForSelector('#tenant-list');
  const listed = await pa.page.locator('#tenant-list a').allTextContents();
  assert.deepEqual(listed, ['blue', 'default', 'red'], 'a platform admin sees every tenant of the policy');
  await pa.page.click('#tenant-list a[href="/ui/tenants/blue"]');
  const row = `#tenant-requests tr[data-request="${filedId}"]`;
  await pa.page.waitForSelector(`${row} [data-action="reject"]`);
  await pa.page.click(`${row} [data-action="reject"]`);
  await pa.page.waitForSelector('#qr-notice[role="alert"]');
  assert.equal((await call(admin, 'GET', `/v1/quota-requests/${filedId}`)).json.state, 'Pending', 'no reject without a comment');
  await pa.page.fill(`#qr-comment-${filedId}`, 'e2e: ok');
  await pa.page.click(`${row} [data-action="approve"]`);
  await pa.page.waitForFunction((id) => document.querySelector('#qr-notice')?.textContent?.startsWith(`Approved request ${id}`), filedId);
  const approved = await call(admin, 'GET', `/v1/quota-requests/${filedId}`);
  assert.equal(approved.json.state, 'Approved');
  assert.equal(approved.json.decided_by, adminName);
  assert.equal(approved.json.comment, 'e2e: ok');
  const policyAfter = (await call(admin, 'GET', '/v1/policy')).json;
  assert.equal(policyAfter.version, versionBefore + 1);
  assert.equal(approved.json.policy_version, policyAfter.version);
  assert.equal(policyAfter.policy.queues.find((q) => q.path === 'blue').quota.gpus.guaranteed, 4000);
  assert.equal((await pa.page.textContent('#qr-notice')).trim(), `Approved request ${filedId}: policy version ${policyAfter.version} is active.`);
  await pa.page.waitForFunction(() => document.querySelector('#tenant-queues tr[data-queue="blue"] .guaranteed')?.textContent?.trim() === '4');
  assert.equal(await cell(pa.page, 'blue', 'lendable'), '3', '4 guaranteed, 1 used');
  assert.equal(await cell(pa.page, 'blue', 'idle'), '3');
  assert.equal(await cell(pa.page, 'blue', 'borrowed'), '0');
  assert.match(await pa.page.textContent(`${row} .state`), /Approved/);
  // Every member's tokens for the platform admin, never a secret.
  await pa.page.waitForSelector('#tenant-tokens tr[data-token]');
  const adminSees = new Set(await pa.page.locator('#tenant-tokens tbody tr td:first-child').allTextContents());
  assert.ok(adminSees.has('blue-admin') && adminSees.has('blue-member'), `admin's tokens: ${[...adminSees]}`);
  assert.doesNotMatch(await pa.page.content(), new RegExp(blueAdmin));
  await pa.page.selectOption('#lang-select', 'zh');
  await pa.page.waitForFunction(() => document.querySelector('h1')?.textContent?.trim() === '租户 blue');
  await axe(pa.page, 'tenant (platform admin, zh)');
  assert.deepEqual(pa.problems, []);
  await pa.context.close();

  // A member of red opens blue's page: an error, and no answer the page
  // received holds anything of blue's.
  const rv = await open('en-US');
  await signIn(rv.page, redViewer);
  await rv.page.waitForSelector('#jobs-table, #jobs-empty');
  await rv.page.goto(`${base}/ui/tenants/blue`);
  await rv.page.waitForSelector('#tenant-denied');
  assert.equal(await rv.page.locator('#tenant-queues, #tenant-members, #tenant-requests').count(), 0);
  await rv.page.goto(`${base}/ui/tenants`);
  await rv.page.waitForSelector('#tenant-list');
  assert.deepEqual(await rv.page.locator('#tenant-list a').allTextContents(), ['red']);
  for (const r of rv.answers) {
    assert.doesNotMatch(r.body, /blue-tenant-running|e2e: bigger runs|blue-admin|blue-member/, `red saw blue in ${r.url}`);
  }
  assert.doesNotMatch(await rv.page.content(), /blue-admin|bigger runs/);
  await axe(rv.page, 'tenants (another tenant)');
  assert.deepEqual(rv.problems, []);
  await rv.context.close();

  // --- the policy page -------------------------------------------------------
  const versionsOf = async () => (await call(admin, 'GET', '/v1/policy/versions')).json;
  const policyBefore = (await call(admin, 'GET', '/v1/policy')).json;
  for (const deepLink of ['/ui/policy', `/ui/policy/versions/${policyBefore.version}`, '/ui/policy/diff?from=1&to=2']) {
    const r = await fetch(base + deepLink);
    assert.equal(r.status, 200, deepLink);
    assert.match(await r.text(), /<div id="app">/, deepLink);
  }
  const po = await open('en-US');
  await signIn(po.page, admin);
  await po.page.waitForSelector('#jobs-table, #jobs-empty');
  await po.page.click('nav a[href="/ui/policy"]');
  await po.page.waitForSelector('#policy-versions');
  const listedVersions = async (pg) => (await pg.locator('#policy-versions tbody tr').evaluateAll((rows) => rows.map((r) => Number(r.dataset.version))));
  const apiVersions = (await versionsOf()).versions.map((v) => v.version).reverse();
  assert.deepEqual(await listedVersions(po.page), apiVersions, "the page's versions are the API's, newest first");
  assert.equal(await po.page.inputValue('#policy-editor'), policyBefore.yaml, "the editor holds the active policy's text");
  // A proposal with a bad amount: the server's message, field and line beside the editor.
  assert.match(policyBefore.yaml, /\n {2}- name: red\n/);
  const withRed = (amount) => policyBefore.yaml.replace('\n  - name: red\n', `\n  - name: red\n    quota:\n      gpus: {guaranteed: ${amount}}\n`);
  await po.page.fill('#policy-editor', withRed('lots'));
  await po.page.click('#editor-preview');
  await po.page.waitForSelector('#editor-error');
  const refusedDry = await call(admin, 'POST', '/v1/policy?dry_run=true', withRed('lots'), 'application/yaml');
  expectStatus(refusedDry, 400, 'a bad amount');
  assert.equal((await po.page.textContent('#editor-error p')).trim(), `Berth refused it: ${refusedDry.json.error.message}`);
  assert.equal((await po.page.textContent('#editor-error .refused-field')).trim(), `Field: ${refusedDry.json.error.field}`);
  const badLine = withRed('lots').split('\n').findIndex((l) => l.includes('guaranteed: lots')) + 1;
  assert.equal((await po.page.textContent('#editor-error .refused-line')).trim(), `Line ${badLine} of the text.`);
  assert.equal(await po.page.getAttribute('#policy-editor', 'aria-invalid'), 'true');
  await axe(po.page, 'policy (admin, a refused proposal)');
  // Preview: the figures shown are those of the answer the page received.
  const proposal = withRed('2');
  await po.page.fill('#policy-editor', proposal);
  await po.page.fill('#editor-prices', 'default:2.5');
  await po.page.click('#editor-preview');
  await po.page.waitForSelector('#policy-preview, #preview-message');
  const previewAnswer = po.answers.filter((r) => new URL(r.url).pathname === '/v1/policy/preview').pop();
  assert.ok(previewAnswer, 'the page asked POST /v1/policy/preview');
  const preview = JSON.parse(previewAnswer.body);
  assert.equal(new URL(previewAnswer.url).searchParams.get('prices'), 'default:2.5');
  assert.ok(preview.jobs > 0 && preview.tenants?.length > 0, `jobs ran in the window: ${previewAnswer.body.slice(0, 300)}`);
  const oneDecimal = (v) => (Math.round(v * 10) / 10).toFixed(1);
  for (const entry of [...preview.tenants, { ...preview.overall, tenant: '*' }]) {
    const rowSel = `#policy-preview tr[data-tenant="${entry.tenant}"]`;
    for (const metric of ['jobs', 'mean_wait_s', 'p95_wait_s', 'mean_jct_s', 'gpu_hours', 'cost']) {
      const td = po.page.locator(`${rowSel} td[data-metric="${metric}"]`);
      assert.equal(await td.getAttribute('data-current'), String(entry.current[metric]), `${entry.tenant} ${metric} current`);
      assert.equal(await td.getAttribute('data-proposed'), String(entry.proposed[metric]), `${entry.tenant} ${metric} proposed`);
    }
    const wait = po.page.locator(`${rowSel} td[data-metric="mean_wait_s"]`);
    assert.equal((await wait.locator('.cur').textContent()).trim(), oneDecimal(entry.current.mean_wait_s));
    assert.equal((await wait.locator('.pro').textContent()).trim(), oneDecimal(entry.proposed.mean_wait_s));
    const jobsCell = (await po.page.locator(`${rowSel} td[data-metric="jobs"]`).textContent()).trim();
    assert.match(jobsCell, new RegExp(`^${entry.current.jobs} → ${entry.proposed.jobs}`));
    assert.notEqual(entry.current.cost, null, 'priced with a default price');
    assert.equal((await po.page.locator(`${rowSel} td[data-metric="cost"] .cur`).textContent()).trim(), entry.current.cost.toFixed(2));
  }
  assert.ok(await po.page.isVisible('#proposed-summary li'), 'the dry run names the change');
  assert.equal((await versionsOf()).active, policyBefore.version, 'a preview applies nothing');
  await axe(po.page, 'policy (admin, a preview)');
  // Apply, confirmed: a new version, as the API says.
  await po.page.fill('#editor-comment', 'e2e: red gets 2');
  await po.page.click('#editor-apply');
  await po.page.click('#editor-apply-yes');
  await po.page.waitForFunction(() => /^Applied: policy version \d+ is active\.$/.test(document.querySelector('#editor-notice')?.textContent?.trim() ?? ''));
  const appliedVersion = Number(/version (\d+)/.exec(await po.page.textContent('#editor-notice'))[1]);
  const afterApply = await versionsOf();
  assert.equal(afterApply.active, appliedVersion);
  assert.equal(appliedVersion, policyBefore.version + 1);
  const newest = afterApply.versions[afterApply.versions.length - 1];
  assert.deepEqual([newest.version, newest.applied_by, newest.comment], [appliedVersion, adminName, 'e2e: red gets 2']);
  assert.equal((await call(admin, 'GET', '/v1/policy')).json.yaml, proposal);
  await po.page.waitForSelector(`#policy-versions tr[data-version="${appliedVersion}"]`);
  // The diff of the two, from its link.
  await po.page.goto(`${base}/ui/policy/diff?from=${policyBefore.version}&to=${appliedVersion}`);
  await po.page.waitForSelector('#diff-lines');
  assert.equal((await po.page.textContent('h1')).trim(), `Policy diff: version ${policyBefore.version} to ${appliedVersion}`);
  assert.deepEqual(await po.page.locator('#diff-summary li').allTextContents(), ['red: gpus guarantee from 0 to 2']);
  const addedLines = await po.page.locator('#diff-lines tr[data-kind="add"] code').allTextContents();
  assert.ok(addedLines.some((l) => l.includes('gpus: {guaranteed: 2}')), `added lines: ${addedLines}`);
  await axe(po.page, 'policy diff');
  // Roll back from the older version's page, confirmed: a new version with the old text.
  await po.page.goto(`${base}/ui/policy`);
  await po.page.click(`#policy-versions tr[data-version="${policyBefore.version}"] a`);
  await po.page.waitForSelector('#version-yaml');
  assert.match(po.page.url(), new RegExp(`/ui/policy/versions/${policyBefore.version}$`));
  assert.equal(await po.page.textContent('#version-yaml'), policyBefore.yaml);
  assert.equal((await po.page.textContent('#version-by')).trim(), policyBefore.applied_by);
  await axe(po.page, 'policy version (admin)');
  await po.page.click('#rollback');
  await po.page.fill('#rollback-comment', 'e2e: undo');
  await po.page.click('#rollback-yes');
  await po.page.waitForSelector('#rollback-notice');
  const afterRollback = await versionsOf();
  const rolled = afterRollback.versions[afterRollback.versions.length - 1];
  assert.equal(afterRollback.active, appliedVersion + 1);
  assert.deepEqual([rolled.version, rolled.restores, rolled.rolled_back_from, rolled.comment], [appliedVersion + 1, policyBefore.version, appliedVersion, 'e2e: undo']);
  const restored = (await call(admin, 'GET', `/v1/policy/versions/${rolled.version}`)).json;
  assert.equal(restored.normalized, policyBefore.normalized, "the rollback's version has the old content");
  assert.equal((await po.page.textContent('#rollback-notice')).trim(), `Rolled back: version ${rolled.version} restores version ${policyBefore.version}. Open version ${rolled.version}`);
  await po.page.click('#rollback-notice a');
  await po.page.waitForFunction((v) => document.querySelector('h1')?.textContent?.trim() === `Policy version ${v}`, rolled.version);
  await po.page.waitForSelector('#version-rollback-of');
  await po.page.selectOption('#lang-select', 'zh');
  await po.page.waitForFunction((v) => document.querySelector('h1')?.textContent?.trim() === `策略版本 ${v}`, rolled.version);
  await po.page.goto(`${base}/ui/policy`);
  await po.page.waitForSelector('#policy-versions');
  assert.equal((await po.page.textContent('h1')).trim(), '调度策略');
  await axe(po.page, 'policy (admin, zh)');
  assert.deepEqual(po.problems, []);
  await po.context.close();

  // A member of blue reads the versions and changes nothing.
  const pm = await open('en-US');
  await signIn(pm.page, blueMember);
  await pm.page.waitForSelector('#jobs-table, #jobs-empty');
  await pm.page.click('nav a[href="/ui/policy"]');
  await pm.page.waitForSelector('#policy-versions');
  assert.deepEqual(await listedVersions(pm.page), afterRollback.versions.map((v) => v.version).reverse());
  const controls = '#policy-editor, #editor-preview, #editor-apply, #qe-form, #qe-preview, #rollback';
  assert.equal(await pm.page.locator(controls).count(), 0, 'a member has no Preview, Apply or form');
  await axe(pm.page, 'policy (member)');
  await pm.page.click(`#policy-versions tr[data-version="${policyBefore.version}"] a`);
  await pm.page.waitForSelector('#version-yaml');
  assert.equal(await pm.page.locator(controls).count(), 0, 'a member has no Roll back');
  await axe(pm.page, 'policy version (member)');
  assert.deepEqual(pm.problems, []);
  await pm.context.close();

  // blue's tenant-admin changes blue/main's guarantee from the queue form:
  // the dry run's diff first, then the same text applied.
  const pt = await open('en-US');
  await signIn(pt.page, blueAdmin);
  await pt.page.waitForSelector('#jobs-table, #jobs-empty');
  await pt.page.goto(`${base}/ui/policy`);
  await pt.page.waitForSelector('#qe-form');
  assert.equal(await pt.page.locator('#policy-editor, #editor-preview, #rollback').count(), 0);
  assert.deepEqual(await pt.page.locator('#qe-queue option').evaluateAll((os) => os.map((o) => o.value)), ['blue/main']);
  await pt.page.fill('#qe-guaranteed', '1');
  await pt.page.fill('#qe-borrow', '3');
  await pt.page.click('#qe-preview');
  await pt.page.waitForSelector('#qe-apply');
  assert.deepEqual(await pt.page.locator('#qe-diff-summary li').allTextContents(), [
    'blue/main: gpus guarantee from 0 to 1',
    'blue/main: gpus borrow limit from no limit to 3',
  ]);
  await axe(pt.page, 'policy (tenant-admin, a previewed queue change)');
  assert.equal((await versionsOf()).active, rolled.version, 'a dry run applies nothing');
  await pt.page.click('#qe-apply');
  await pt.page.click('#qe-yes');
  await pt.page.waitForFunction(() => /^Applied: policy version \d+ is active\.$/.test(document.querySelector('#qe-notice')?.textContent?.trim() ?? ''));
  const byTenantAdmin = (await call(admin, 'GET', '/v1/policy')).json;
  assert.equal(byTenantAdmin.version, rolled.version + 1);
  assert.equal(byTenantAdmin.applied_by, 'blue-admin');
  const blueMain = byTenantAdmin.policy.queues.find((q) => q.path === 'blue/main');
  assert.deepEqual([blueMain.quota.gpus.guaranteed, blueMain.quota.gpus.borrow_limit], [1000, 3000]);
  const diffByTa = (await call(admin, 'GET', `/v1/policy/diff?from=${rolled.version}&to=${byTenantAdmin.version}`)).json;
  assert.deepEqual(diffByTa.changes.quota_changes.map((c) => c.queue), ['blue/main', 'blue/main'], 'only blue/main changed');
  assert.deepEqual(pt.problems, []);
  await pt.context.close();

  // --- alerts and the ops report -------------------------------------------
  // A real alert: a queue_wait rule of 1 s on blue/main, posting to a webhook
  // this test listens on, and a 16-GPU job of blue that the node of 8 never
  // starts. berthd raises it within its --alert-interval (2 s).
  const { createServer: httpServer } = await import('node:http');
  const hooks = [];
  const hook = httpServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      hooks.push(JSON.parse(body));
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise((ok) => hook.listen(0, '127.0.0.1', ok));
  const waitRules = (enabled) =>
    `sinks:\n  - {name: e2e-hook, url: "http://127.0.0.1:${hook.address().port}/hook"}\n` +
    `rules:\n  - {name: gpu-health, kind: gpu_health, severity: critical}\n` +
    `  - {name: e2e-waits, kind: queue_wait, queue: "blue/main", threshold: 1s, severity: warning, enabled: ${enabled}, sinks: [e2e-hook]}\n`;
  expectStatus(await call(admin, 'POST', '/v1/alert-rules?comment=e2e', waitRules(true), 'application/yaml'), 201, 'alert rules');
  const stuckSpec = { name: 'blue-waits-too-long', command: ['sleep', '300'], resources: { gpus: 16 }, tenant: 'blue', queue: 'main' };
  const stuck = await call(admin, 'POST', '/v1/jobs', JSON.stringify(stuckSpec));
  expectStatus(stuck, 201, 'submit the job that waits');
  const raised = await waitFor('the queue_wait alert', async () =>
    (await call(admin, 'GET', '/v1/alerts?kind=queue_wait')).json.alerts.find((x) => x.rule === 'e2e-waits'));
  // The oldest pending job of blue/main: the one just submitted, or an older one still waiting.
  const waitingJob = Number(/\bjob (\d+) has waited\b/.exec(raised.message)?.[1]);
  const waitingNow = (await call(admin, 'GET', `/v1/jobs/${waitingJob}`)).json;
  assert.deepEqual([waitingNow.tenant, waitingNow.queue, waitingNow.state], ['blue', 'main', 'Pending'], raised.message);
  assert.ok(waitingJob <= stuck.json.id);
  await waitFor('the webhook delivery', async () =>
    (await call(admin, 'GET', '/v1/alert-deliveries')).json.deliveries.find((d) => d.alert_id === raised.id && d.state === 'delivered'));
  assert.ok(hooks.some((h) => h.event === 'raised' && h.alert?.id === raised.id), 'the webhook got the alert');

  // The platform admin sees it on /ui/alerts, with the rules and the delivery.
  const al = await open('en-US');
  await signIn(al.page, admin);
  await al.page.waitForSelector('#jobs-table, #jobs-empty');
  await al.page.click('nav a[href="/ui/alerts"]');
  const alertRow = `#alerts-table tr[data-alert="${raised.id}"]`;
  await al.page.waitForSelector(alertRow);
  const inRow = async (sel) => (await al.page.textContent(`${alertRow} ${sel}`)).trim();
  assert.equal(await inRow('.kind'), 'Queue wait');
  assert.equal(await inRow('.severity'), 'Warning');
  assert.equal(await inRow('.message'), raised.message);
  assert.equal(await inRow('.subject'), 'rule e2e-waits: blue/main');
  assert.equal(await inRow('.resolved-at'), 'open');
  assert.equal(await al.page.getAttribute(`${alertRow} .concerns a`, 'href'), `/ui/jobs/${waitingJob}`);
  const alertIds = await al.page.locator('#alerts-table tbody tr').evaluateAll((rows) => rows.map((r) => Number(r.dataset.alert)));
  assert.deepEqual(alertIds, [...alertIds].sort((x, y) => y - x), 'newest first');
  await al.page.waitForSelector('#alert-rules tr[data-rule="e2e-waits"]');
  assert.equal((await al.page.textContent('#alert-rules tr[data-rule="e2e-waits"] .params')).trim(), 'queue blue/main; threshold 1s');
  await al.page.waitForSelector('#alert-deliveries tbody tr');
  const deliveredRows = await al.page.locator('#alert-deliveries tbody tr').allTextContents();
  assert.ok(deliveredRows.some((r) => r.includes('e2e-hook') && r.includes('delivered')), `deliveries: ${deliveredRows}`);
  await axe(al.page, 'alerts (admin)');
  // Resolve from the page, after the confirmation; the API agrees.
  await al.page.click(`${alertRow} [data-action="resolve"]`);
  await al.page.click('#resolve-yes');
  await al.page.waitForFunction((id) => document.querySelector('#alerts-notice')?.textContent?.trim() === `Alert ${id} resolved.`, raised.id);
  const resolvedNow = (await call(admin, 'GET', '/v1/alerts?all=true&kind=queue_wait')).json.alerts.find((x) => x.id === raised.id);
  assert.ok(resolvedNow.resolved_ms, 'the API has it resolved');
  assert.equal(resolvedNow.resolved_by, adminName);
  assert.match(await inRow('.resolved-at'), new RegExp(`, by ${adminName}$`));
  // The rule off (berthd resolves what it raised again meanwhile), the job gone.
  expectStatus(await call(admin, 'POST', '/v1/alert-rules?comment=e2e%20done', waitRules(false), 'application/yaml'), 201, 'alert rules off');
  expectStatus(await call(admin, 'POST', `/v1/jobs/${stuck.json.id}/cancel`), 200, 'cancel the job that waits');
  hook.close();

  // The ops report: the figures the page shows are the answer it received,
  // the manual resolve among the interventions, and the download is berthd's.
  await al.page.click('nav a[href="/ui/reports/ops"]');
  await al.page.waitForSelector('#report-summary');
  const reportAnswers = () => al.answers.filter((r) => new URL(r.url).pathname === '/v1/reports/ops');
  assert.equal(new URL(reportAnswers().at(-1).url).search, '?from=24h');
  const rep = JSON.parse(reportAnswers().at(-1).body);
  const fig = async (k) => (await al.page.textContent(`#report-summary tr[data-figure="${k}"] td`)).trim();
  assert.equal(await fig('gpus'), String(rep.fleet.gpus));
  assert.equal(await fig('capacity'), (rep.fleet.capacity_mgpu_ms / 3.6e9).toFixed(3));
  assert.equal(await fig('gpuHours'), (rep.total.allocated_mgpu_ms / 3.6e9).toFixed(3));
  assert.equal(await fig('started'), String(rep.total.wait.started));
  assert.equal(await fig('runs'), String(rep.total.runs_finished));
  assert.match(await fig('failed'), new RegExp(`^${rep.total.runs_failed} `));
  assert.equal(await fig('cost'), rep.total.cost);
  assert.equal(await fig('interventions'), String(rep.total.interventions));
  assert.ok(rep.total.runs_finished > 0 && rep.total.interventions > 0, 'the window holds runs and interventions');
  assert.ok(rep.interventions.some((i) => i.action === 'alert.resolve' && i.object === `alert/${raised.id}`));
  assert.equal(await al.page.locator(`#report-interventions tr[data-object="alert/${raised.id}"]`).count(), 1);
  for (const t of rep.tenants) {
    const cellOf = (k) => al.page.textContent(`#report-tenants tr[data-row="${t.tenant}"] td[data-figure="${k}"]`).then((x) => x.trim());
    assert.equal(await cellOf('runs'), String(t.runs_finished), `${t.tenant} runs`);
    assert.equal(await cellOf('cost'), t.cost, `${t.tenant} cost`);
  }
  const href = await al.page.getAttribute('#report-download', 'href');
  assert.equal(href, `/v1/reports/ops?from=${rep.from_ms}&to=${rep.to_ms}`);
  const [download] = await Promise.all([al.page.waitForEvent('download'), al.page.click('#report-download')]);
  assert.match(download.suggestedFilename(), /^berth-ops-report-\d{8}T\d{6}Z-\d{8}T\d{6}Z\.json$/);
  const file = JSON.parse(readFileSync(await download.path(), 'utf8'));
  assert.deepEqual([file.from_ms, file.to_ms, file.total.runs_finished, file.total.cost], [rep.from_ms, rep.to_ms, rep.total.runs_finished, rep.total.cost]);
  const fetched = await al.context.request.get(base + href);
  assert.equal(fetched.status(), 200);
  assert.match(fetched.headers()['content-type'] ?? '', /^application\/json/);
  await axe(al.page, 'ops report (admin)');
  // Another window, from the select; then the page in Chinese.
  await al.page.selectOption('#report-window', '7d');
  await al.page.click('#report-title ~ form button[type=submit]');
  await al.page.waitForFunction(() => location.search === '?from=7d');
  await waitFor('the 7-day report', () => reportAnswers().some((r) => new URL(r.url).search === '?from=7d'));
  await al.page.waitForSelector('#report-summary');
  await al.page.selectOption('#lang-select', 'zh');
  await al.page.waitForFunction(() => document.querySelector('h1')?.textContent?.trim() === '运维报告');
  await axe(al.page, 'ops report (admin, zh)');
  assert.deepEqual(al.problems, []);
  await al.context.close();

  // A member of blue: no Alerts link, the server's refusal on the page and
  // from the API; the report of its own tenant without fleet-wide figures.
  const am = await open('en-US');
  await signIn(am.page, blueMember);
  await am.page.waitForSelector('#jobs-table, #jobs-empty');
  assert.equal(await am.page.locator('nav a[href="/ui/alerts"]').count(), 0, 'a member has no Alerts link');
  await am.page.goto(`${base}/ui/alerts`);
  await am.page.waitForSelector('#alerts-refused');
  assert.equal((await call(blueMember, 'GET', '/v1/alerts')).status, 403);
  assert.equal(await am.page.locator('[data-action="resolve"], #alert-rules, #alert-deliveries').count(), 0);
  await axe(am.page, 'alerts (member, refused)');
  await am.page.click('nav a[href="/ui/reports/ops"]');
  await am.page.waitForSelector('#report-scoped');
  const memberReport = JSON.parse(am.answers.filter((r) => new URL(r.url).pathname === '/v1/reports/ops').at(-1).body);
  assert.equal(memberReport.fleet, null);
  assert.deepEqual(memberReport.tenants.map((t) => t.tenant), ['blue']);
  assert.equal(await am.page.locator('#report-summary tr[data-figure="gpus"]').count(), 0);
  assert.equal(
    (await am.page.textContent('#report-summary tr[data-figure="runs"] td')).trim(),
    String(memberReport.total.runs_finished),
  );
  await axe(am.page, 'ops report (member)');
  assert.deepEqual(am.problems, []);
  await am.context.close();
  // --- cost ------------------------------------------------------------------
  // A price from now on, and a budget for each tenant: blue's enforced, in
  // GPU-hours; red's in money.
  expectStatus(await call(admin, 'POST', '/v1/prices', 'currency: EUR\ndefault: 2.50\n', 'application/yaml'), 201, 'a price table');
  expectStatus(await call(admin, 'POST', '/v1/budgets/blue', JSON.stringify({ gpu_hours: '100', enforce: true })), 200, "blue's budget");
  expectStatus(await call(admin, 'POST', '/v1/budgets/red', JSON.stringify({ amount: '50' })), 200, "red's budget");
  await waitFor('a priced minute of the running jobs', async () => Number((await call(admin, 'GET', '/v1/usage')).json.total.cost) > 0);
  const deepCost = await fetch(`${base}/ui/cost?period=last-month`);
  assert.equal(deepCost.status, 200);
  assert.match(await deepCost.text(), /<div id="app">/);
  // What a cost table shows, read in one go (the page asks again every 30 s).
  const costTable = (pg, id) =>
    pg.evaluate((sel) => {
      const table = document.querySelector(sel);
      if (!table) return null;
      const rows = (part) => [...table.querySelectorAll(`${part} tr`)].map((tr) => [...tr.children].map((c) => c.textContent.trim()));
      return { toMs: Number(table.dataset.toMs), fromMs: Number(table.dataset.fromMs), body: rows('tbody'), foot: rows('tfoot') };
    }, `#${id}`);
  const usageAnswer = (ans, by, toMs) =>
    ans
      .filter((r) => new URL(r.url).pathname === '/v1/usage' && new URL(r.url).searchParams.get('by') === by)
      .map((r) => ({ url: r.url, json: JSON.parse(r.body) }))
      .find((r) => r.json.to_ms === toMs);
  // A row as the page shows it: GPU-hours to three decimals, the idle share
  // of the sampled time to one, money as berthd writes it.
  const hours = (v) => (v === null ? '—' : String(Math.round(v * 1000) / 1000));
  const waste = (r, fmt) =>
    r.idle_mgpu_ms === null || !r.measured_mgpu_ms ? fmt(null) : fmt((r.idle_mgpu_ms / r.measured_mgpu_ms) * 100);
  const shown = (r, name) => [
    name, hours(r.allocated_gpu_hours), hours(r.used_gpu_hours), hours(r.idle_gpu_hours),
    waste(r, (p) => (p === null ? '—' : `${(Math.round(p * 10) / 10).toFixed(1)}%`)),
    r.cost, r.idle_cost ?? '—', String(r.runs),
  ];
  const csvRow = (r, name) => [
    name, String(r.allocated_gpu_hours), r.used_gpu_hours === null ? '' : String(r.used_gpu_hours),
    r.idle_gpu_hours === null ? '' : String(r.idle_gpu_hours),
    waste(r, (p) => (p === null ? '' : String(Math.round(p * 100) / 100))),
    r.cost, r.idle_cost ?? '', String(r.runs),
  ];

  const co = await open('en-US');
  await signIn(co.page, admin);
  await co.page.waitForSelector('#jobs-table, #jobs-empty');
  await co.page.click('nav a[href="/ui/cost"]');
  await co.page.waitForSelector('#cost-by-tenant tbody tr[data-tenant="red"]');
  assert.match(co.page.url(), /\/ui\/cost$/);
  const byTenant = await costTable(co.page, 'cost-by-tenant');
  const tenantAnswer = usageAnswer(co.answers, 'tenant', byTenant.toMs);
  assert.ok(tenantAnswer, 'the page shows an answer of GET /v1/usage?by=tenant it received');
  assert.doesNotMatch(tenantAnswer.url, /tenant=/, 'the page names no tenant: berthd scopes the answer');
  const monthStartMs = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1);
  assert.equal(tenantAnswer.json.from_ms, monthStartMs, 'this UTC month');
  assert.deepEqual(tenantAnswer.json.rows.map((r) => r.key.tenant).sort(), ['blue', 'red'], 'both tenants ran jobs this month');
  assert.deepEqual(byTenant.body, tenantAnswer.json.rows.map((r) => shown(r, r.key.tenant)), "each tenant's figures are the answer's");
  assert.deepEqual(byTenant.foot, [shown(tenantAnswer.json.total, 'Total')], "the total is the answer's");
  assert.ok(Number(tenantAnswer.json.total.cost) > 0, 'the running jobs cost something');
  const byDay = await costTable(co.page, 'cost-by-day');
  const dayAnswer = usageAnswer(co.answers, 'day,tenant', byDay.toMs);
  assert.ok(dayAnswer, 'the page shows an answer of GET /v1/usage?by=day,tenant it received');
  assert.deepEqual(byDay.body, dayAnswer.json.rows.map((r) => [r.key.day, ...shown(r, r.key.tenant)]));
  assert.ok(await co.page.isVisible('#cost-chart'), 'the chart by day');
  const budgetAnswer = JSON.parse(co.answers.filter((r) => new URL(r.url).pathname === '/v1/budgets').pop().body).budgets;
  assert.deepEqual(budgetAnswer.map((b) => b.tenant).sort(), ['blue', 'red']);
  for (const bgt of budgetAnswer) {
    const tr = `#cost-budgets tr[data-tenant="${bgt.tenant}"]`;
    const unit = bgt.unit === 'gpu_hours' ? 'GPU-hours' : bgt.currency;
    assert.equal((await co.page.textContent(`${tr} .limit`)).trim(), `${bgt.limit} ${unit}`);
    assert.equal((await co.page.textContent(`${tr} .used`)).trim(), `${bgt.used} ${unit}`);
    assert.equal((await co.page.textContent(`${tr} .enforced`)).trim(), bgt.enforce ? 'yes: low-priority jobs wait while over it' : 'no');
  }
  console.log(
    `cost this month: ${tenantAnswer.json.rows.length} tenants, ${tenantAnswer.json.total.allocated_gpu_hours.toFixed(4)} GPU-hours, ` +
      `${tenantAnswer.json.total.cost} ${tenantAnswer.json.currency}; used and idle ${tenantAnswer.json.telemetry ? 'measured' : 'not measured'}`,
  );
  await axe(co.page, 'cost (platform admin)');
  // Download CSV: the rows shown, unformatted, in a UTF-8 file with a BOM.
  let csv = null;
  for (let attempt = 0; attempt < 3 && csv === null; attempt++) {
    const before = await costTable(co.page, 'cost-by-tenant');
    const [download] = await Promise.all([co.page.waitForEvent('download'), co.page.click('#cost-by-tenant-csv')]);
    const after = await costTable(co.page, 'cost-by-tenant');
    if (JSON.stringify(before) !== JSON.stringify(after)) continue; // a refresh came between
    const bytes = readFileSync(await download.path());
    assert.deepEqual([...bytes.subarray(0, 3)], [0xef, 0xbb, 0xbf], 'a UTF-8 byte-order mark');
    assert.match(download.suggestedFilename(), /^berth-cost-by-tenant-\d{4}-\d{2}-01-to-\d{4}-\d{2}-\d{2}\.csv$/);
    csv = { text: bytes.subarray(3).toString('utf8'), toMs: after.toMs };
  }
  assert.ok(csv, 'a download while the table stood still');
  const csvAnswer = usageAnswer(co.answers, 'tenant', csv.toMs).json;
  assert.ok(csv.text.endsWith('\r\n'));
  assert.deepEqual(
    csv.text.slice(0, -2).split('\r\n').map((l) => l.split(',')),
    [
      ['Tenant', 'Allocated GPU-hours', 'Used GPU-hours', 'Idle GPU-hours', 'GPU waste', 'Cost (EUR)', 'Idle cost (EUR)', 'Runs'],
      ...csvAnswer.rows.map((r) => csvRow(r, r.key.tenant)),
      csvRow(csvAnswer.total, 'Total'),
    ],
    "the CSV's rows are the rows shown, with the answer's figures",
  );
  await co.page.selectOption('#lang-select', 'zh');
  await co.page.waitForFunction(() => document.querySelector('h1')?.textContent?.trim() === '费用');
  await axe(co.page, 'cost (platform admin, zh)');
  assert.deepEqual(co.problems, [], 'no CSP refusal or script error on the cost page');
  await co.context.close();

  // A member of blue: blue's rows and budget only, as berthd answered them.
  const cm = await open('zh-CN');
  await signIn(cm.page, blueMember);
  await cm.page.waitForSelector('#jobs-table, #jobs-empty');
  await cm.page.click('nav a[href="/ui/cost"]');
  await cm.page.waitForSelector('#cost-by-tenant tbody tr[data-tenant]');
  await cm.page.waitForSelector('#cost-budgets');
  const memberRows = await cm.page.locator('#cost-by-tenant tbody tr, #cost-by-day tbody tr, #cost-budgets tbody tr').evaluateAll((trs) => trs.map((tr) => tr.dataset.tenant));
  assert.ok(memberRows.length >= 3 && memberRows.every((n) => n === 'blue'), `blue's member sees: ${memberRows}`);
  const memberAnswer = usageAnswer(cm.answers, 'tenant', (await costTable(cm.page, 'cost-by-tenant')).toMs).json;
  assert.deepEqual((await costTable(cm.page, 'cost-by-tenant')).body, memberAnswer.rows.map((r) => shown(r, r.key.tenant)));
  const costAsked = cm.answers.filter((r) => /^\/v1\/(usage|budgets)/.test(new URL(r.url).pathname));
  assert.ok(costAsked.length >= 3, 'the page asked for usage and budgets');
  for (const r of costAsked) {
    assert.doesNotMatch(new URL(r.url).search, /tenant=|red/, `the page asked for a tenant: ${r.url}`);
    assert.doesNotMatch(r.body, /"red"/, `blue saw red's usage or budget in ${r.url}`);
  }
  for (const r of cm.answers) {
    assert.doesNotMatch(r.body, /red-fleet-holder|red-secret-training|"tenant":\s*"red"/, `blue saw red in ${r.url}`);
  }
  assert.doesNotMatch(await cm.page.content(), /red-fleet-holder|data-tenant="red"/);
  await axe(cm.page, 'cost (member, zh)');
  assert.deepEqual(cm.problems, []);
  await cm.context.close();

  // --- services and sessions ------------------------------------------------
  // blue gets an inference queue; a member of blue applies a service there
  // (no GPU, a readiness command that passes: it becomes ready without the
  // gateway, which this berthd runs without: its endpoint is none).
  expectStatus(
    await call(admin, 'POST', '/v1/policy', RED_BLUE + '      - name: serve\n        kind: inference\n', 'application/yaml'),
    201,
    'policy with blue/serve',
  );
  const blueViewer = await member('blue-viewer', 'blue', 'viewer');
  const redMember = await member('red-member', 'red', 'member');
  const svcSpec = 'name: coder-e2e\ntenant: blue\nqueue: serve\ncommand: [sleep, "600"]\n' +
    'replicas: {min: 1, max: 2}\nreadiness: {command: ["true"], period: 1s}\n';
  expectStatus(await call(blueMember, 'POST', '/v1/services', svcSpec, 'application/yaml'), 201, 'apply coder-e2e');
  const svcReady = await waitFor('coder-e2e ready', async () => {
    const r = await call(blueMember, 'GET', '/v1/services/blue/coder-e2e');
    return r.json?.status?.ready === 1 && r.json.status.replicas?.length === 1 ? r.json : null;
  }, 60000, 250);
  const replicaJob = svcReady.status.replicas[0].job;

  // The platform admin sees it in the list and on its page, as the API has it.
  const svA = await open('en-US');
  await signIn(svA.page, admin);
  await svA.page.waitForSelector('#jobs-table, #jobs-empty');
  await svA.page.click('nav a[href="/ui/services"]');
  await svA.page.waitForSelector('#services-table tr[data-service="blue/coder-e2e"]');
  const svcCells = await svA.page.locator('#services-table tr[data-service="blue/coder-e2e"] td').allTextContents();
  assert.deepEqual(svcCells.map((c) => c.trim()).slice(0, 5), ['blue', 'coder-e2e', 'Inference service', '1 of 1 ready (1–2)', '1']);
  assert.equal(svcCells[7].trim(), 'none (no gateway)');
  await axe(svA.page, 'services');
  await svA.page.goto(`${base}/ui/services?kind=session`);
  await svA.page.waitForSelector('#services-empty');
  await svA.page.goto(`${base}/ui/services?kind=service&tenant=blue`);
  await svA.page.click('#services-table tr[data-service="blue/coder-e2e"] a');
  await svA.page.waitForSelector('#service-replicas');
  assert.match(svA.page.url(), /\/ui\/services\/blue\/coder-e2e$/);
  assert.equal(await svA.page.getAttribute(`#service-replicas tr[data-job="${replicaJob}"] a`, 'href'), `/ui/jobs/${replicaJob}`);
  assert.equal((await svA.page.textContent('#service-bounds')).trim(), 'min 1, max 2');
  await axe(svA.page, 'service');
  assert.deepEqual(svA.problems, []);
  await svA.context.close();

  // The member scales it from the page (the API then has max 3), then rolls
  // it back after confirming (a new revision restoring the first).
  const svM = await open('zh-CN');
  await signIn(svM.page, blueMember);
  await svM.page.waitForSelector('#jobs-table, #jobs-empty');
  await svM.page.goto(`${base}/ui/services/blue/coder-e2e`);
  await svM.page.waitForSelector('#scale-form');
  await axe(svM.page, 'service (member, zh)');
  await svM.page.fill('#scale-max', '0');
  await svM.page.click('#scale-submit');
  await svM.page.waitForSelector('#scale-max-error');
  assert.equal(await svM.page.getAttribute('#scale-max', 'aria-invalid'), 'true');
  await svM.page.fill('#scale-max', '3');
  await svM.page.click('#scale-submit');
  await waitFor('scaled to max 3', async () => (await call(admin, 'GET', '/v1/services/blue/coder-e2e')).json.spec.replicas.max === 3);
  await svM.page.waitForFunction(() => document.querySelector('#service-revisions tr[data-revision="2"]') !== null);
  await svM.page.click('#rollback');
  await svM.page.click('#rollback-yes');
  await waitFor('rolled back', async () => {
    const r = (await call(admin, 'GET', '/v1/services/blue/coder-e2e')).json;
    return r.revision === 3 && r.revisions[0].change === 'rollback' && r.revisions[0].restores === 1 && r.spec.replicas.max === 2;
  });
  await svM.page.waitForSelector('#service-revisions tr[data-revision="3"]');
  assert.deepEqual(svM.problems, []);
  await svM.context.close();

  // blue's viewer reads it and gets no scale, rollback or delete.
  const svV = await open('en-US');
  await signIn(svV.page, blueViewer);
  await svV.page.waitForSelector('#jobs-table, #jobs-empty');
  await svV.page.goto(`${base}/ui/services/blue/coder-e2e`);
  await svV.page.waitForSelector('#service-revisions');
  for (const id of ['#service-actions', '#scale-form', '#rollback', '#delete', '#resume']) {
    assert.equal(await svV.page.isVisible(id), false, `a viewer has no ${id}`);
  }
  await axe(svV.page, 'service (viewer)');
  await svV.context.close();

  // A member of red: not in its list, its page says there is none, and no
  // answer its page received names it.
  const svR = await open('en-US');
  await signIn(svR.page, redMember);
  await svR.page.waitForSelector('#jobs-table, #jobs-empty');
  await svR.page.goto(`${base}/ui/services`);
  await svR.page.waitForSelector('#services-empty, #services-table');
  assert.equal(await svR.page.isVisible('tr[data-service="blue/coder-e2e"]'), false);
  await axe(svR.page, 'services (another tenant)');
  await svR.page.goto(`${base}/ui/services/blue/coder-e2e`);
  await svR.page.waitForSelector('#service-missing');
  await svR.page.goto(`${base}/ui/services?tenant=blue`);
  await svR.page.waitForSelector('#services-empty, #services-table, [role=alert]');
  assert.ok(svR.answers.some((r) => new URL(r.url).pathname.startsWith('/v1/services')), 'the page asked for services');
  // The page's own question names it; berthd's answer is a missing one's.
  for (const r of svR.answers) {
    if (new URL(r.url).pathname === '/v1/services/blue/coder-e2e') {
      assert.equal(JSON.parse(r.body).error.message, 'service blue/coder-e2e not found');
    } else {
      assert.doesNotMatch(r.body, /coder-e2e/, `red saw blue's service in ${r.url}`);
    }
  }
  assert.doesNotMatch(await svR.page.content(), /coder-e2e/);
  assert.deepEqual(svR.problems, []);
  await svR.context.close();
  expectStatus(await call(blueMember, 'DELETE', '/v1/services/blue/coder-e2e'), 200, 'delete coder-e2e');

  // --- 10,000 GPUs: 1,250 nodes of 8, answered by interception -------------
  // Only /v1/nodes and /v1/gpus are intercepted, with objects cloned from
  // this berthd's own answers (so the shape is the API's); the session and
  // the assets are real. Printed, not asserted: speed is measured.
  const nodeTpl = nodesNow.json.nodes[0];
  const gpuTpl = gpusNow.find((g) => g.job === null);
  const heldTpl = gpusNow.find((g) => g.job?.id === holderJob);
  const bigNodes = [];
  const bigGpus = [];
  for (let n = 0; n < 1250; n++) {
    const name = `rack${String(Math.floor(n / 32)).padStart(2, '0')}-gpu${String(n % 32).padStart(2, '0')}`;
    const cordon = n % 97 === 0 ? { kind: 'cordon', reason: 'maintenance', by: 'ops', automatic: false, at_ms: 1 } : null;
    const state = n % 211 === 5 ? 'NotReady' : 'Ready';
    bigNodes.push({ ...nodeTpl, name, hostname: name, state, cordon, gpus_total: 8 });
    for (let i = 0; i < 8; i++) {
      const busy = (n * 8 + i) % 3 !== 0;
      const g = structuredClone(busy ? heldTpl : gpuTpl);
      Object.assign(g, { node: name, node_state: state, index: i, uuid: `GPU-${n}-${i}`, cordon });
      if (busy) g.job = { ...g.job, id: 100000 + n, name: `train-${n}` };
      if ((n * 8 + i) % 501 === 7) Object.assign(g, { health: 'unhealthy', health_detail: 'XID 79' });
      bigGpus.push(g);
    }
  }
  const bigN = JSON.stringify({ nodes: bigNodes });
  const bigG = JSON.stringify({ gpus: bigGpus });
  const m = await open('en-US');
  await signIn(m.page, admin);
  await m.page.waitForSelector('#jobs-table');
  await m.page.route('**/v1/nodes', (r) => r.fulfill({ status: 200, contentType: 'application/json', body: bigN }));
  await m.page.route('**/v1/gpus', (r) => r.fulfill({ status: 200, contentType: 'application/json', body: bigG }));
  const figures = [];
  for (let run = 0; run < 3; run++) {
    const t0 = Date.now();
    await m.page.goto(`${base}/ui/fleet`);
    const inPage = await m.page.waitForFunction(
      () => document.querySelector('#fleet-map')?.getAttribute('data-gpus') === '10000' && performance.now(),
      null,
      { polling: 'raf', timeout: 60000 },
    );
    const sinceNavigation = Math.round(await inPage.jsonValue());
    const wall = Date.now() - t0;
    // The frame after the cells arrived has been laid out and painted.
    const painted = Math.round(
      await m.page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))),
    );
    // When the last of the two lists had first arrived: the rest is the
    // page's own work (the stream's hello has the page ask again; not counted).
    const arrived = Math.round(
      await m.page.evaluate(() => {
        const first = (re) => performance.getEntriesByType('resource').find((e) => re.test(e.name))?.responseEnd ?? 0;
        return Math.max(first(/\/v1\/nodes$/), first(/\/v1\/gpus$/));
      }),
    );
    figures.push({ wall, sinceNavigation, painted, render: sinceNavigation - arrived });
    assert.equal(await m.page.locator('#fleet-map .gpu').count(), 10000, 'all 10,000 cells');
    assert.equal(await m.page.locator('#fleet-map li.node-row').count(), 1250);
  }
  const list = (k) => figures.map((x) => `${x[k]} ms`).join(', ');
  console.log(
    `fleet map, 1,250 nodes x 8 GPUs, from navigation (in-page performance.now()): 10,000 cells in the DOM ` +
      `${list('sinceNavigation')} (of which after both lists arrived: ${list('render')}); painted ${list('painted')}; ` +
      `wall clock from goto ${list('wall')}; the two answers are ${((bigN.length + bigG.length) / 1e6).toFixed(1)} MB`,
  );
  assert.deepEqual(m.problems, []);
  await m.context.close();
  await f.context.close();

  console.log('console browser test: passed');
} catch (e) {
  failed = true;
  console.error(e);
  console.error('--- berthd log (last 40 lines) ---');
  console.error(log.join('').split('\n').slice(-40).join('\n'));
} finally {
  if (browser) await browser.close().catch(() => undefined);
  berthd.kill('SIGTERM');
  await Promise.race([new Promise((r) => berthd.once('exit', r)), sleep(5000)]);
  if (berthd.exitCode === null) berthd.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
