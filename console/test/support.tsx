// What the console's page tests share: the console mounted over a fake
// API at a URL, waiting for the page to show something, and clicking.
import { render } from 'preact';
import { expect } from 'vitest';
import { type BerthApi, type Caller } from '../src/api';
import { App } from '../src/app';
import type { LiveHub } from '../src/live';

// A platform admin's console session.
export const platformAdmin: Caller = {
  name: 'root',
  kind: 'user',
  platform_admin: true,
  tenants: {},
  console: { csrf: 'c5rf', csrf_header: 'X-Berth-CSRF', expires_at_ms: 1 },
};

// An API answer as berthd sends it.
export const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status });

// The console at `path` over `api`, in a new element of the document; with
// `live`, its event stream (else it polls, as without EventSource).
export function startApp(api: BerthApi, path: string, live?: LiveHub): HTMLElement {
  history.replaceState(null, '', path);
  const root = document.createElement('div');
  document.body.appendChild(root);
  render(<App api={api} live={live} />, root);
  return root;
}

// Waits (up to a second) for `check` to hold, and fails the test if it never does.
export async function settle(check: () => boolean) {
  for (let i = 0; i < 100 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(check()).toBe(true);
}

export function click(el: Element | null) {
  expect(el).not.toBeNull();
  (el as HTMLElement).click();
}
