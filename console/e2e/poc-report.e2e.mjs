// The PoC report in a real browser (ctest -R poc_report_browser_test): the
// HTML `berth poc run` writes is what a platform team opens offline and
// signs off on, so it is checked where it is read, in headless Chromium.
//
// Against an all-in-one berthd on a simulated node it runs the built-in
// suite with one capability broken (the train queue's quota not enforced,
// as an operator could leave it), opens report.html from disk and checks:
//   - the page asks for nothing outside its own file (every request other
//     than the file:// document is counted and must be none) and throws no
//     script error;
//   - every case of report.json has its section with its verdict, the
//     failed case is listed under "Must fix" with a link that lands on its
//     section, and that section names its risk and its re-test;
//   - every in-page link has its target;
//   - axe finds nothing serious or critical, and the page does not scroll
//     sideways on a 1280 px or a 400 px wide screen.
// The report committed in docs/examples/poc/ is opened the same way.
// With BERTH_POC_SCREENSHOT=FILE it also writes the failed run's first
// screen there (docs/examples/poc/README.md says how the committed one was
// made).
//
// Skips (exit 77, saying why) without Chromium, console/node_modules,
// berthd or berth.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { binDir, berthdPath, chromiumPath, consoleDir, repo, skipper, startBerthd, waitFor } from './support.mjs';

const skip = skipper('PoC report browser test');
if (!existsSync(chromiumPath)) skip(`no Chromium at ${chromiumPath} (scripts/install-deps.sh installs it)`);
if (!existsSync(join(consoleDir, 'node_modules/playwright-core'))) {
  skip('console/node_modules is missing: run `npm ci` in console/ (scripts/test.sh does)');
}
const berthPath = join(binDir, 'berth');
if (!existsSync(berthdPath) || !existsSync(berthPath)) skip(`no berthd and berth in ${binDir} (set BERTH_BIN_DIR)`);

const { chromium } = await import('playwright-core');
const { default: AxeBuilder } = await import('@axe-core/playwright');

// Runs `berth` with `args`; resolves to {code, out, err}.
function berth(args, env, ms = 240000) {
  return new Promise((ok) => {
    const p = spawn(berthPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), ms);
    p.on('close', (code) => {
      clearTimeout(timer);
      ok({ code, out, err });
    });
  });
}

// Opens `file` and returns the page with what it asked the network for and
// the script errors it raised.
async function openReport(browser, file, width) {
  const context = await browser.newContext({ viewport: { width, height: 1000 } });
  const page = await context.newPage();
  const requests = [];
  const errors = [];
  const doc = pathToFileURL(file).href;
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url === doc) return route.continue();
    requests.push(url);
    return route.abort();
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(doc);
  return { context, page, requests, errors };
}

async function checkSelfContained(browser, file, where) {
  for (const width of [1280, 400]) {
    const { context, page, requests, errors } = await openReport(browser, file, width);
    assert.deepEqual(requests, [], `${where} at ${width} px asks for nothing outside itself`);
    assert.deepEqual(errors, [], `${where} at ${width} px raises no script error`);
    const sideways = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
    assert.ok(sideways <= 0, `${where} scrolls sideways by ${sideways} px at ${width} px`);
    // Every in-page link lands somewhere.
    const dangling = await page.evaluate(() =>
      [...document.querySelectorAll('a[href^="#"]')]
        .map((a) => a.getAttribute('href').slice(1))
        .filter((id) => !document.getElementById(decodeURIComponent(id))),
    );
    assert.deepEqual(dangling, [], `${where}: links without a target`);
    if (width === 1280) {
      const result = await new AxeBuilder({ page }).analyze();
      const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
      assert.deepEqual(
        bad.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
        [],
        `axe on ${where}`,
      );
    }
    await context.close();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'berth-poc-report-'));
let server;
let browser;
let ok = false;
try {
  server = await startBerthd(dir, null);
  const { base } = server;
  const admin = await waitFor('the bootstrap token', () => readFileSync(join(dir, 'data/bootstrap-token'), 'utf8').trim());
  await waitFor('a Ready simulated node', async () => {
    const r = await fetch(`${base}/v1/nodes`, { headers: { Authorization: `Bearer ${admin}` } });
    return r.ok && (await r.text()).includes('"Ready"');
  });
  const env = { BERTH_TOKEN: admin, HOME: dir };

  // The built-in suite with the train queue's quota not enforced.
  const printed = await berth(['--server', base, 'poc', 'suite'], env);
  assert.equal(printed.code, 0, printed.err);
  assert.ok(printed.out.includes('over_quota: reject'), 'the built-in suite sets over_quota: reject');
  writeFileSync(join(dir, 'broken.yaml'), printed.out.replace('over_quota: reject', 'over_quota: borrow'));
  const out = join(dir, 'report');
  const run = await berth(['--server', base, 'poc', 'run', '--suite', join(dir, 'broken.yaml'), '--out', out, '--allow-on', base], env);
  // A run with a failed case says so in its exit status.
  assert.notEqual(run.code, 0, `a run with a failed case exits non-zero\n${run.out}\n${run.err}`);
  const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
  const failed = report.cases.filter((c) => c.verdict === 'fail').map((c) => c.id);
  assert.deepEqual(failed, ['quota-over-request-refused'], 'only the quota case fails');

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true });
  const html = join(out, 'report.html');
  await checkSelfContained(browser, html, 'the run\'s report');

  const { context, page } = await openReport(browser, html, 1280);
  // Each case has its section, with its verdict as report.json has it.
  for (const c of report.cases) {
    const section = page.locator(`#case-${c.id}`);
    assert.equal(await section.count(), 1, `a section for ${c.id}`);
    const verdict = (await section.locator('.verdict').first().textContent()).trim();
    assert.equal(verdict, c.verdict, `${c.id}'s verdict`);
    assert.ok(await section.isVisible(), `${c.id}'s section is shown`);
  }
  // The failed case is under "Must fix", and its link lands on its section,
  // which names the risk and how to re-test.
  const listed = await page.evaluate(() => {
    const hrefs = [];
    for (let e = document.getElementById('must_fix').nextElementSibling; e && e.tagName !== 'H3'; e = e.nextElementSibling) {
      for (const a of e.querySelectorAll('a[href^="#"]')) hrefs.push(a.getAttribute('href'));
    }
    return hrefs;
  });
  assert.deepEqual(listed, ['#case-quota-over-request-refused'], 'Must fix lists the failed case, and only it');
  await page.locator('a[href="#case-quota-over-request-refused"]').first().click();
  const hash = await page.evaluate(() => location.hash);
  assert.equal(hash, '#case-quota-over-request-refused');
  const section = page.locator('#case-quota-over-request-refused');
  assert.ok(await section.isVisible());
  const text = await section.textContent();
  assert.match(text, /risk high/, 'the failed case names its risk');
  assert.match(text, /Re-test: /, 'the failed case says how to re-test');
  assert.match(text, /fail/);
  if (process.env.BERTH_POC_SCREENSHOT) {
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.setViewportSize({ width: 1200, height: 1700 });
    await page.screenshot({ path: process.env.BERTH_POC_SCREENSHOT });
  }
  await context.close();

  // The committed example renders the same way.
  await checkSelfContained(browser, join(repo, 'docs/examples/poc/report.html'), 'docs/examples/poc/report.html');
  ok = true;
  console.log(`PoC report browser test: ${report.cases.length} cases rendered, the failed one listed and linked`);
} finally {
  if (browser) await browser.close();
  if (server) server.berthd.kill('SIGTERM');
  if (!ok && server) console.log(server.log.join('').slice(-4000));
  rmSync(dir, { recursive: true, force: true });
}
