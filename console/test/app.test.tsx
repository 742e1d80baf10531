import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BerthApi, type Caller } from '../src/api';
import { LANG_STORAGE_KEY } from '../src/i18n';
import { json, settle, startApp } from './support';

const job = {
  id: 12,
  name: 'resnet',
  tenant: 'vision',
  queue: 'train',
  submitted_by: 'alice',
  state: 'Pending',
  reason: { code: 'NoNodeFits', message: 'no node fits' },
  priority: 'normal',
  replicas: 1,
  resources: { gpus: 16 },
  submitted_at_ms: 1,
  started_at_ms: null,
  finished_at_ms: null,
  cancel_requested: false,
};

function caller(role: string): Caller {
  return {
    name: 'bob',
    kind: 'user',
    platform_admin: false,
    tenants: { vision: role },
    console: { csrf: 'c', csrf_header: 'X-Berth-CSRF', expires_at_ms: 1 },
  };
}

// The console over a fake API; `who` is the session GET answers (null: none).
function mount(who: Caller | null, path: string, listStatus = 200) {
  const calls: string[] = [];
  const api = new BerthApi(async (url, init) => {
    calls.push(`${init?.method ?? 'GET'} ${url}`);
    if (url === '/v1/console/session') {
      if (init?.method === 'POST') return json(201, caller('member'));
      return who ? json(200, who) : json(401, { error: { message: 'no session' } });
    }
    if (url.startsWith('/v1/jobs?')) {
      if (listStatus !== 200) return json(listStatus, { error: { message: 'this console session expired; sign in again' } });
      return json(200, { jobs: [job], next: 'cursor-2' });
    }
    if (url.startsWith('/v1/jobs/12/why')) {
      const zh = url.endsWith('lang=zh');
      return json(200, { id: 12, state: 'Pending', lang: zh ? 'zh' : 'en', reason: { code: 'NoNodeFits', message: zh ? '没有节点' : 'no node fits' }, timeline: [] });
    }
    if (url === '/v1/jobs/12') return json(200, job);
    return json(404, { error: { message: 'no' } });
  });
  return { root: startApp(api, path), calls };
}

describe('the console', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it('hides Cancel from a viewer and shows it to a member', async () => {
    const viewer = mount(caller('viewer'), '/ui/jobs/12');
    await settle(() => viewer.root.querySelector('#why-message') !== null);
    expect(viewer.root.querySelector('#cancel')).toBeNull();
    document.body.innerHTML = '';
    const member = mount(caller('member'), '/ui/jobs/12');
    await settle(() => member.root.querySelector('#cancel') !== null);
  });

  it('asks for the reason in the language chosen, and keeps the choice', async () => {
    localStorage.setItem(LANG_STORAGE_KEY, 'zh');
    const { root, calls } = mount(caller('member'), '/ui/jobs/12');
    await settle(() => root.querySelector('#why-message')?.textContent === '没有节点');
    expect(calls).toContain('GET /v1/jobs/12/why?lang=zh');
    expect(document.documentElement.lang).toBe('zh-CN');
    expect(root.querySelector('h2')?.textContent).toBe('概要');
  });

  it('goes back to sign-in, saying why, when a request finds the session ended', async () => {
    const { root } = mount(caller('member'), '/ui/jobs', 401);
    await settle(() => root.querySelector('#token') !== null);
    expect(root.textContent).toContain('Your session has ended. Sign in again.');
  });

  it('signs in without keeping the token anywhere', async () => {
    const { root } = mount(null, '/ui/jobs');
    await settle(() => root.querySelector('#token') !== null);
    const input = root.querySelector<HTMLInputElement>('#token')!;
    input.value = 'brt_secret';
    root.querySelector('form')!.dispatchEvent(new Event('submit', { cancelable: true }));
    await settle(() => root.querySelector('#jobs-table') !== null);
    expect(JSON.stringify({ ...localStorage })).not.toContain('brt_secret');
    expect(document.cookie).not.toContain('brt_secret');
    expect(document.body.innerHTML).not.toContain('brt_secret');
    expect(root.querySelector('#jobs-more')).not.toBeNull();
  });
});
