import { describe, expect, it } from 'vitest';
import type { Caller } from '../src/api';
import {
  appendServices,
  canManageService,
  checkScale,
  parseServiceFilters,
  revisionChanges,
  scaleFieldOf,
  scaleQuery,
  type Service,
  serviceActions,
  serviceFilterParams,
  servicePath,
  serviceRow,
  servicesQuery,
  sessionEnd,
  sloState,
} from '../src/services';

const caller = (tenants: Record<string, string>, admin = false): Caller => ({
  name: 'x', kind: 'user', platform_admin: admin, tenants, console: null,
});

export function service(over: Partial<Service> = {}, status: Partial<Service['status']> = {}): Service {
  return {
    tenant: 'blue', name: 'coder', queue: 'serve', revision: 3,
    created_ms: 1, created_by: 'ann', updated_ms: 2, updated_by: 'bob',
    spec: { name: 'coder', tenant: 'blue', queue: 'serve', command: ['serve'], replicas: { min: 1, max: 4 } },
    status: { revision: 3, desired: 2, ready: 1, not_ready: 1, running: 2, starting: 0, stopping: 0, phase: 'scaling', endpoint: null, ...status },
    ...over,
  };
}

describe('filters', () => {
  it('round-trip through the URL and drop a kind the API does not know', () => {
    const f = parseServiceFilters('?kind=session&tenant=blue');
    expect(f).toEqual({ kind: 'session', tenant: 'blue' });
    expect(serviceFilterParams(f).toString()).toBe('kind=session&tenant=blue');
    expect(parseServiceFilters('?kind=job').kind).toBe('');
    expect(serviceFilterParams({ kind: '', tenant: ' ' }).toString()).toBe('');
  });
  it('become GET /v1/services\'s query with the page', () => {
    expect(servicesQuery({ kind: 'service', tenant: '' }, { limit: 50, after: 'c1' })).toBe('kind=service&limit=50&after=c1');
  });
});

describe('rows', () => {
  it('have replicas ready of desired within the bounds, the phase and no endpoint without a gateway', () => {
    const r = serviceRow(service());
    expect(r).toMatchObject({ key: 'blue/coder', kind: 'service', ready: 1, desired: 2, min: 1, max: 4, revision: 3, phase: 'scaling', endpoint: null, slo: 'none' });
  });
  it('take a session as one replica and show no SLO', () => {
    const s = service({ spec: { kind: 'session', name: 'nb', tenant: 'blue', queue: 'nb' } }, { slo: null });
    expect(serviceRow(s)).toMatchObject({ kind: 'session', min: 1, max: 1, slo: 'none' });
  });
  it('name the phase pending before the controller\'s first round', () => {
    expect(serviceRow(service({}, { phase: undefined })).phase).toBe('pending');
  });
  it('keep a service listed twice once, in its newest form', () => {
    const a = service();
    const b = service({ name: 'b' });
    const a2 = service({ revision: 4 });
    expect(appendServices([a, b], [a2, service({ name: 'c' })]).map((s) => `${s.name}@${s.revision}`)).toEqual(['coder@4', 'b@3', 'c@3']);
  });
  it('link a name with odd characters', () => {
    expect(servicePath({ tenant: 'blue', name: 'a b' })).toBe('/ui/services/blue/a%20b');
  });
});

describe('the SLO', () => {
  const slo = { window: '1h', latency_p95_ms: 800, windows: 10, windows_met: 9, requests: 100, errors: 1, latency_attainment: 0.9, availability: 0.99, error_budget_burn: 10 };
  it('is burning above a burn of 1, met at or below, without traffic said so', () => {
    expect(sloState(slo)).toBe('burning');
    expect(sloState({ ...slo, error_budget_burn: 1 })).toBe('met');
    expect(sloState({ ...slo, requests: 0, availability: null, error_budget_burn: null })).toBe('no_traffic');
    expect(sloState(null)).toBe('none');
  });
});

describe('revisions', () => {
  it('are newest first with what changed from the one before', () => {
    const revs = [
      { revision: 1, change: 'apply', restores: null, created_ms: 1, created_by: 'ann', image: 'img:v1', replicas: { min: 1, max: 1 } },
      { revision: 3, change: 'rollback', restores: 1, created_ms: 3, created_by: 'bob', image: 'img:v1', replicas: { min: 1, max: 4 } },
      { revision: 2, change: 'scale', restores: null, created_ms: 2, created_by: 'bob', image: 'img:v2', replicas: { min: 1, max: 4 } },
    ];
    const out = revisionChanges(revs);
    expect(out.map((r) => r.revision)).toEqual([3, 2, 1]);
    expect(out[0]).toMatchObject({ change: 'rollback', restores: 1, image_from: 'img:v2', bounds_from: null });
    expect(out[1]).toMatchObject({ image_from: 'img:v1', bounds_from: { min: 1, max: 1 } });
    expect(out[2]).toMatchObject({ image_from: null, bounds_from: null });
    expect(revisionChanges(undefined)).toEqual([]);
  });
});

describe('who may change a service', () => {
  it('is a member, tenant-admin or platform admin; never a viewer or another tenant', () => {
    expect(canManageService(caller({ blue: 'member' }), 'blue')).toBe(true);
    expect(canManageService(caller({ blue: 'tenant-admin' }), 'blue')).toBe(true);
    expect(canManageService(caller({}, true), 'blue')).toBe(true);
    expect(canManageService(caller({ blue: 'viewer' }), 'blue')).toBe(false);
    expect(canManageService(caller({ red: 'member' }), 'blue')).toBe(false);
  });
  it('offers scale only for a service, rollback with an earlier revision, resume only when a step awaits', () => {
    const m = caller({ blue: 'member' });
    expect(serviceActions(m, service())).toEqual({ scale: true, rollback: true, resume: false, delete: true });
    const canary = { step: 1, steps: 3, weight_pct: 10, replicas: 1, ready: 1, pause_ends_ms: null, awaiting_resume: true };
    expect(serviceActions(m, service({}, { canary })).resume).toBe(true);
    expect(serviceActions(m, service({ revision: 1 })).rollback).toBe(false);
    const session = service({ spec: { kind: 'session', name: 'nb', tenant: 'blue', queue: 'nb' } });
    expect(serviceActions(m, session).scale).toBe(false);
    expect(serviceActions(caller({ blue: 'viewer' }), service({}, { canary }))).toEqual({ scale: false, rollback: false, resume: false, delete: false });
  });
});

describe('the scale form', () => {
  const cur = { min: 1, max: 4 };
  it('sends only the bounds given', () => {
    expect(checkScale('2', '', cur)).toEqual({ min: 2, errors: [] });
    expect(scaleQuery(checkScale('', '8', cur))).toBe('max=8');
    expect(scaleQuery(checkScale('0', '3', cur))).toBe('min=0&max=3');
  });
  it('refuses what berthd would, on the field', () => {
    expect(checkScale('', '', cur).errors).toEqual([{ field: 'min', kind: 'nothing' }]);
    expect(checkScale('1.5', '', cur).errors).toEqual([{ field: 'min', kind: 'notWhole' }]);
    expect(checkScale('-1', '', cur).errors).toEqual([{ field: 'min', kind: 'notWhole' }]);
    expect(checkScale('', '0', cur).errors).toEqual([{ field: 'max', kind: 'maxRange' }]);
    expect(checkScale('', '1025', cur).errors).toEqual([{ field: 'max', kind: 'maxRange' }]);
    expect(checkScale('2000', '', cur).errors).toEqual([{ field: 'min', kind: 'minRange' }]);
    expect(checkScale('5', '', cur).errors).toEqual([{ field: 'min', kind: 'minAboveMax' }]);
    expect(checkScale('3', '2', cur).errors).toEqual([{ field: 'max', kind: 'minAboveMax' }]);
  });
  it('places a server field on its input', () => {
    expect(scaleFieldOf('min')).toBe('min');
    expect(scaleFieldOf('replicas.max')).toBe('max');
    expect(scaleFieldOf('kind')).toBeNull();
  });
});

describe('a session\'s end', () => {
  it('is the earlier of its lifetime and its idle window', () => {
    expect(sessionEnd({ expires_ms: 100, max_lifetime_ms: 50, idle_since_ms: null, idle_ends_ms: null })).toEqual({ at_ms: 100, cause: 'lifetime' });
    expect(sessionEnd({ expires_ms: 100, max_lifetime_ms: 50, idle_since_ms: 10, idle_ends_ms: 70 })).toEqual({ at_ms: 70, cause: 'idle' });
    expect(sessionEnd(null)).toBeNull();
  });
});
