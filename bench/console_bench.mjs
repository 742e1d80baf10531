// berth-console-bench: what the web console costs, measured in headless
// Chromium against a real all-in-one berthd on a simulated cluster
// (docs/testing.md, "console bench"):
//
//   1. time to interactive of the jobs page with --jobs queued (default
//      10,000, one array): from navigation to the first page of the table
//      drawn and the page idle, median of --loads reloads;
//   2. --consoles browser contexts (default 50), each signed in on the jobs
//      page, left open for --idle seconds: berthd's resident memory before
//      and with them, its CPU time over the idle window, and the API
//      requests the consoles made in it (polling shows here; live updates
//      over GET /v1/events make none while nothing changes).
//
//   node bench/console_bench.mjs [--jobs N] [--consoles N] [--idle S] [--loads N]
//
// BERTH_BIN_DIR names the bin directory with berthd and ui/ (default
// build/release/bin, then build/dev/bin). Exits 77 (skip) without Chromium,
// console/node_modules or a built console.
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '..');
if (!process.env.BERTH_BIN_DIR) {
  const release = join(repo, 'build/release/bin');
  process.env.BERTH_BIN_DIR = existsSync(join(release, 'ui/index.html')) ? release : join(repo, 'build/dev/bin');
}
const support = await import(join(repo, 'console/e2e/support.mjs'));
const { chromiumPath, requirePrerequisites, skipper, startBerthd, waitFor, sleep, binDir } = support;

function flag(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}
const jobs = flag('jobs', 10000);
const consoles = flag('consoles', 50);
const idleSeconds = flag('idle', 30);
const loads = flag('loads', 5);

const uiDir = requirePrerequisites(skipper('console bench'));
const require = createRequire(join(repo, 'console/package.json'));
const { chromium } = require('playwright-core');

// berthd's resident memory (KiB) and CPU time (clock ticks) from /proc.
function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}
function cpuTicks(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime + stime
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mib = (kib) => (kib / 1024).toFixed(0);

const dir = mkdtempSync(join(tmpdir(), 'berth-console-bench-'));
const { berthd, base, log } = await startBerthd(dir, uiDir);
let browser;
try {
  const token = await waitFor('the bootstrap token', () => readFileSync(join(dir, 'data/bootstrap-token'), 'utf8').trim());
  const auth = { Authorization: `Bearer ${token}` };
  await waitFor('a Ready node', async () => {
    const r = await fetch(`${base}/v1/nodes`, { headers: auth });
    return r.ok && (await r.json()).nodes.some((n) => n.state === 'Ready');
  });
  // One array of `jobs` elements, each asking more GPUs than a node has: all
  // wait, so the list is as long as asked and stays still.
  const spec = `name: queued\ntenant: default\nresources: {gpus: 64}\ncommand: ['true']\narray: ${jobs}\n`;
  const submitted = await fetch(`${base}/v1/jobs`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/yaml' }, body: spec });
  if (submitted.status !== 201) throw new Error(`submitting the array: ${submitted.status} ${await submitted.text()}`);
  await sleep(3000); // a scheduling pass or two over the new queue
  const idleRss = rssKiB(berthd.pid);
  // berthd's own CPU with no console: its scheduling passes over the queue.
  const quiet0 = cpuTicks(berthd.pid);
  await sleep(idleSeconds * 1000);
  const quietCpu = cpuTicks(berthd.pid) - quiet0;

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true });
  async function signedIn() {
    const context = await browser.newContext({ locale: 'en-US' });
    const page = await context.newPage();
    await page.goto(`${base}/ui/`);
    await page.waitForSelector('#token');
    await page.fill('#token', token);
    await page.click('button[type=submit]');
    await page.waitForSelector('#jobs-table tr[data-job]', { timeout: 60000 });
    return { context, page };
  }

  // 1. Time to interactive of the jobs page.
  const one = await signedIn();
  const times = [];
  for (let i = 0; i < loads; i++) {
    const t0 = Date.now();
    await one.page.goto(`${base}/ui/jobs`);
    await one.page.waitForSelector('#jobs-table tr[data-job]', { timeout: 60000 });
    // Idle: the main thread answers a frame after the table is drawn.
    await one.page.evaluate(() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0))));
    times.push(Date.now() - t0);
  }
  const rows = await one.page.locator('#jobs-table tr[data-job]').count();
  await one.context.close();

  // 2. Many consoles open on the jobs page.
  const open = [];
  for (let i = 0; i < consoles; i++) open.push(await signedIn());
  await sleep(2000);
  let requests = 0;
  let streams = 0;
  for (const { page } of open) {
    page.on('request', (r) => {
      const path = new URL(r.url()).pathname;
      if (path === '/v1/events') streams++;
      else if (path.startsWith('/v1/')) requests++;
    });
  }
  const cpu0 = cpuTicks(berthd.pid);
  await sleep(idleSeconds * 1000);
  const cpu1 = cpuTicks(berthd.pid);
  const withRss = rssKiB(berthd.pid);

  console.log(`berthd ${join(binDir, 'berthd')}, console ${uiDir}`);
  console.log(`| figure | value |`);
  console.log(`| --- | --- |`);
  console.log(`| jobs queued | ${jobs} (${rows} rows on the first page) |`);
  console.log(`| jobs page, time to interactive (median of ${loads}) | ${median(times)} ms (all: ${times.join(', ')}) |`);
  console.log(`| berthd RSS, no console | ${mib(idleRss)} MiB |`);
  console.log(`| berthd RSS, ${consoles} consoles on the jobs page | ${mib(withRss)} MiB |`);
  console.log(`| API requests by the ${consoles} consoles in ${idleSeconds} s idle | ${requests} (${(requests / idleSeconds).toFixed(1)}/s); event streams opened meanwhile: ${streams} |`);
  const pct = (ticks) => (((ticks / 100) / idleSeconds) * 100).toFixed(1);
  console.log(`| berthd CPU, ${idleSeconds} s with no console | ${pct(quietCpu)}% of one core |`);
  console.log(`| berthd CPU over the ${idleSeconds} s with the consoles | ${pct(cpu1 - cpu0)}% of one core |`);
  for (const { context } of open) await context.close();
} catch (e) {
  console.error(log.join('').slice(-3000));
  throw e;
} finally {
  if (browser) await browser.close();
  berthd.kill('SIGTERM');
  await sleep(500);
  rmSync(dir, { recursive: true, force: true });
}
