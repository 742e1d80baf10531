import { describe, expect, it } from 'vitest';
import { ApiError, BerthApi, type Caller, canCancel, jobShape, type JobSummary, whyMayHaveChanged } from '../src/api';

interface Sent {
  url: string;
  method: string;
  headers: Record<string, string>;
}

// A server that records what the console sends and answers from `answer`.
function fakeServer(answer: (s: Sent) => { status: number; body: unknown }) {
  const sent: Sent[] = [];
  const fetchFn = async (url: string, init?: RequestInit) => {
    const s = { url, method: init?.method ?? 'GET', headers: { ...(init?.headers as Record<string, string>) } };
    sent.push(s);
    const a = answer(s);
    return new Response(JSON.stringify(a.body), { status: a.status });
  };
  return { sent, api: new BerthApi(fetchFn) };
}

const session: Caller = {
  name: 'alice',
  kind: 'user',
  platform_admin: false,
  tenants: { vision: 'member' },
  console: { csrf: 'c5rf-token', csrf_header: 'X-Berth-CSRF', expires_at_ms: 1 },
};

describe('the API client', () => {
  it('sends the bearer token only to sign in, and the CSRF token on writes, never on GET', async () => {
    const { sent, api } = fakeServer((s) => {
      if (s.url === '/v1/console/session') return { status: s.method === 'POST' ? 201 : 200, body: session };
      if (s.url.startsWith('/v1/jobs?')) return { status: 200, body: { jobs: [] } };
      return { status: 200, body: { id: 3, state: 'Cancelled' } };
    });
    await api.signIn('  secret-token\n');
    expect(sent[0].method).toBe('POST');
    expect(sent[0].headers.Authorization).toBe('Bearer secret-token');
    expect(sent[0].headers['X-Berth-CSRF']).toBeUndefined();

    await api.listJobs({ state: [], queue: '', tenant: '' });
    await api.job(3);
    await api.why(3, 'zh');
    await api.cancel(3);
    await api.signOut();
    const [list, job, why, cancel, signOut] = sent.slice(1);
    for (const get of [list, job, why]) {
      expect(get.method).toBe('GET');
      expect(get.headers['X-Berth-CSRF']).toBeUndefined();
      expect(get.headers.Authorization).toBeUndefined();
    }
    expect(why.url).toBe('/v1/jobs/3/why?lang=zh');
    expect(cancel).toMatchObject({ method: 'POST', url: '/v1/jobs/3/cancel' });
    expect(cancel.headers['X-Berth-CSRF']).toBe('c5rf-token');
    expect(cancel.headers.Authorization).toBeUndefined();
    expect(signOut.method).toBe('DELETE');
    expect(signOut.headers['X-Berth-CSRF']).toBe('c5rf-token');
    // Signed out: the CSRF token is forgotten.
    expect(api.signedIn).toBe(false);
    await api.cancel(3);
    expect(sent.at(-1)!.headers['X-Berth-CSRF']).toBeUndefined();
  });

  it('uses the header name the server names', async () => {
    const renamed = { ...session, console: { ...session.console!, csrf_header: 'X-Other-CSRF' } };
    const { sent, api } = fakeServer(() => ({ status: 200, body: renamed }));
    await api.session();
    await api.cancel(1);
    expect(sent[1].headers['X-Other-CSRF']).toBe('c5rf-token');
  });

  it('reads a reloaded session back, and none after a 401 or for a bearer caller', async () => {
    let status = 200;
    let body: unknown = session;
    const { api } = fakeServer(() => ({ status, body }));
    expect((await api.session())?.name).toBe('alice');
    status = 401;
    body = { error: { code: 'Unauthenticated', message: 'this console session expired; sign in again' } };
    expect(await api.session()).toBeNull();
    status = 200;
    body = { ...session, console: null };
    expect(await api.session()).toBeNull();
  });

  it("turns the server's error into an ApiError with its message and field", async () => {
    const { api } = fakeServer(() => ({
      status: 409,
      body: { error: { code: 'FailedPrecondition', message: 'job 3 already finished', field: 'job' } },
    }));
    const e = await api.cancel(3).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect(e).toMatchObject({ status: 409, message: 'job 3 already finished', field: 'job' });
  });
});

describe('who sees Cancel', () => {
  it('follows the roles the server checks', () => {
    const c = (tenants: Record<string, string>, platform_admin = false): Caller => ({
      ...session,
      tenants,
      platform_admin,
    });
    expect(canCancel(c({ vision: 'member' }), 'vision')).toBe(true);
    expect(canCancel(c({ vision: 'tenant-admin' }), 'vision')).toBe(true);
    expect(canCancel(c({ vision: 'viewer' }), 'vision')).toBe(false);
    expect(canCancel(c({ nlp: 'member' }), 'vision')).toBe(false);
    expect(canCancel(c({}, true), 'vision')).toBe(true);
  });
});

describe('one job', () => {
  const listed = {
    id: 1, name: 'a', tenant: 'vision', queue: 'q', submitted_by: 'alice', state: 'Pending',
    reason: { code: 'NoNodeFits', message: 'no node fits' }, priority: 'low', replicas: 4, resources: { gpus: 2 },
    submitted_at_ms: 1, started_at_ms: null, finished_at_ms: null, cancel_requested: false,
  } as JobSummary;

  it("takes priority, replicas and GPUs from the list's fields, else from the spec GET /v1/jobs/{id} sends", () => {
    expect(jobShape(listed)).toEqual({ priority: 'low', replicas: 4, gpus: 2 });
    const { priority: _p, replicas: _r, resources: _g, ...one } = listed;
    const single = { ...one, spec: { priority: 'high', replicas: 1, resources: { gpus: 16 } } } as unknown as JobSummary;
    expect(jobShape(single)).toEqual({ priority: 'high', replicas: 1, gpus: 16 });
  });

  it('is asked for its why again only when its state or reason moved', () => {
    expect(whyMayHaveChanged(null, listed)).toBe(true);
    expect(whyMayHaveChanged(listed, { ...listed })).toBe(false);
    expect(whyMayHaveChanged(listed, { ...listed, state: 'Running' })).toBe(true);
    expect(whyMayHaveChanged(listed, { ...listed, reason: { code: 'NoNodeFits', message: 'no node fits; starts in about 5 min' } })).toBe(true);
  });
});
