// Screenshots of the console's main views, in English and in Simplified
// Chinese, for docs/console/. It starts a real all-in-one berthd (plain HTTP
// on loopback) on a simulated cluster of three nodes (two of 8 H100s, one of
// 4 L40S), applies a policy with two tenants, vision and nlp, and their
// queues, prices and budgets, and gives berthd a realistic day: an L40S that
// falls off the bus (cordoned, a critical alert), a job that finished, one
// that failed, three running on the simulated nodes, and one that cannot fit
// until a running job ends (so it waits with a reason and an estimated
// start), a queue_wait alert about it, a second policy version and a pending
// quota request. Then the platform
// admin's browser captures each view, once per language.
//
//   BERTH_BIN_DIR=build/dev/bin node console/e2e/screenshots.mjs [--out docs/console]
//   (or `npm run screenshots` in console/, which writes to docs/console)
//
// Files are docs/console/<view>-<lang>.png, 1280 px wide, at most 1600 px
// tall. Names, ids, queues and figures are fixed by the scenario; clock times
// (submitted at, estimated start, events) are those of the run. Exits 77
// saying why when Chromium, a Chinese font, node_modules, the built console
// or berthd is missing, as the browser test does. Not run by ctest: it
// writes into docs/.

import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import {
  chromiumPath,
  repo,
  requirePrerequisites,
  skipper,
  sleep,
  startBerthd,
  waitFor as waitWithin,
} from './support.mjs';

// A long page (the ops report) is cut here, keeping each PNG near 150 KB.
const MAX_HEIGHT = 1600;

function usage(message) {
  console.error(`screenshots: ${message}`);
  console.error('usage: BERTH_BIN_DIR=build/dev/bin node console/e2e/screenshots.mjs [--out DIR]');
  process.exit(2);
}
let outDir = join(repo, 'docs/console');
for (let i = 2; i < process.argv.length; i++) {
  const arg = process.argv[i];
  if (arg === '--out') {
    if (i + 1 >= process.argv.length) usage('--out needs a directory');
    outDir = resolve(process.argv[++i]);
  } else if (arg.startsWith('--out=')) {
    outDir = resolve(arg.slice('--out='.length));
  } else {
    usage(`unknown argument '${arg}'`);
  }
}

const skip = skipper('console screenshots');
// Without a font that has Chinese glyphs the zh pages would show boxes.
let zhFonts = '';
try {
  zhFonts = execFileSync('fc-list', [':lang=zh', 'family'], { encoding: 'utf8' }).trim();
} catch {
  zhFonts = '';
}
if (!zhFonts) skip('no font with Chinese glyphs (fc-list :lang=zh); scripts/install-deps.sh installs fonts-wqy-microhei');
const uiDir = requirePrerequisites(skip);

const { chromium } = await import('playwright-core');

// The cluster: two training nodes of 8 H100s and an inference node of 4
// L40S (one of which is made to report an Xid once berthd runs).
const CLUSTER = `nodes:
  - name: train-a
    labels: {pool: training, zone: a}
    cpus: 64
    memory: 512Gi
    gpus: {model: H100-80GB, memory: 80Gi, count: 8, numa_nodes: 2}
  - name: train-b
    labels: {pool: training, zone: b}
    cpus: 64
    memory: 512Gi
    gpus: {model: H100-80GB, memory: 80Gi, count: 8, nvlink_islands: [[0, 1, 2, 3], [4, 5, 6, 7]]}
  - name: infer-a
    labels: {pool: inference, zone: a}
    cpus: 32
    memory: 256Gi
    gpus:
      model: L40S-48GB
      memory: 48Gi
      count: 4
      nvlink_islands: []
`;

// Two tenants that split the 20 GPUs between them.
const POLICY = (devBorrow) => `queues:
  - name: vision
    quota: {gpus: {guaranteed: 10, borrow_limit: 4}}
    children:
      - name: training
        quota: {gpus: 8}
      - name: dev
        quota: {gpus: {guaranteed: 2${devBorrow ? ', borrow_limit: 2' : ''}}}
      - name: serving
        kind: inference
  - name: nlp
    quota: {gpus: {guaranteed: 10, borrow_limit: 4}}
    children:
      - name: pretrain
        quota: {gpus: 6}
      - name: finetune
        quota: {gpus: {guaranteed: 4${devBorrow ? ', weight: 2' : ''}}}
`;

const PRICES = `currency: USD
default: 1.00
prices:
  - {model: H100-80GB, per_gpu_hour: 3.00}
  - {model: L40S-48GB, per_gpu_hour: 1.20}
`;

const RULES = `rules:
  - {name: gpu-health, kind: gpu_health, severity: critical}
  - {name: pretrain-waits, kind: queue_wait, queue: "nlp/pretrain", threshold: 1s, severity: warning}
`;

// The jobs, in submit order (ids 1..6 on a fresh data dir); the running
// ones with who submits them.
const sh = (script) => ['sh', '-c', script];
const FINISHED = {
  name: 'bert-squad-eval', tenant: 'nlp', queue: 'finetune',
  command: sh('echo "loading checkpoint bert-large"; echo "eval: exact_match 86.9, f1 93.2"; sleep 2; echo done'),
  resources: { gpus: 1, gpu_model: 'H100-80GB' },
};
const FAILED = {
  name: 'augment-check', tenant: 'vision', queue: 'dev',
  command: sh('echo "checking 1200 augmented batches"; echo "Traceback (most recent call last):"; ' +
    'echo "  File \\"augment.py\\", line 88, in <module>"; echo "ValueError: batch 417 is empty after cropping"; exit 1'),
  resources: { gpus: 1, gpu_model: 'L40S-48GB' },
};
const RUNNING = [
  ['mei', {
    name: 'resnet50-imagenet', tenant: 'vision', queue: 'training',
    command: sh('echo "epoch 1/90"; exec sleep 7200'),
    resources: { gpus: 8, gpu_model: 'H100-80GB' }, node_selector: { zone: 'a' }, max_runtime: '4h',
  }],
  ['ravi', {
    name: 'vit-notebook', tenant: 'vision', queue: 'dev',
    command: sh('echo "jupyter on port 8888"; exec sleep 7200'),
    resources: { gpus: 2, gpu_model: 'L40S-48GB' }, max_runtime: '8h',
    load: { pattern: 'periodic', utilization: 60, period: '2m' },
  }],
  ['omar', {
    name: 'llama-7b-sft', tenant: 'nlp', queue: 'finetune',
    command: sh('echo "step 0 loss 2.31"; exec sleep 7200'),
    resources: { gpus: 4, gpu_model: 'H100-80GB' }, node_selector: { zone: 'b' }, max_runtime: '90m',
  }],
];
// 6 H100s on one node: train-a is full, train-b has 4 free until
// llama-7b-sft ends (its max runtime), and the L40S node has the wrong model.
const WAITING = {
  name: 'llama-13b-pretrain', tenant: 'nlp', queue: 'pretrain',
  command: sh('exec sleep 7200'),
  resources: { gpus: 6, gpu_model: 'H100-80GB' }, max_runtime: '12h',
};

const waitFor = (what, check, ms = 60000) => waitWithin(what, check, ms, 200);

const dir = mkdtempSync(join(tmpdir(), 'berth-console-shots-'));
writeFileSync(join(dir, 'cluster.yaml'), CLUSTER);
const { berthd, base, log } = await startBerthd(dir, uiDir, [
  '--simulate', join(dir, 'cluster.yaml'),
  '--telemetry-interval', '2s',
]);

let browser;
let failed = false;
let admin;
try {
  await waitFor('berthd /healthz', async () => (await fetch(`${base}/healthz`)).ok);
  admin = await waitFor('the bootstrap token', () => readFileSync(join(dir, 'data/bootstrap-token'), 'utf8').trim());

  async function call(token, method, path, body, type = 'application/json') {
    const res = await fetch(base + path, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': type } : {}) },
      body,
    });
    const text = await res.text();
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }
  const post = (token, path, body, type) =>
    call(token, 'POST', path, typeof body === 'string' ? body : JSON.stringify(body), type);
  const job = (id) => call(admin, 'GET', `/v1/jobs/${id}`);

  await waitFor('three Ready nodes', async () => {
    const nodes = (await call(admin, 'GET', '/v1/nodes')).nodes;
    return nodes.length === 3 && nodes.every((n) => n.state === 'Ready');
  });

  // The policy, its prices and the tenants' people.
  await post(admin, `/v1/policy?comment=${encodeURIComponent('tenants vision and nlp')}`, POLICY(false), 'application/yaml');
  await post(admin, '/v1/prices', PRICES, 'application/yaml');
  await post(admin, '/v1/budgets/vision', { amount: '5000' });
  await post(admin, '/v1/budgets/nlp', { gpu_hours: '2000', enforce: true });
  async function person(name, tenant, role) {
    await post(admin, '/v1/identities', { name, tenants: { [tenant]: role } });
    return (await post(admin, '/v1/tokens', { identity: name })).token;
  }
  const people = {
    mei: await person('mei', 'vision', 'tenant-admin'),
    ravi: await person('ravi', 'vision', 'member'),
    lena: await person('lena', 'nlp', 'tenant-admin'),
    omar: await person('omar', 'nlp', 'member'),
  };

  // Alert rules, then a GPU that falls off the bus: berthd cordons it and
  // raises a critical gpu_hardware alert.
  await post(admin, '/v1/alert-rules?comment=defaults', RULES, 'application/yaml');
  writeFileSync(join(dir, 'data/agents/infer-a/sim-faults'), '3 Xid 79: GPU has fallen off the bus\n');
  await waitFor('the Xid alert', async () =>
    (await call(admin, 'GET', '/v1/alerts?kind=gpu_hardware')).alerts.length > 0);

  // One job that finishes and one that fails, before the long ones; each
  // submitted by a person of its tenant.
  const finishedId = (await post(people.omar, '/v1/jobs', FINISHED)).id;
  const failedId = (await post(people.ravi, '/v1/jobs', FAILED)).id;
  await waitFor('the finished and the failed job', async () =>
    (await job(finishedId)).state === 'Succeeded' && (await job(failedId)).state === 'Failed');
  const runningIds = [];
  for (const [who, spec] of RUNNING) {
    runningIds.push((await post(people[who], '/v1/jobs', spec)).id);
  }
  for (const id of runningIds) await waitFor(`job ${id} running`, async () => (await job(id)).state === 'Running');
  const waitingId = (await post(people.lena, '/v1/jobs', WAITING)).id;
  const why = await waitFor('a reason with an estimated start', async () => {
    const w = await call(admin, 'GET', `/v1/jobs/${waitingId}/why?lang=en`);
    return w.reason?.code === 'NoNodeFits' && /estimated start in/.test(w.reason.message) ? w : null;
  });
  console.log(`job ${waitingId} waits: ${why.reason.message}`);

  // An inference service of vision's (no GPU: the fleet is as it was; no
  // gateway here, so no endpoint), ready with its replica.
  await post(people.ravi, '/v1/services', `name: vit-classifier
tenant: vision
queue: serving
command: [sleep, "86400"]
model: {name: google/vit-base-patch16-224, version: v2}
replicas: {min: 1, max: 3}
readiness: {command: ["true"], period: 1s}
slo: {latency_p95_ms: 250}
`, 'application/yaml');
  await waitFor('vit-classifier ready', async () =>
    (await call(admin, 'GET', '/v1/services/vision/vit-classifier')).status?.ready === 1, 60000);

  // A second policy version (the diff), and a quota request left pending.
  const firstVersion = (await call(admin, 'GET', '/v1/policy')).version;
  await post(admin, `/v1/policy?comment=${encodeURIComponent('vision/dev may borrow 2 GPUs; nlp/finetune weighs double')}`,
    POLICY(true), 'application/yaml');
  const secondVersion = (await call(admin, 'GET', '/v1/policy')).version;
  await post(people.lena, '/v1/quota-requests', {
    queue: 'nlp', resource: 'gpus', guaranteed: '14',
    reason: 'llama-13b-pretrain needs 6 H100s beside the fine-tuning runs',
  });
  await waitFor('the queue_wait alert', async () =>
    (await call(admin, 'GET', '/v1/alerts?kind=queue_wait')).alerts.some((a) => a.rule === 'pretrain-waits'));
  await waitFor('a priced minute of the running jobs', async () =>
    Number((await call(admin, 'GET', '/v1/usage')).total.cost) > 0, 120000);

  // Each view: its path, what shows that its data has arrived, and whether a
  // whole page is worth showing (else the first screen).
  const views = [
    { name: 'jobs', path: '/ui/jobs', ready: `#jobs-table tr[data-job="${waitingId}"]` },
    { name: 'job', path: `/ui/jobs/${waitingId}`, ready: '#why-message', reason: true },
    { name: 'submit', path: '/ui/submit', ready: '#submit-form' },
    { name: 'fleet', path: '/ui/fleet', ready: '#fleet-map .gpu' },
    { name: 'node', path: '/ui/fleet/infer-a', ready: '#node-events tbody tr' },
    { name: 'tenant', path: '/ui/tenants/nlp', ready: '#tenant-requests tr[data-request], #tenant-queues tr[data-queue="nlp/pretrain"]', all: ['#tenant-requests tr[data-request]', '#tenant-queues tr[data-queue="nlp/pretrain"]', '#tenant-history .panel svg', '#cost-by-queue'] },
    { name: 'policy', path: '/ui/policy', ready: '#policy-versions' },
    { name: 'policy-diff', path: `/ui/policy/diff?from=${firstVersion}&to=${secondVersion}`, ready: '#diff-lines' },
    { name: 'cost', path: '/ui/cost', ready: '#cost-by-tenant tbody tr', all: ['#cost-by-tenant tbody tr', '#cost-budgets tbody tr'] },
    { name: 'alerts', path: '/ui/alerts', ready: '#alerts-table tbody tr', all: ['#alerts-table tbody tr', '#alert-rules tr[data-rule]'] },
    { name: 'report', path: '/ui/reports/ops', ready: '#report-summary' },
    { name: 'services', path: '/ui/services', ready: '#services-table tr[data-service="vision/vit-classifier"]' },
    { name: 'service', path: '/ui/services/vision/vit-classifier', ready: '#service-replicas tbody tr', all: ['#service-revisions tbody tr'] },
  ];

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true });
  mkdirSync(outDir, { recursive: true });
  const written = [];
  for (const lang of ['en', 'zh']) {
    const context = await browser.newContext({
      locale: lang === 'zh' ? 'zh-CN' : 'en-US',
      timezoneId: 'UTC',
      viewport: { width: 1280, height: 800 },
      deviceScaleFactor: 1,
      reducedMotion: 'reduce',
    });
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push(String(e)));
    await page.goto(`${base}/ui/`);
    await page.waitForSelector('#token');
    await page.fill('#token', admin);
    await page.click('button[type=submit]');
    await page.waitForSelector('#jobs-table');
    for (const view of views) {
      await page.goto(base + view.path);
      await page.waitForSelector(view.ready, { timeout: 30000 });
      for (const sel of view.all ?? []) await page.waitForSelector(sel, { timeout: 30000 });
      if (view.reason) {
        // The server's reason in the page's language.
        const w = await call(admin, 'GET', `/v1/jobs/${waitingId}/why?lang=${lang}`);
        await page.waitForFunction(
          (m) => document.querySelector('#why-message')?.textContent?.trim() === m,
          w.reason.message,
          { timeout: 30000 },
        );
      }
      // Fonts loaded and the frame painted; nothing is focused.
      await page.evaluate(async () => {
        await document.fonts.ready;
        if (document.activeElement instanceof HTMLElement) document.activeElement.blur();
        await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      });
      const height = await page.evaluate(() => document.documentElement.scrollHeight);
      const file = join(outDir, `${view.name}-${lang}.png`);
      await page.screenshot({
        path: file,
        type: 'png',
        fullPage: true,
        clip: { x: 0, y: 0, width: 1280, height: Math.min(Math.max(height, 800), MAX_HEIGHT) },
      });
      written.push(file);
    }
    if (problems.length) throw new Error(`script errors on the pages: ${problems.join('; ')}`);
    await context.close();
  }
  let total = 0;
  for (const f of written) {
    const { size } = statSync(f);
    total += size;
    console.log(`${relative(process.cwd(), f)}  ${(size / 1024).toFixed(0)} KB`);
  }
  console.log(`console screenshots: ${written.length} files, ${(total / 1024).toFixed(0)} KB in all`);
} catch (e) {
  failed = true;
  console.error(e);
  console.error('--- berthd log (last 40 lines) ---');
  console.error(log.join('').split('\n').slice(-40).join('\n'));
} finally {
  if (browser) await browser.close().catch(() => undefined);
  // End the jobs still running, so their processes stop with them.
  if (admin) {
    try {
      const open = await fetch(`${base}/v1/jobs?state=Pending,Scheduled,Running&limit=100`, {
        headers: { Authorization: `Bearer ${admin}` },
      }).then((r) => r.json());
      for (const j of open.jobs ?? []) {
        await fetch(`${base}/v1/jobs/${j.id}/cancel`, { method: 'POST', headers: { Authorization: `Bearer ${admin}` } });
      }
      await waitFor('the jobs cancelled', async () => {
        const left = await fetch(`${base}/v1/jobs?state=Scheduled,Running&limit=100`, {
          headers: { Authorization: `Bearer ${admin}` },
        }).then((r) => r.json());
        return (left.jobs ?? []).length === 0;
      }, 20000);
    } catch {
      // berthd gone already: nothing to cancel
    }
  }
  berthd.kill('SIGTERM');
  await Promise.race([new Promise((r) => berthd.once('exit', r)), sleep(10000)]);
  if (berthd.exitCode === null && berthd.signalCode === null) berthd.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
