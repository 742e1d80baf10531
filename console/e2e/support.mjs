// What the console's browser scripts (console.e2e.mjs, screenshots.mjs)
// share: where the repository, Chromium and berthd are, the checks that make
// a script skip (exit 77, ctest's skip) saying why, free loopback ports,
// waiting for a condition, and an all-in-one berthd on plain loopback HTTP.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const SKIP = 77;
const here = dirname(fileURLToPath(import.meta.url));
export const consoleDir = resolve(here, '..');
export const repo = resolve(consoleDir, '..');
export const chromiumPath = process.env.BERTH_CHROMIUM ?? '/usr/bin/chromium';
export const binDir = resolve(process.env.BERTH_BIN_DIR ?? join(repo, 'build/dev/bin'));
export const berthdPath = join(binDir, 'berthd');

// A function that prints "SKIP <what>: <why>" and exits 77.
export function skipper(what) {
  return (why) => {
    console.log(`SKIP ${what}: ${why}`);
    process.exit(SKIP);
  };
}

// Skips unless Chromium, console/node_modules, berthd and the built console
// are there; returns where the console's assets are: where berthd looks by
// default (scripts/build-console.sh puts them there), else console/dist.
export function requirePrerequisites(skip) {
  if (!existsSync(chromiumPath)) {
    skip(`no Chromium at ${chromiumPath} (scripts/install-deps.sh installs Debian's chromium)`);
  }
  if (!existsSync(join(consoleDir, 'node_modules/playwright-core'))) {
    skip('console/node_modules is missing: run `npm ci` in console/ (scripts/test.sh does)');
  }
  if (!existsSync(berthdPath)) skip(`no berthd at ${berthdPath} (set BERTH_BIN_DIR)`);
  const uiDir = existsSync(join(binDir, 'ui/index.html')) ? join(binDir, 'ui') : join(consoleDir, 'dist');
  if (!existsSync(join(uiDir, 'index.html'))) {
    skip('the console is not built: run `npm run build` in console/');
  }
  return uiDir;
}

export function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Calls `check` until it returns something truthy (a throw counts as not
// yet), every `step` ms; throws naming `what` after `ms`.
export async function waitFor(what, check, ms = 30000, step = 100) {
  const end = Date.now() + ms;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch {
      // not yet
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(step);
  }
}

// An all-in-one berthd in `dir` (data in dir/data) on free loopback ports,
// plain HTTP, no gateway, serving the console from `uiDir` (if given);
// `extra` flags are added. Its output is collected in `log`.
export async function startBerthd(dir, uiDir, extra = []) {
  const apiPort = await freePort();
  const agentPort = await freePort();
  const log = [];
  const berthd = spawn(
    berthdPath,
    [
      '--all-in-one', '--plain-http', '--plain-agents',
      '--data-dir', join(dir, 'data'),
      '--listen', `127.0.0.1:${apiPort}`,
      '--agent-listen', `127.0.0.1:${agentPort}`,
      '--gateway-listen', 'off',
      ...extra,
      ...(uiDir ? ['--ui-dir', uiDir] : []),
    ],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  berthd.stdout.on('data', (d) => log.push(String(d)));
  berthd.stderr.on('data', (d) => log.push(String(d)));
  return { berthd, base: `http://127.0.0.1:${apiPort}`, apiPort, agentPort, log };
}
